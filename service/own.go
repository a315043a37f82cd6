package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/lease"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/wire"
)

// Engines that own streams (engine serve --own-streams): the engines of a
// record of several streams share the streams through stream leases in
// the lease bucket (lease.Stream), each about its share; an engine folds
// only the streams it holds, each from the latest snapshot in the
// snapshot bucket, and its supervisor judges only their deliberations,
// renewing the stream's lease right before each write. When an engine
// stops, its leases are released at once; when it dies, they expire
// after the lease TTL, and the others take its streams in the round
// that follows (docs/SCALING.md).

// Member is what an engine that owns streams says of itself in its member
// key: where the others reach it for the reads of its streams.
type Member struct {
	Name string `json:"name"`
	// HTTP is the base URL of its HTTP API (Config.AdvertiseURL).
	HTTP string `json:"http,omitempty"`
	// API is the prefix of its own query subjects
	// (parley.api.engine.<name>), which NATS reads are forwarded to.
	API string `json:"api,omitempty"`
}

// streamView is one stream of an owned set as its watch sees it: its
// runner's position while the engine holds it (health.Projection).
type streamView struct {
	set *runner.Runner
	k   int
}

func (v streamView) part() *runner.Runner { return v.set.Part(v.k) }

func (v streamView) Position() uint64 {
	if p := v.part(); p != nil {
		return p.Position()
	}
	return 0
}

func (v streamView) Layout() ledger.Layout { return v.set.Layout() }

func (v streamView) OwnsConsumer(name string) bool {
	p := v.part()
	return p != nil && p.OwnsConsumer(name)
}

func (v streamView) Held() bool { return v.set.HoldsStream(v.k) }

// streamFence is the supervisor's fence over the streams the engine holds.
type streamFence struct {
	g *lease.Group
	r *runner.Runner
}

func (f streamFence) Holds(d string) bool {
	k := f.r.Layout().Index(d)
	return f.g.Holds(k) && f.r.HoldsStream(k)
}

func (f streamFence) Renew(ctx context.Context, d string) (string, error) {
	return f.g.Renew(ctx, f.r.Layout().Index(d))
}

// owner attaches to the engine's set the runners of the streams it holds,
// and detaches those it no longer holds.
type owner struct {
	set     *runner.Runner
	newPart func(context.Context, int) (*runner.Runner, error)
	log     *slog.Logger
	want    chan []int // the latest held set; a newer one replaces it
	retry   chan struct{}
	done    chan struct{}

	mu      sync.Mutex
	running map[int]*ownedPart
	// Taken counts the streams taken (for tests and the log).
	taken int
}

type ownedPart struct {
	r      *runner.Runner
	cancel context.CancelFunc
	done   chan error
}

// startOwner joins the engines that share the record's streams.
func (s *Service) startOwner(ctx, runCtx context.Context, cfg Config, newPart func(context.Context, int) (*runner.Runner, error)) error {
	if cfg.NoSupervisor {
		return errors.New("service: --own-streams needs the supervisor: an engine that holds a stream judges its deliberations")
	}
	replicas := 1
	if ci := s.Stream.CachedInfo(); ci != nil && ci.Config.Replicas > 0 {
		replicas = ci.Config.Replicas
	}
	kv, err := lease.Bucket(ctx, s.js, lease.Config{TTL: cfg.LeaseTTL, Replicas: replicas})
	if err != nil {
		return fmt.Errorf("service: the lease bucket: %w", err)
	}
	name := s.self.Name
	m, err := lease.New(ctx, kv, name)
	if err != nil {
		return fmt.Errorf("service: leases: %w", err)
	}
	self := Member{Name: name, HTTP: cfg.AdvertiseURL, API: EngineAPIPrefix(name)}
	if self.HTTP == "" {
		self.HTTP = s.HTTPURL()
	}
	value, _ := json.Marshal(self)
	log := s.log.With("component", "owner", "engine", name)
	o := &owner{set: s.Runner, newPart: newPart, log: log, want: make(chan []int, 1), retry: make(chan struct{}, 1), done: make(chan struct{}), running: map[int]*ownedPart{}}
	n := s.Runner.Layout().N()
	g, err := lease.NewGroup(m.Of(lease.Stream), lease.GroupConfig{Partitions: n, Member: value, OnChange: o.offer})
	if err != nil {
		return fmt.Errorf("service: leases: %w", err)
	}
	s.Supervisor.Fence = streamFence{g: g, r: s.Runner}
	s.Group = g
	s.streams.Store(g)
	s.owner = o
	s.self.HTTP, s.self.API = self.HTTP, self.API
	go o.run(runCtx)
	s.groupDone = make(chan struct{})
	go func() {
		defer close(s.groupDone)
		if err := g.Run(runCtx); err != nil && runCtx.Err() == nil {
			log.Error("the engine left the group: it holds no stream", "err", err)
			o.offer(nil)
		}
	}()
	log.Info("sharing the record's streams by leases", "streams", n, "bucket", lease.DefaultBucket, "ttl", m.TTL(), "replicas", replicas, "http", self.HTTP)
	return nil
}

// EngineAPIPrefix is the prefix of the query subjects of the engine
// named name alone: parley.api.engine.<name>.<endpoint>, where the
// others forward the reads of its streams.
func EngineAPIPrefix(name string) string { return "parley.api.engine." + name }

// offer hands the worker the streams held now (the group's OnChange: it
// must not block the group's renewals).
func (o *owner) offer(held []int) {
	held = slices.Clone(held)
	for {
		select {
		case o.want <- held:
			return
		default:
		}
		select {
		case <-o.want: // a newer set replaces the one not yet taken
		default:
		}
	}
}

// run attaches and detaches runners until ctx ends, then detaches every
// one (each writes its last snapshot).
func (o *owner) run(ctx context.Context) {
	defer close(o.done)
	defer o.detachAll()
	var want []int
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case want = <-o.want:
		case <-retry.C:
		case <-o.retry:
		}
		if !o.apply(ctx, want) && ctx.Err() == nil {
			retry.Reset(time.Second)
		}
	}
}

// apply brings the running runners to want; false when one could not be
// made (tried again).
func (o *owner) apply(ctx context.Context, want []int) bool {
	o.mu.Lock()
	var drop []int
	for k := range o.running {
		if !slices.Contains(want, k) {
			drop = append(drop, k)
		}
	}
	o.mu.Unlock()
	for _, k := range drop {
		o.detach(k)
	}
	ok := true
	for _, k := range want {
		o.mu.Lock()
		_, have := o.running[k]
		o.mu.Unlock()
		if have {
			continue
		}
		start := time.Now()
		slow := time.AfterFunc(5*time.Second, func() {
			o.log.Warn("taking a stream is slow: its reads answer partition.unavailable meanwhile", "stream", o.set.Layout().StreamAt(k), "since", start)
		})
		p, err := o.newPart(ctx, k)
		slow.Stop()
		if err != nil {
			if ctx.Err() == nil {
				o.log.Error("take a stream", "stream", o.set.Layout().StreamAt(k), "err", err)
			}
			ok = false
			continue
		}
		pctx, cancel := context.WithCancel(ctx)
		op := &ownedPart{r: p, cancel: cancel, done: make(chan error, 1)}
		go func() {
			err := p.Run(pctx)
			op.done <- err
			if pctx.Err() == nil {
				// The runner ended on its own (its consumer gone): the
				// stream is no longer folded here. Detach it and take it
				// again from its snapshot.
				o.log.Error("a stream's runner ended: taking the stream again", "stream", o.set.Layout().StreamAt(k), "err", err)
				o.restart(k, op)
			}
		}()
		if err := o.set.Attach(k, p); err != nil {
			cancel()
			<-op.done
			o.log.Error("attach a stream", "stream", o.set.Layout().StreamAt(k), "err", err)
			ok = false
			continue
		}
		o.mu.Lock()
		o.running[k] = op
		o.taken++
		o.mu.Unlock()
		o.log.Info("stream taken", "stream", o.set.Layout().StreamAt(k), "from", p.StartPosition(), "took", time.Since(start).Round(time.Millisecond))
	}
	return ok
}

// restart takes the runner op of stream k, which ended on its own, from
// the set, and has the worker make it again.
func (o *owner) restart(k int, op *ownedPart) {
	o.mu.Lock()
	if o.running[k] != op {
		o.mu.Unlock()
		return
	}
	delete(o.running, k)
	o.mu.Unlock()
	o.set.Detach(k)
	op.cancel()
	select {
	case o.retry <- struct{}{}:
	default:
	}
}

// detach stops the runner of stream k (its last snapshot written) and
// takes it from the set.
func (o *owner) detach(k int) {
	o.mu.Lock()
	op := o.running[k]
	delete(o.running, k)
	o.mu.Unlock()
	if op == nil {
		return
	}
	o.set.Detach(k)
	op.cancel()
	if err := <-op.done; err != nil && !errors.Is(err, context.Canceled) {
		o.log.Warn("a stream's runner ended", "stream", o.set.Layout().StreamAt(k), "err", err)
	}
	o.log.Info("stream handed over", "stream", o.set.Layout().StreamAt(k))
}

func (o *owner) detachAll() {
	o.mu.Lock()
	var ks []int
	for k := range o.running {
		ks = append(ks, k)
	}
	o.mu.Unlock()
	for _, k := range ks {
		o.detach(k)
	}
}

// wait waits for the worker to end (after the run context).
func (o *owner) wait() { <-o.done }

// HeldStreams are the indexes of the streams the engine folds now (every
// one without --own-streams).
func (s *Service) HeldStreams() []int {
	var out []int
	for k := range s.Runner.Layout().N() {
		if s.Runner.HoldsStream(k) {
			out = append(out, k)
		}
	}
	return out
}

// routeCache keeps each stream's owner for a little while: a read of a
// deliberation another engine holds is forwarded without asking the
// bucket each time.
type routeCache struct {
	mu    sync.Mutex
	owner map[int]routed
}

type routed struct {
	m     Member
	until time.Time
}

// routeFor is how long an owner is trusted without asking again.
const routeFor = time.Second

// owner of stream k: its member value, from the cache or the bucket.
func (s *Service) ownerOf(ctx context.Context, k int) (Member, error) {
	s.routes.mu.Lock()
	if r, ok := s.routes.owner[k]; ok && time.Now().Before(r.until) {
		s.routes.mu.Unlock()
		return r.m, nil
	}
	s.routes.mu.Unlock()
	g := s.streams.Load() // set once the engine joined (startOwner), after the API answers
	if g == nil {
		return Member{}, errors.New("this engine has not joined the engines that share the streams yet")
	}
	name, value, err := g.Owner(ctx, k)
	if err != nil {
		return Member{}, err
	}
	var m Member
	if len(value) == 0 || json.Unmarshal(value, &m) != nil || m.Name != name {
		return Member{}, fmt.Errorf("the owner %s of stream %s says nothing of where to reach it (its membership expired: it is dying)", name, s.Runner.Layout().StreamAt(k))
	}
	s.routes.mu.Lock()
	if s.routes.owner == nil {
		s.routes.owner = map[int]routed{}
	}
	s.routes.owner[k] = routed{m: m, until: time.Now().Add(routeFor)}
	s.routes.mu.Unlock()
	return m, nil
}

// forget drops stream k's cached owner (a forward to it failed).
func (s *Service) forgetRoute(k int) {
	s.routes.mu.Lock()
	delete(s.routes.owner, k)
	s.routes.mu.Unlock()
}

// routeNATS is microapi's Route: the query subjects of the engine that
// holds id's stream ("" when this one does).
func (s *Service) routeNATS(ctx context.Context, id string) (string, error) {
	k := s.Runner.Layout().Index(id)
	if s.Runner.HoldsStream(k) {
		return "", nil
	}
	m, err := s.ownerOf(ctx, k)
	if err != nil {
		return "", err
	}
	if m.Name == s.self.Name {
		return "", errors.New("this engine is taking the stream over")
	}
	if m.API == "" {
		return "", fmt.Errorf("the owner %s has no query subjects", m.Name)
	}
	return m.API, nil
}

// remotePage is readmodel's Remote: a page of the deliberations of the
// stream of index k, from the engine that holds it.
func (s *Service) remotePage(ctx context.Context, k int, p api.PageRequest) ([]api.Summary, bool, error) {
	m, err := s.ownerOf(ctx, k)
	if err != nil {
		return nil, false, err
	}
	if m.Name == s.self.Name || m.API == "" {
		return nil, false, errors.New("nobody else holds the stream")
	}
	body, _ := json.Marshal(struct {
		Stream int `json:"stream"`
		api.PageRequest
	}{k, p})
	resp, err := s.nc.RequestWithContext(ctx, m.API+".deliberations", body)
	if err != nil {
		s.forgetRoute(k)
		return nil, false, err
	}
	if code := resp.Header.Get(micro.ErrorCodeHeader); code != "" {
		s.forgetRoute(k)
		return nil, false, fmt.Errorf("%s: %s %s", m.Name, code, resp.Header.Get(micro.ErrorHeader))
	}
	var out []api.Summary
	if err := json.Unmarshal(resp.Data, &out); err != nil {
		return nil, false, fmt.Errorf("%s: a page that is not one: %w", m.Name, err)
	}
	if len(out) > max(p.Limit, 1) {
		out = out[:max(p.Limit, 1)] // no more than asked, whatever it sent
	}
	return out, resp.Header.Get(wire.NextCursorHeader) != "", nil
}
