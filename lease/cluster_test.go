package lease_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/internal/jstest"
	"github.com/parley-engine/parley/lease"
)

// cluster starts n routed JetStream nodes in this process and waits for
// the meta leader to know them all.
func cluster(t *testing.T, n int) []*server.Server {
	t.Helper()
	var routes []string
	ports := make([][2]int, n)
	for i := range n {
		ports[i] = [2]int{jstest.FreePort(t), jstest.FreePort(t)}
		routes = append(routes, "nats-route://127.0.0.1:"+strconv.Itoa(ports[i][1]))
	}
	dir := t.TempDir()
	nodes := make([]*server.Server, n)
	for i := range n {
		o := &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: ports[i][0],
			JetStream: true, StoreDir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)), NoSigs: true, NoLog: true,
			Cluster: server.ClusterOpts{Name: "parley", Host: "127.0.0.1", Port: ports[i][1]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		}
		s, err := server.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		if !s.ReadyForConnections(30 * time.Second) {
			t.Fatalf("node %d not ready", i+1)
		}
		nodes[i] = s
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	}
	eventually.True(t, 30*time.Second, "a meta leader that knows every node", func() bool {
		for _, s := range nodes {
			if s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) == n {
				return true
			}
		}
		return false
	})
	return nodes
}

// connectTo connects to node s only: when s dies, so does the connection.
func connectTo(t *testing.T, s *server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// Takeover on a 3-node cluster, the lease bucket on 3 replicas: the
// holder keeps its lease (renewing every TTL/3) until it dies, then a
// contender on another node waiting for it acquires it, never before TTL
// after the holder's last renewal, and within a bound. Twice: the
// holder's connection closes (its process died); the node the holder is
// connected to, the bucket's stream leader, is shut down (the takeover
// then includes the election of a new leader).
func TestLeases_ClusterTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-node cluster")
	}
	const ttl = 2 * time.Second
	nodes := cluster(t, 3)
	_, js := connectTo(t, nodes[0])
	ctx := context.Background()
	_, err := lease.Bucket(ctx, js, lease.Config{TTL: ttl, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	stream := "KV_" + lease.DefaultBucket
	leader := func() int {
		for i, s := range nodes {
			if s.Running() && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
				return i
			}
		}
		return -1
	}
	eventually.True(t, 10*time.Second, "a leader of the lease bucket", func() bool { return leader() >= 0 })

	for _, c := range []struct {
		name      string
		partition int
		holderOn  func() int
		die       func(nc *nats.Conn, node int)
	}{
		{"connection closed", 1, func() int { return (leader() + 1) % 3 }, func(nc *nats.Conn, _ int) { nc.Close() }},
		{"stream leader shut down", 2, leader, func(_ *nats.Conn, node int) { nodes[node].Shutdown() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := c.holderOn()
			hnc, hjs := connectTo(t, nodes[h])
			hkv, err := hjs.KeyValue(ctx, lease.DefaultBucket)
			if err != nil {
				t.Fatal(err)
			}
			holder, err := lease.New(ctx, hkv, "holder")
			if err != nil {
				t.Fatal(err)
			}
			hl, err := holder.Acquire(ctx, c.partition)
			if err != nil {
				t.Fatal(err)
			}
			// The holder renews; its last successful renewal is noted.
			var lastRenew, renewals atomic.Int64
			lastRenew.Store(time.Now().UnixNano())
			kctx, stop := context.WithCancel(ctx)
			defer stop()
			go func() {
				tk := time.NewTicker(ttl / 3)
				defer tk.Stop()
				for {
					select {
					case <-kctx.Done():
						return
					case <-tk.C:
					}
					start := time.Now()
					rctx, cancel := context.WithTimeout(kctx, ttl/3)
					err := holder.Renew(rctx, hl)
					cancel()
					if err != nil {
						return
					}
					lastRenew.Store(start.UnixNano())
					renewals.Add(1)
				}
			}()
			// The contender, on another node, waits.
			cn := (h + 1) % 3
			if !nodes[cn].Running() {
				cn = (h + 2) % 3
			}
			_, cjs := connectTo(t, nodes[cn])
			ckv, err := cjs.KeyValue(ctx, lease.DefaultBucket)
			if err != nil {
				t.Fatal(err)
			}
			contender, err := lease.New(ctx, ckv, "contender")
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			var acquired time.Time
			var cl *lease.Lease
			wctx, cancel := context.WithTimeout(ctx, 3*ttl+10*time.Second)
			defer cancel()
			// Let it hold through a few renewals first: no takeover.
			eventually.True(t, 10*time.Second, "two renewals", func() bool {
				return hl.Revision > 0 && time.Since(time.Unix(0, lastRenew.Load())) < ttl/3 && time.Since(time.Unix(0, lastRenew.Load())) > 0
			})
			go func() {
				l, err := contender.Wait(wctx, c.partition, 200*time.Millisecond)
				acquired, cl = time.Now(), l
				got <- err
			}()
			select {
			case err := <-got:
				t.Fatalf("the contender acquired a live lease: %v", err)
			case <-time.After(ttl + ttl/2):
			}
			died := time.Now()
			c.die(hnc, h)
			if err := <-got; err != nil {
				e, gerr := ckv.Get(ctx, lease.Key(c.partition))
				if gerr == nil {
					t.Logf("key: revision %d op %v created %v ago", e.Revision(), e.Operation(), time.Since(e.Created()))
				} else {
					t.Logf("get: %v", gerr)
				}
				_, aerr := contender.Acquire(ctx, c.partition)
				t.Logf("acquire: %v; leader %d", aerr, leader())
				t.Fatalf("no takeover: %v", err)
			}
			stop()
			last := time.Unix(0, lastRenew.Load())
			if acquired.Before(last.Add(ttl - 100*time.Millisecond)) {
				t.Fatalf("acquired %v after the last renewal, before the TTL %v", acquired.Sub(last), ttl)
			}
			if cl.Revision <= hl.Revision {
				t.Fatalf("the new revision %d is not above the holder's %d", cl.Revision, hl.Revision)
			}
			t.Logf("takeover %v after the holder died, %v after its last renewal (TTL %v)",
				acquired.Sub(died).Round(time.Millisecond), acquired.Sub(last).Round(time.Millisecond), ttl)
			if err := contender.Check(ctx, cl); err != nil {
				t.Fatal(err)
			}
			if err := holder.Check(ctx, hl); err == nil || (!errors.Is(err, lease.ErrLost) && hnc.IsConnected()) {
				t.Fatalf("the dead holder's check: %v", err)
			}
		})
	}
}
