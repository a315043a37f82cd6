package service

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/parley-engine/parley/lease"
	"github.com/parley-engine/parley/partition"
)

// groupFence is the supervisor's fence (runner.Fence) over the engine's
// share of the partitions (lease.Group).
type groupFence struct{ g *lease.Group }

func (f groupFence) Holds(d string) bool { return f.g.Holds(partition.Of(d)) }

func (f groupFence) Renew(ctx context.Context, d string) (string, error) {
	return f.g.Renew(ctx, partition.Of(d))
}

// engineName is the engine's name among those that share the partitions:
// cfg.EngineName, or the host's name and the process id.
func engineName(cfg Config) string {
	if cfg.EngineName != "" {
		return cfg.EngineName
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "engine"
	}
	name := []byte(host + "-" + strconv.Itoa(os.Getpid()))
	for i, c := range name {
		// A key token: no '.', '*', '>' nor spaces.
		if c == '.' || c == '*' || c == '>' || c <= ' ' || c > '~' {
			name[i] = '_'
		}
	}
	return string(name)
}

// startLeases joins the engines that share the deliberations' supervision
// by partition leases: the lease bucket (created with the stream's
// replicas when missing), the engine's group, and the supervisor's fence.
// The group runs until ctx ends, then releases its leases.
func (s *Service) startLeases(ctx, runCtx context.Context, cfg Config) error {
	replicas := 1
	if ci := s.Stream.CachedInfo(); ci != nil && ci.Config.Replicas > 0 {
		replicas = ci.Config.Replicas
	}
	kv, err := lease.Bucket(ctx, s.js, lease.Config{TTL: cfg.LeaseTTL, Replicas: replicas})
	if err != nil {
		return fmt.Errorf("service: the lease bucket: %w", err)
	}
	name := engineName(cfg)
	m, err := lease.New(ctx, kv, name)
	if err != nil {
		return fmt.Errorf("service: leases: %w", err)
	}
	log := s.log.With("component", "leases", "engine", name)
	g, err := lease.NewGroup(m, lease.GroupConfig{Partitions: partition.Count, OnChange: func(held []int) {
		log.Info("partitions held", "count", len(held))
	}})
	if err != nil {
		return fmt.Errorf("service: leases: %w", err)
	}
	s.Supervisor.Fence = groupFence{g}
	s.Group = g
	s.groupDone = make(chan struct{})
	go func() {
		defer close(s.groupDone)
		if err := g.Run(runCtx); err != nil && runCtx.Err() == nil {
			log.Error("the engine left the group: its supervisor judges nothing", "err", err)
		}
	}()
	log.Info("sharing the deliberations' supervision by partition leases", "bucket", lease.DefaultBucket, "ttl", m.TTL(), "replicas", replicas)
	return nil
}
