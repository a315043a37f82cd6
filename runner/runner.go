package runner

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/canon"
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
	js        jetstream.JetStream
	stream    jetstream.Stream
	log       *slog.Logger
	observe   func(out projector.Outcome, position, pending uint64)
	snapPath  string
	snapMu    sync.Mutex      // one Snapshot at a time
	writeHook func(shard int) // tests: called as a shard's snapshot starts being written
	snapEvery time.Duration
	opts      projector.Options
	verify    provenance.Verifier
	reverify  chan *item // to the re-verifiers (Run's)
	onApply   func(*Runner, projector.Msg, projector.Outcome)

	shards     []*shard
	budget     *byteBudget   // the bytes read and not yet applied (budget.go)
	dispatched atomic.Uint64 // the last position handed to a shard
	start      uint64        // the position the stream is read from (after the snapshots)
}

// Config configures a Runner.
type Config struct {
	// SnapshotPath is where the projection is checkpointed, one file per
	// shard (SnapshotPath.<i>-of-<n>); empty disables snapshots (every start
	// replays the whole stream).
	SnapshotPath string
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
}

// shard is one part of the projection: the deliberations whose id hashes to
// it, and the messages that name no deliberation (shard 0).
type shard struct {
	i int
	// mu guards the projection's deliberation map and its unrouted
	// rejections (the shard's goroutine takes it to apply a message that
	// may create a deliberation), and locks; each deliberation's state is
	// guarded by its own lock in locks.
	mu    sync.RWMutex
	proj  *projector.Projection
	locks map[string]*delibLock
	// opened is the shard's deliberations in order of their open position
	// (listing.go), guarded by mu.
	opened []openedDelib

	in chan []*item
	// enq is the last position handed to the shard, processed the last
	// one its goroutine took (applied, or held back).
	enq, processed atomic.Uint64
	// held are messages of deliberations a reader held locked, in stream
	// order, applied as soon as the lock is free; heldMin is the smallest
	// position held (0: none). Only the shard's goroutine touches held.
	held     map[string][]*item
	heldMin  atomic.Uint64
	heldMu   sync.Mutex
	heldHead map[string]uint64 // deliberation -> its first held position, for WaitForIn

	snapReq chan chan frozen
	snapAt  atomic.Uint64 // the position of the shard's last snapshot
	running atomic.Bool   // its goroutine is running (snapshots go through it)
}

// delibLock guards one deliberation's state. Its shard takes it with
// TryLock and never waits for it; while the shard holds messages of the
// deliberation back for a reader, new readers wait for them to be applied
// (wanted), so that readers who follow one another cannot starve the fold.
// Messages held while their re-verification runs do not make readers wait:
// the fold could not apply them anyway.
type delibLock struct {
	sync.RWMutex
	wanted atomic.Bool
}

// rlock read-locks l once the shard has applied what it holds back (or
// after a bound, should a reader hold it for long).
func (l *delibLock) rlock() {
	for i := 0; l.wanted.Load() && i < 2000; i++ {
		time.Sleep(50 * time.Microsecond)
	}
	l.RLock()
}

type item struct {
	m       projector.Msg
	pending uint64 // messages left in the stream after it, when it was read
	shard   *shard
	// ready is closed once the artifact is validated (nil: not an artifact
	// subject, nothing to wait for); the artifacts of a batch share it.
	ready chan struct{}
	// reverified, set by the shard's goroutine, is closed once an EVIDENCE's
	// provenance annotations are re-verified (nil: nothing to re-verify);
	// rev holds the results until the shard's goroutine puts them in m.
	reverified chan struct{}
	rev        []provenance.Verification
	// cost is what the message took of the in-flight byte budget, given
	// back once it is applied.
	cost int64
}

// batch is consecutive messages of the stream, dispatched together: a
// validator takes a batch at a time, each shard its own items of it, so
// that the hand-overs between goroutines are paid per batch, not per
// message.
type batch struct {
	items []*item
	ready chan struct{} // closed once every artifact of items is validated
}

// PullBytes is how much the engine's consumer asks the server for at a
// time (a pull request; the next goes out when half is consumed). Under a
// saturating ingest the server serves a pull request late, so a small one
// (2,048 messages) let the projection fall seconds behind; by bytes, the
// client's buffer stays bounded whatever the messages' size (within the
// NATS client's 64 MB for a subscription).
const PullBytes = 32 << 20

// A batch is dispatched once it holds batchMax messages, when the stream
// has no more for now (the message's pending count is 0), or batchWait
// after its first message, whichever comes first: a batch waits only
// while more messages are on their way.
const (
	batchMax  = 64
	batchWait = 500 * time.Microsecond
)

// done reports whether the item is ready for the fold: validated (the
// shard's goroutine has waited for that) and re-verified.
func (it *item) done() bool {
	if it.reverified == nil {
		return true
	}
	select {
	case <-it.reverified:
		return true
	default:
		return false
	}
}

// Reverifiers is the number of goroutines that re-verify provenance
// annotations: they wait on files and git processes rather than compute,
// so there are more of them than cores, and a slow substrate does not
// occupy the validators.
const Reverifiers = 8

// New returns a Runner over stream, starting from the snapshots at
// cfg.SnapshotPath when there are usable ones.
func New(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, cfg Config) (*Runner, error) {
	r := &Runner{js: js, stream: stream, log: cfg.Logger, observe: cfg.Observe, onApply: cfg.OnApply, snapPath: cfg.SnapshotPath,
		snapEvery: cfg.SnapshotEvery, opts: cfg.Projector, verify: cfg.Verify}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.snapEvery <= 0 {
		r.snapEvery = 30 * time.Second
	}
	r.budget = newByteBudget(cmp.Or(max(cfg.InFlightBytes, 0), DefaultInFlightBytes))
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
			held: map[string][]*item{}, heldHead: map[string]uint64{}, snapReq: make(chan chan frozen)}
	}
	if r.snapPath != "" {
		r.removeLeftovers()
		if ps, err := r.loadSnapshots(ctx); err != nil {
			r.log.Warn("snapshots not used; rebuilding the projection from the stream", "path", r.snapPath, "err", err)
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
	for _, s := range r.shards {
		s.enq.Store(r.start)
		s.processed.Store(r.start)
	}
	r.dispatched.Store(r.start)
	return r, nil
}

// install makes p the shard's projection (restored from a snapshot).
func (s *shard) install(p *projector.Projection) {
	s.proj = p
	s.snapAt.Store(p.Position())
	p.Deliberations(func(d *projector.Deliberation) { s.locks[d.ID] = &delibLock{} })
	s.indexOpened()
}

func (r *Runner) shardPath(i int) string {
	return r.snapPath + "." + strconv.Itoa(i) + "-of-" + strconv.Itoa(len(r.shards))
}

// removeLeftovers removes temporary files of snapshots a kill interrupted,
// and the snapshot of an engine that did not shard its projection.
func (r *Runner) removeLeftovers() {
	dir := filepath.Dir(r.snapPath)
	tmps, _ := filepath.Glob(filepath.Join(dir, ".snapshot-*"))
	for _, t := range tmps {
		if os.Remove(t) == nil {
			r.log.Info("removed a snapshot's leftover temporary file", "path", t)
		}
	}
	os.Remove(r.snapPath)
}

func (r *Runner) loadSnapshots(ctx context.Context) ([]*projector.Projection, error) {
	ps := make([]*projector.Projection, len(r.shards))
	errs := make([]error, len(r.shards))
	var wg sync.WaitGroup
	for i := range r.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps[i], errs[i] = r.loadShard(i)
		}()
	}
	wg.Wait()
	missing := 0
	for i := range ps {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if ps[i] == nil {
			missing++
		}
	}
	switch {
	case missing == len(ps):
		if others, _ := filepath.Glob(r.snapPath + ".*-of-*"); len(others) > 0 {
			return nil, fmt.Errorf("snapshots of another number of shards (%s); this engine has %d", filepath.Base(others[0]), len(r.shards))
		}
		return nil, nil
	case missing > 0:
		return nil, fmt.Errorf("%d of %d shard snapshots missing", missing, len(ps))
	}
	info, err := r.stream.Info(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if p.Position() > info.State.LastSeq {
			return nil, fmt.Errorf("a snapshot at position %d is ahead of the stream (last %d): the stream is not the one it was taken from", p.Position(), info.State.LastSeq)
		}
	}
	return ps, nil
}

func (r *Runner) loadShard(i int) (*projector.Projection, error) {
	f, err := os.Open(r.shardPath(i))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := projector.ReadSnapshot(bufio.NewReaderSize(f, 1<<20), r.opts)
	if err != nil {
		return nil, fmt.Errorf("shard %d: %w", i, err)
	}
	return p, nil
}

func (r *Runner) shardOf(deliberation string) *shard {
	if deliberation == "" {
		return r.shards[0]
	}
	h := fnv.New32a()
	h.Write([]byte(deliberation))
	return r.shards[h.Sum32()%uint32(len(r.shards))]
}

// ReadDeliberation runs fn with deliberation id under its read lock and
// reports whether it exists. fn must not keep references to what it reads
// past its return; while it runs, only this deliberation's messages wait.
func (r *Runner) ReadDeliberation(id string, fn func(*projector.Deliberation)) bool {
	s := r.shardOf(id)
	s.mu.RLock()
	d, l := s.proj.Deliberation(id), s.locks[id]
	s.mu.RUnlock()
	if d == nil || l == nil {
		return false
	}
	l.rlock()
	defer l.RUnlock()
	fn(d)
	return true
}

// ReadDeliberationYielding is ReadDeliberation for a read that may take
// long (a closure verification of a large DAG): fn may call yield as often
// as it likes, and when the shard holds messages of the deliberation back
// for the reader, yield lets go of the lock until they are applied, then
// takes it again; yield(rest) with rest > 0 also lets go of it for rest (a
// read that paces itself). The fold is held up for a moment between
// yields, not for the whole read; what fn read before a yield may be older
// than what it reads after.
func (r *Runner) ReadDeliberationYielding(id string, fn func(d *projector.Deliberation, yield func(rest time.Duration))) bool {
	s := r.shardOf(id)
	s.mu.RLock()
	d, l := s.proj.Deliberation(id), s.locks[id]
	s.mu.RUnlock()
	if d == nil || l == nil {
		return false
	}
	l.rlock()
	defer l.RUnlock()
	fn(d, func(rest time.Duration) {
		if rest > 0 || l.wanted.Load() {
			l.RUnlock()
			time.Sleep(rest)
			l.rlock()
		}
	})
	return true
}

// EachDeliberation runs fn with every deliberation, each under its own read
// lock, in no particular order.
func (r *Runner) EachDeliberation(fn func(*projector.Deliberation)) {
	type entry struct {
		d *projector.Deliberation
		l *delibLock
	}
	var list []entry
	for _, s := range r.shards {
		list = list[:0]
		s.mu.RLock()
		s.proj.Deliberations(func(d *projector.Deliberation) { list = append(list, entry{d, s.locks[d.ID]}) })
		s.mu.RUnlock()
		for _, e := range list {
			e.l.rlock()
			fn(e.d)
			e.l.RUnlock()
		}
	}
}

// Deliberations returns the number of deliberations.
func (r *Runner) Deliberations() int {
	n := 0
	for _, s := range r.shards {
		s.mu.RLock()
		n += s.proj.Len()
		s.mu.RUnlock()
	}
	return n
}

// Unrouted returns the most recent kept rejections of messages that belong
// to no open deliberation, in stream order, and their total.
func (r *Runner) Unrouted() ([]projector.Rejection, int) {
	var all []projector.Rejection
	total := 0
	for _, s := range r.shards {
		s.mu.RLock()
		kept, n := s.proj.Unrouted()
		all = append(all, kept...)
		total += n
		s.mu.RUnlock()
	}
	slices.SortFunc(all, func(a, b projector.Rejection) int { return cmp.Compare(a.Position, b.Position) })
	if max := r.shards[0].proj.MaxKept(); len(all) > max {
		all = all[len(all)-max:]
	}
	return all, total
}

// Outcome says what the projection did with the message m of deliberation
// id (projector.Projection.OutcomeOf), once the projection has reached it.
func (r *Runner) Outcome(id string, m projector.Msg, want *canon.Digest) (projector.MessageOutcome, error) {
	if m.Seq > r.Position() {
		return projector.MessageOutcome{Deliberation: id, Position: m.Seq, Verdict: projector.VerdictUnprojected,
			Note: "the projection is at position " + strconv.FormatUint(r.Position(), 10)}, nil
	}
	s := r.shardOf(id)
	s.mu.RLock()
	l := s.locks[id]
	s.mu.RUnlock()
	if l != nil {
		l.rlock()
		defer l.RUnlock()
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.proj.OutcomeOf(id, m, want)
}

// Position is the stream position up to which every message is applied.
func (r *Runner) Position() uint64 {
	pos := r.dispatched.Load()
	for _, s := range r.shards {
		if h := s.heldMin.Load(); h > 0 {
			pos = min(pos, h-1)
		}
		if p, e := s.processed.Load(), s.enq.Load(); p < e {
			pos = min(pos, p)
		}
	}
	return pos
}

// WaitFor waits until the projection has applied every message up to
// position seq.
func (r *Runner) WaitFor(ctx context.Context, seq uint64) error {
	return r.wait(ctx, seq, r.Position)
}

// WaitForIn waits until deliberation id's messages up to position seq are
// applied (a reader holding another deliberation does not delay it).
func (r *Runner) WaitForIn(ctx context.Context, id string, seq uint64) error {
	s := r.shardOf(id)
	return r.wait(ctx, seq, func() uint64 {
		pos := r.dispatched.Load()
		if p, e := s.processed.Load(), s.enq.Load(); p < e {
			pos = min(pos, p)
		}
		s.heldMu.Lock()
		if h := s.heldHead[id]; h > 0 {
			pos = min(pos, h-1)
		}
		s.heldMu.Unlock()
		return pos
	})
}

func (r *Runner) wait(ctx context.Context, seq uint64, pos func() uint64) error {
	if pos() >= seq {
		return nil
	}
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for pos() < seq {
		select {
		case <-ctx.Done():
			return fmt.Errorf("service: wait for position %d (at %d): %w", seq, pos(), ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// Run consumes the stream until ctx ends, then writes last snapshots.
func (r *Runner) Run(ctx context.Context) error {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if r.start > 0 {
		cfg = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: r.start + 1}
	}
	cons, err := r.js.OrderedConsumer(ctx, wire.StreamName, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it began: nothing was applied
		}
		return fmt.Errorf("service: ordered consumer: %w", err)
	}
	// Validation is the fold's costliest part and pure: it runs ahead, on
	// every core, and each shard applies its messages in stream order as
	// their validation completes.
	// Re-verification of provenance annotations (files, git) runs on
	// goroutines of its own, outside any lock, for the EVIDENCE a
	// deliberation's policy judges: its shard hands it over and holds back
	// that deliberation's messages until it is done, going on with the
	// others.
	validate := make(chan *batch, 1024)
	r.reverify = make(chan *item, 4096)
	var validators, reverifiers sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		validators.Add(1)
		go func() {
			defer validators.Done()
			for b := range validate {
				for _, it := range b.items {
					if it.ready != nil {
						it.m.Artifact, it.m.Invalid = r.opts.Validator.ValidateTransient(it.m.Data)
					}
				}
				close(b.ready)
			}
		}()
	}
	for range Reverifiers {
		reverifiers.Add(1)
		go func() {
			defer reverifiers.Done()
			for it := range r.reverify {
				it.rev = provenance.Reverify(it.m.Artifact, r.verify)
				close(it.reverified)
			}
		}()
	}
	shardCtx, stopShards := context.WithCancel(context.Background())
	var shards sync.WaitGroup
	for _, s := range r.shards {
		shards.Add(1)
		go func() {
			defer shards.Done()
			r.runShard(shardCtx, s)
		}()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.snapshotLoop(ctx)
	}()
	// The consumer's handler runs on one goroutine of the NATS client; a
	// reset of the ordered consumer (a node lost) starts another, so the
	// handler takes mu, and a position it has already taken is dropped.
	// It gathers messages into a batch (batchMax, batchWait), which flush
	// hands to the validators and the shards. After stop, nothing more is
	// taken.
	var (
		mu      sync.Mutex
		stop    bool
		taken   = r.dispatched.Load()
		cur     = make([]*item, 0, batchMax)
		counts  = make([]int, len(r.shards))
		lastErr atomic.Value // the consumer's last error, for the message should it end
	)
	flush := func() { // mu held
		if len(cur) == 0 {
			return
		}
		b := &batch{items: cur}
		cur = make([]*item, 0, batchMax)
		for _, it := range b.items {
			if strings.Contains(it.m.Subject, ".art.") {
				if b.ready == nil {
					b.ready = make(chan struct{})
				}
				it.ready = b.ready
			}
		}
		if b.ready != nil {
			validate <- b
		}
		// Each shard's items, in stream order, carved out of one array.
		clear(counts)
		for _, it := range b.items {
			counts[it.shard.i]++
		}
		all := make([]*item, len(b.items))
		off := 0
		for i, n := range counts {
			counts[i] = off
			off += n
		}
		for _, it := range b.items {
			all[counts[it.shard.i]] = it
			counts[it.shard.i]++
		}
		from := 0
		for i, to := range counts {
			if to > from {
				part := all[from:to:to]
				s := r.shards[i]
				s.enq.Store(part[len(part)-1].m.Seq)
				s.in <- part
			}
			from = to
		}
		r.dispatched.Store(b.items[len(b.items)-1].m.Seq)
	}
	timer := time.AfterFunc(time.Hour, func() {
		mu.Lock()
		if !stop {
			flush()
		}
		mu.Unlock()
	})
	timer.Stop()
	take := func(msg jetstream.Msg) {
		// The message's bytes are taken of the budget before mu: the
		// timer's flush, which takes mu, hands on what the batch holds,
		// so a wait here always ends.
		cost := r.budget.take(int64(len(msg.Data()) + len(msg.Subject())))
		mu.Lock()
		defer mu.Unlock()
		if stop {
			r.budget.give(cost)
			return
		}
		seq, ts, pending, ok := ackMetadata(msg.Reply())
		if !ok {
			r.log.Error("message without metadata", "subject", msg.Subject(), "reply", msg.Reply())
			r.budget.give(cost)
			return
		}
		if seq <= taken {
			r.budget.give(cost)
			return // delivered again across a reset
		}
		taken = seq
		// An importer's message says what it restores in its headers;
		// nobody else's headers are read (projector.ImportOf).
		m := projector.Msg{Seq: seq, Subject: msg.Subject(), Data: msg.Data(), Time: time.Unix(0, ts)}
		if h := msg.Headers(); h != nil {
			m.Import = projector.ImportOf(m.Subject, h.Get)
		}
		cur = append(cur, &item{m: m, pending: pending, cost: cost, shard: r.shardOf(wire.DeliberationOf(m.Subject))})
		switch {
		case pending == 0 || len(cur) >= batchMax:
			flush()
		case len(cur) == 1:
			timer.Reset(batchWait)
		}
	}
	// A heartbeat a second: when the node serving the consumer is lost (a
	// stream leader killed), the ordered consumer notices in two seconds
	// and resumes elsewhere, instead of ten with the default. The handler
	// form, not the iterator: the iterator arms a new timer for every
	// message (a tenth of the consumer's CPU).
	cc, err := cons.Consume(take, jetstream.PullMaxBytes(PullBytes), jetstream.PullExpiry(5*time.Second), jetstream.PullHeartbeat(time.Second),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			lastErr.Store(fmt.Sprint(err))
			r.log.Debug("consume", "position", r.Position(), "err", err)
		}))
	var runErr error
	if err != nil {
		runErr = fmt.Errorf("service: consume: %w", err)
	} else {
		closed := cc.Closed()
		select {
		case <-ctx.Done():
			cc.Stop()
			select {
			case <-closed:
			case <-time.After(5 * time.Second):
				r.log.Warn("the consumer did not stop within 5 s; going on without it")
			}
		case <-closed:
			if ctx.Err() == nil {
				why, _ := lastErr.Load().(string)
				runErr = fmt.Errorf("service: consume ended at position %d: %s", r.Position(), cmp.Or(why, "the consumer closed"))
			}
		}
	}
	mu.Lock()
	flush()
	stop = true
	mu.Unlock()
	timer.Stop()
	close(validate)
	validators.Wait()
	wg.Wait()
	// The shards apply what they were handed, then stop.
	for _, s := range r.shards {
		close(s.in)
	}
	shards.Wait()
	close(r.reverify)
	reverifiers.Wait()
	stopShards()
	if err := r.Snapshot(); err != nil {
		r.log.Error("final snapshot", "err", err)
	}
	return runErr
}

// ackMetadata reads a JetStream message's stream position, time and the
// number of messages after it from its reply subject, without the
// allocations of jetstream.Msg.Metadata:
//
//	$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>
//	$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>[.<token>...]
func ackMetadata(reply string) (seq uint64, ts int64, pending uint64, ok bool) {
	const prefix = "$JS.ACK."
	if !strings.HasPrefix(reply, prefix) {
		return 0, 0, 0, false
	}
	var tok [12]string
	n := 2
	rest := reply[len(prefix):]
	for n < len(tok) && rest != "" {
		i := strings.IndexByte(rest, '.')
		if i < 0 {
			tok[n], rest = rest, ""
		} else {
			tok[n], rest = rest[:i], rest[i+1:]
		}
		n++
	}
	base := 0 // v2: the domain and account hash come first
	switch {
	case n == 9 && rest == "":
		base = -2
	case n >= 11:
	default:
		return 0, 0, 0, false
	}
	seq, ok1 := ackNum(tok[7+base])
	t, ok2 := ackNum(tok[9+base])
	pending, ok3 := ackNum(tok[10+base])
	if !ok1 || !ok2 || !ok3 || seq == 0 || t > math.MaxInt64 {
		return 0, 0, 0, false
	}
	return seq, int64(t), pending, true
}

func ackNum(s string) (uint64, bool) {
	if s == "" || len(s) > 19 {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + uint64(s[i]-'0')
	}
	return n, true
}

// runShard applies the shard's messages until its channel is closed and
// drained.
func (r *Runner) runShard(ctx context.Context, s *shard) {
	s.running.Store(true)
	defer s.running.Store(false)
	retry := time.NewTicker(time.Millisecond)
	defer retry.Stop()
	closed := func() {
		for len(s.held) > 0 {
			r.drain(s)
			time.Sleep(time.Millisecond)
		}
	}
	// take applies a batch's part, or, once the channel is closed, what
	// the shard holds; it reports whether to go on.
	take := func(its []*item, ok bool) bool {
		if !ok {
			closed()
			return false
		}
		for _, it := range its {
			r.handle(s, it)
		}
		return true
	}
	for {
		// While batches wait, take up to 64 of them without the full
		// select (which locks every channel it names); then the select
		// gives snapshots, held messages and the end their turn.
		for range 64 {
			select {
			case its, ok := <-s.in:
				if !take(its, ok) {
					return
				}
				continue
			default:
			}
			break
		}
		// The ticker is waited on only while messages are held: a shard
		// with nothing held does not wake every millisecond.
		var tick <-chan time.Time
		if len(s.held) > 0 {
			tick = retry.C
		}
		select {
		case its, ok := <-s.in:
			if !take(its, ok) {
				return
			}
		case <-tick:
			r.drain(s)
		case reply := <-s.snapReq:
			reply <- r.freezeShard(s)
		case <-ctx.Done():
			return
		}
	}
}

// handle applies one message, or holds it back while a reader holds its
// deliberation, while its re-verification runs, and while earlier messages
// of its deliberation are held.
func (r *Runner) handle(s *shard, it *item) {
	defer s.processed.Store(it.m.Seq)
	if it.ready != nil {
		<-it.ready
	}
	id := wire.DeliberationOf(it.m.Subject)
	l := s.locks[id] // only this goroutine writes locks
	if l != nil && r.verify != nil && it.m.Invalid == nil && provenance.Annotated(it.m.Artifact) {
		// The deliberation's policy is fixed by its open, which this
		// goroutine applied: only what the fold will judge is re-verified.
		if d := s.proj.Deliberation(id); d != nil && d.Judges(it.m.Artifact) {
			it.reverified = make(chan struct{})
			r.reverify <- it
		}
	}
	if q := s.held[id]; len(q) > 0 {
		s.hold(id, it)
		return
	}
	if l == nil {
		// No such deliberation yet: the message may open it.
		s.mu.Lock()
		out := s.proj.Apply(it.m)
		if d := s.proj.Deliberation(id); d != nil && s.locks[id] == nil {
			s.locks[id] = &delibLock{}
			s.noteOpened(d)
		}
		s.mu.Unlock()
		r.applied(it, out)
		return
	}
	if !it.done() || !l.TryLock() {
		s.hold(id, it)
		return
	}
	it.m.Reverified = it.rev
	out := s.proj.Apply(it.m)
	l.Unlock()
	r.applied(it, out)
}

func (s *shard) hold(id string, it *item) {
	s.held[id] = append(s.held[id], it)
	if s.held[id][0].done() {
		s.locks[id].wanted.Store(true) // held for a reader
	}
	s.heldMu.Lock()
	if s.heldHead[id] == 0 {
		s.heldHead[id] = it.m.Seq
	}
	s.heldMu.Unlock()
	if h := s.heldMin.Load(); h == 0 || it.m.Seq < h {
		s.heldMin.Store(it.m.Seq)
	}
}

// drain applies the held messages of every deliberation no reader holds,
// up to the first whose re-verification is still running.
func (r *Runner) drain(s *shard) {
	for id, q := range s.held {
		n := 0
		for n < len(q) && q[n].done() {
			n++
		}
		if n == 0 {
			continue
		}
		l := s.locks[id]
		if !l.TryLock() {
			l.wanted.Store(true)
			continue
		}
		outs := make([]projector.Outcome, n)
		for i, it := range q[:n] {
			it.m.Reverified = it.rev
			outs[i] = s.proj.Apply(it.m)
		}
		l.wanted.Store(false)
		l.Unlock()
		s.heldMu.Lock()
		if n == len(q) {
			delete(s.held, id)
			delete(s.heldHead, id)
		} else {
			s.held[id] = q[n:]
			s.heldHead[id] = q[n].m.Seq
		}
		s.heldMu.Unlock()
		for i, it := range q[:n] {
			r.applied(it, outs[i])
		}
	}
	var low uint64
	for _, q := range s.held {
		if low == 0 || q[0].m.Seq < low {
			low = q[0].m.Seq
		}
	}
	s.heldMin.Store(low)
}

func (r *Runner) applied(it *item, out projector.Outcome) {
	r.budget.give(it.cost)
	it.cost = 0
	if r.observe != nil {
		r.observe(out, r.Position(), it.pending)
	}
	if r.onApply != nil {
		r.onApply(r, it.m, out)
	}
}

func (r *Runner) snapshotLoop(ctx context.Context) {
	if r.snapPath == "" {
		return
	}
	t := time.NewTicker(r.snapEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := r.Snapshot(); err != nil {
				r.log.Error("snapshot", "err", err)
			}
		}
	}
}

// errHeld: a shard holds messages back and cannot be snapshotted now.
var errHeld = errors.New("service: the shard holds messages back")

// frozen is a shard's state captured for its snapshot (f nil: nothing to
// write).
type frozen struct {
	f   *projector.Frozen
	err error
}

// Snapshot writes every shard's projection that changed since its last
// snapshot to its own file (atomically: a temporary file, fsync, rename).
// A shard is paused only while its state is frozen (projector.Freeze, whose
// cost is not the size of its DAGs); the serialization and the writing run
// here while it folds on. A shard that holds messages back is skipped
// until the next time.
func (r *Runner) Snapshot() error {
	if r.snapPath == "" {
		return nil
	}
	r.snapMu.Lock()
	defer r.snapMu.Unlock()
	var errs []error
	for _, s := range r.shards {
		var fz frozen
		if s.running.Load() {
			reply := make(chan frozen, 1)
			s.snapReq <- reply
			fz = <-reply
		} else {
			// The shard's goroutine is not running (before Run, or after it
			// stopped): nothing is applying, freeze from here.
			fz = r.freezeShard(s)
		}
		err := fz.err
		if err == nil && fz.f != nil {
			err = r.writeShard(s, fz.f)
		}
		if err != nil && !errors.Is(err, errHeld) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// freezeShard captures the shard's state, from the goroutine that applies
// its messages (or with none running).
func (r *Runner) freezeShard(s *shard) frozen {
	if len(s.held) > 0 {
		return frozen{err: errHeld}
	}
	// Every message the shard took is applied (none is held): its
	// projection is complete up to there, whether the messages were its
	// own or not. An empty shard is written too: a restart needs every
	// shard's file.
	// (When nothing is in flight to the shard, every message dispatched so
	// far was its own or another's: it is complete up to the last one.)
	done := r.dispatched.Load()
	if e, p := s.enq.Load(), s.processed.Load(); e != p {
		done = p
	}
	s.proj.Advance(done)
	if s.proj.Position() == s.snapAt.Load() {
		if _, err := os.Stat(r.shardPath(s.i)); err == nil {
			return frozen{}
		}
	}
	// Readers may go on reading (nothing is applied meanwhile); the shard
	// lock keeps out nothing but a message that would open a deliberation.
	s.mu.RLock()
	f := s.proj.Freeze()
	s.mu.RUnlock()
	return frozen{f: f}
}

func (r *Runner) writeShard(s *shard, f *projector.Frozen) error {
	if r.writeHook != nil {
		r.writeHook(s.i)
	}
	dir := filepath.Dir(r.snapPath)
	tmp, err := os.CreateTemp(dir, ".snapshot-*")
	if err != nil {
		return fmt.Errorf("service: snapshot: %w", err)
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriterSize(tmp, 1<<20)
	err = f.Write(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), r.shardPath(s.i))
	}
	if err != nil {
		return fmt.Errorf("service: snapshot of shard %d: %w", s.i, err)
	}
	s.snapAt.Store(f.Position())
	r.log.Debug("snapshot written", "shard", s.i, "position", f.Position())
	return nil
}

// NewInMemory returns a runner of n shards over no stream, whose messages
// a caller applies with ApplyInMemory: for tests and benchmarks of what
// reads the runner.
func NewInMemory(n int, opts projector.Options) *Runner {
	r := &Runner{opts: opts, shards: make([]*shard, n)}
	for i := range r.shards {
		r.shards[i] = &shard{i: i, proj: projector.New(opts), locks: map[string]*delibLock{}, held: map[string][]*item{}, heldHead: map[string]uint64{}}
	}
	return r
}

// ApplyInMemory applies m as the shard's goroutine would (a runner of
// NewInMemory, which has none).
func (r *Runner) ApplyInMemory(m projector.Msg) projector.Outcome {
	id := wire.DeliberationOf(m.Subject)
	s := r.shardOf(id)
	s.mu.Lock()
	out := s.proj.Apply(m)
	if d := s.proj.Deliberation(id); d != nil && s.locks[id] == nil {
		s.locks[id] = &delibLock{}
		s.noteOpened(d)
	}
	s.mu.Unlock()
	s.enq.Store(m.Seq)
	s.processed.Store(m.Seq)
	r.dispatched.Store(m.Seq)
	return out
}
