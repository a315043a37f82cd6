package runner

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/wire"
)

// DefaultShards is the number of shards the projection is spread over. It
// is fixed rather than the number of cores, so that a snapshot taken on one
// machine restores on another.
const DefaultShards = 8

// Runner consumes the PARLEY stream into a projection spread over shards,
// resumes from its last snapshot after a restart, and serves reads
// concurrently with the fold. It owns the consumer, the goroutines and the
// clock; the fold is projector's.
//
// Deliberations are independent, so they are sharded by id: each shard has
// its own projection (projector.Projection), fed in stream order by its own
// goroutine, and each deliberation its own lock. A read locks one
// deliberation; a long one (a closure verification of a million artifacts)
// holds back only that deliberation's messages, which its shard keeps aside
// while it goes on with the others. A shard is the unit a partitioning of
// deliberations across engines would move; it is snapshotted on its own,
// by its own goroutine, so a snapshot never stops the fold of the others.
type Runner struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	layout ledger.Layout // the stream's (ledger.LayoutOf its name)
	name   string        // the stream's name
	// base is the position of the stream's sequence 0: its index in the
	// layout, shifted (ledger.Layout.Position). Every position the runner
	// holds is base | the stream's sequence: 0 in a layout of one stream.
	base      uint64
	log       *slog.Logger
	observe   func(out projector.Outcome, position, pending uint64)
	store     SnapshotStore   // nil: no snapshots
	maxSnap   int64           // Config.MaxSnapshotBytes
	notUsed   error           // why New did not use the snapshots kept
	snapMu    sync.Mutex      // one Snapshot at a time
	writeHook func(shard int) // tests: called as a shard's snapshot starts being written
	snapEvery time.Duration
	opts      projector.Options
	verify    provenance.Verifier
	reverify  chan *item // to the re-verifiers (Run's)
	onApply   func(*Runner, projector.Msg, projector.Outcome)

	// parts, for a runner of several streams (NewSet), are the runners
	// of each; such a runner has no shards, consumer or snapshots of its
	// own, and its exported methods route to its parts.
	parts []*Runner
	// owned: a set whose parts come and go (NewOwnedSet): parts[k] is
	// nil while the engine does not hold stream k, and partsMu guards
	// them.
	owned   bool
	partsMu sync.RWMutex

	shards     []*shard
	budget     *byteBudget      // the bytes read and not yet applied (budget.go)
	dispatched atomic.Uint64    // the last position handed to a shard
	start      uint64           // the position the stream is read from (after the snapshots)
	clock      func() time.Time // Config.Clock
	// consumerPrefix names the runner's consumers (OwnsConsumer): drawn at
	// random, so that nobody who cannot list the stream's consumers can
	// name one like them.
	consumerPrefix string
	// moved is notified whenever the applied position may have advanced
	// (advanced; Position, WaitFor, WaitForIn).
	moved notifier
}

// Config configures a Runner.
type Config struct {
	// SnapshotPath is where the projection is checkpointed, one file per
	// shard (SnapshotPath.<i>-of-<n>); empty disables snapshots (every start
	// replays the whole stream).
	SnapshotPath string
	// Snapshots, when set, is where the projection is checkpointed instead
	// of SnapshotPath (ObjectSnapshots: a JetStream object store).
	Snapshots SnapshotStore
	// MaxSnapshotBytes bounds the size of a shard's snapshot read at start
	// (default DefaultMaxSnapshotBytes): a larger one is not used
	// (ErrSnapshotTooLarge).
	MaxSnapshotBytes int64
	// SnapshotEvery is the interval between snapshots (default 30 s).
	SnapshotEvery time.Duration
	// Shards is the number of shards (default DefaultShards). Snapshots of
	// another number of shards are not used: the projection is rebuilt.
	Shards    int
	Projector projector.Options
	// Verify re-verifies the provenance annotations of EVIDENCE against
	// their substrates (substrate.Reverifier.Verify; nil: none is
	// re-queried). The runner calls it ahead of the fold, on its own
	// goroutines and outside any lock, and hands the results to the fold
	// (projector.Msg.Reverified): a slow substrate holds back only the
	// messages of its EVIDENCE's deliberation.
	Verify provenance.Verifier
	Logger *slog.Logger
	// Observe, when set, is called after each message is applied with
	// what the fold did, the position applied and the messages left in the
	// stream (the engine's metrics).
	Observe func(out projector.Outcome, position, pending uint64)
	// InFlightBytes bounds the bytes of the messages read from the stream
	// and not yet applied (default DefaultInFlightBytes): past it the
	// consumer waits, and the messages wait in the stream.
	InFlightBytes int64
	// OnApply, when set, is called after each message is applied, outside
	// any lock, from the goroutine of the message's shard (binding-moment
	// announcements, their metrics). It is handed the runner: the first
	// calls may come before New has returned.
	OnApply func(r *Runner, m projector.Msg, out projector.Outcome)
	// Clock is what the runner and its supervisor judge time by: when a
	// deliberation has settled and what its time limits say (Supervisor),
	// when the consumer last waited for the in-flight budget (InFlight).
	// Default time.Now; tests drive it to judge time without sleeping.
	// The stream's times are the server's, not this clock's.
	Clock func() time.Time
}

// New returns a Runner over stream, starting from the snapshots in
// cfg.Snapshots (or at cfg.SnapshotPath) when there are usable ones;
// snapshots that cannot be used are set aside (SnapshotsNotUsed says why)
// and the projection is rebuilt from the stream.
func New(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, cfg Config) (*Runner, error) {
	r := &Runner{js: js, stream: stream, log: cfg.Logger, observe: cfg.Observe, onApply: cfg.OnApply, store: cfg.Snapshots,
		maxSnap: cmp.Or(max(cfg.MaxSnapshotBytes, 0), DefaultMaxSnapshotBytes), snapEvery: cfg.SnapshotEvery, opts: cfg.Projector, verify: cfg.Verify, clock: cfg.Clock,
		consumerPrefix: "parley_engine_" + nuid.Next()}
	if r.clock == nil {
		r.clock = time.Now
	}
	if r.store == nil && cfg.SnapshotPath != "" {
		r.store = FileSnapshots(cfg.SnapshotPath)
	}
	if stream != nil {
		if info := stream.CachedInfo(); info != nil {
			l, err := ledger.LayoutOf(info.Config.Name)
			if err != nil {
				return nil, fmt.Errorf("service: %w", err)
			}
			k, _ := l.IndexOf(info.Config.Name)
			r.layout, r.name, r.base = l, info.Config.Name, l.Position(k, 0)
		}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.snapEvery <= 0 {
		r.snapEvery = 30 * time.Second
	}
	r.budget = newByteBudget(cmp.Or(max(cfg.InFlightBytes, 0), DefaultInFlightBytes), r.clock)
	n := cfg.Shards
	if n <= 0 {
		n = DefaultShards
	}
	if r.opts.Validator == nil {
		r.opts.Validator = projector.DefaultOptions().Validator
	}
	// The engine's bound on deliberations, spread over the shards (a
	// deliberation's shard is a hash of its id, so a client that picks ids
	// can fill one shard: at most its share).
	if m := r.opts.MaxDeliberations; m > 0 {
		r.opts.MaxDeliberations = (m + n - 1) / n
	}
	// The bound on kept summaries likewise: each shard its share.
	if kb := cmp.Or(r.opts.MaxKeptBytes, projector.DefaultMaxKeptBytes); kb > 0 {
		r.opts.MaxKeptBytes = max(kb/int64(n), 1)
	}
	cfg.Projector = r.opts
	r.shards = make([]*shard, n)
	for i := range r.shards {
		r.shards[i] = &shard{i: i, proj: projector.New(cfg.Projector), locks: map[string]*delibLock{}, in: make(chan []*item, 1024),
			held: map[string][]*item{}, heldHead: map[string]uint64{}, snapReq: make(chan chan frozen), wake: make(chan struct{}, 1)}
	}
	if r.store != nil {
		if fs, ok := r.store.(fileSnapshots); ok {
			fs.removeLeftovers(r.log)
		}
		if ps, err := r.loadSnapshots(ctx); err != nil {
			r.notUsed = err
			r.log.Warn("snapshots not used; rebuilding the projection from the stream", "path", r.store.String(), "err", err)
		} else if ps != nil {
			low := ps[0].Position()
			for i, p := range ps {
				r.shards[i].install(p)
				low = min(low, p.Position())
			}
			r.start = low
			r.log.Info("projection restored from snapshots", "shards", n, "position", low)
		}
	}
	// A stream's positions start at its base (ledger.Layout.Position).
	r.start = max(r.start, r.base)
	for _, s := range r.shards {
		s.enq.Store(r.start)
		s.processed.Store(r.start)
	}
	r.dispatched.Store(r.start)
	return r, nil
}

// Layout is the layout of the record the runner reads: ledger.LayoutOf
// its stream's name (Unpartitioned without a stream).
func (r *Runner) Layout() ledger.Layout { return r.layout }

// Stream is the name of the stream the runner reads.
func (r *Runner) Stream() string { return cmp.Or(r.name, r.layout.Stream()) }

// pos is the position of the stream's sequence seq.
func (r *Runner) pos(seq uint64) uint64 { return r.base | seq }

// StreamOf is the name of the stream holding deliberation id.
func (r *Runner) StreamOf(id string) string {
	if r.parts != nil {
		return r.layout.StreamOf(id)
	}
	return r.Stream()
}

// posIn is the position of sequence seq of the stream holding
// deliberation id.
func (r *Runner) posIn(id string, seq uint64) uint64 {
	if r.parts != nil {
		return r.layout.Position(r.layout.Index(id), seq)
	}
	return r.pos(seq)
}

// StartPosition is the position the runner reads the stream after: the
// lowest of the snapshots it restored, 0 when it rebuilds the projection
// from the whole stream.
func (r *Runner) StartPosition() uint64 {
	if r.parts != nil {
		return r.setStart()
	}
	return r.start
}

// SnapshotsNotUsed is why New did not use the snapshots it found (an
// error of one of the classes ErrSnapshotInvalid, ErrSnapshotTooLarge,
// ErrSnapshotShards, ErrSnapshotMissing, ErrSnapshotAhead, or the store's
// own); nil when it used them or found none.
func (r *Runner) SnapshotsNotUsed() error {
	if r.parts != nil {
		return r.setNotUsed()
	}
	return r.notUsed
}

func (r *Runner) shardOf(deliberation string) *shard {
	if deliberation == "" {
		return r.shards[0]
	}
	h := fnv.New32a()
	h.Write([]byte(deliberation))
	return r.shards[h.Sum32()%uint32(len(r.shards))]
}

// NewInMemory returns a runner of n shards over no stream, whose messages
// a caller applies with ApplyInMemory: for tests and benchmarks of what
// reads the runner.
func NewInMemory(n int, opts projector.Options) *Runner {
	r := &Runner{opts: opts, shards: make([]*shard, n), clock: time.Now}
	for i := range r.shards {
		r.shards[i] = &shard{i: i, proj: projector.New(opts), locks: map[string]*delibLock{}, held: map[string][]*item{}, heldHead: map[string]uint64{}}
	}
	return r
}

// ApplyInMemory applies m as the shard's goroutine would (a runner of
// NewInMemory, which has none).
func (r *Runner) ApplyInMemory(m projector.Msg) projector.Outcome {
	if r.parts != nil {
		p := r.partOf(wire.DeliberationOf(m.Subject))
		if p == nil {
			return projector.Outcome{}
		}
		return p.ApplyInMemory(m)
	}

	id := wire.DeliberationOf(m.Subject)
	s := r.shardOf(id)
	s.mu.Lock()
	out := s.proj.Apply(m)
	if d := s.proj.Deliberation(id); d != nil && s.locks[id] == nil {
		s.locks[id] = s.newLock()
		s.noteOpened(d)
	}
	s.mu.Unlock()
	s.enq.Store(m.Seq)
	s.processed.Store(m.Seq)
	r.dispatched.Store(m.Seq)
	r.advanced()
	return out
}

// OwnsConsumer reports whether the stream's consumer name is the runner's
// own (its ordered consumer, under every name it takes): the engine's
// watch never counts or removes it.
func (r *Runner) OwnsConsumer(name string) bool {
	if r.parts != nil {
		return slices.ContainsFunc(r.held(), func(p *Runner) bool { return p.OwnsConsumer(name) })
	}

	return strings.HasPrefix(name, r.consumerPrefix+"_")
}
