package service

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
)

// Headers an import sets on every message it republishes, so that an export
// of the imported deliberation gives back the original recording.
const (
	OriginalPositionHeader = "Parley-Original-Position"
	OriginalTimeHeader     = "Parley-Original-Time"
)

// Runner consumes the PARLEY stream into a projection, resumes from its
// last snapshot after a restart, and serves reads concurrently with the
// fold. It owns the consumer, the goroutines and the clock; the fold is
// projector's.
type Runner struct {
	js        jetstream.JetStream
	stream    jetstream.Stream
	log       *slog.Logger
	metrics   *Metrics
	snapPath  string
	snapEvery time.Duration
	opts      projector.Options

	mu   sync.RWMutex
	proj *projector.Projection

	position atomic.Uint64
	snapAt   atomic.Uint64 // position of the last snapshot written
	onApply  func(projector.Msg, projector.Outcome)
}

// RunnerConfig configures a Runner.
type RunnerConfig struct {
	// SnapshotPath is where the projection is checkpointed; empty disables
	// snapshots (every start replays the whole stream).
	SnapshotPath string
	// SnapshotEvery is the interval between snapshots (default 30 s).
	SnapshotEvery time.Duration
	Projector     projector.Options
	Logger        *slog.Logger
	Metrics       *Metrics
	// OnApply, when set, is called after each message is applied, outside
	// the projection's lock (binding-moment announcements, their metrics).
	OnApply func(m projector.Msg, out projector.Outcome)
}

// NewRunner returns a Runner over stream, starting from the snapshot at
// cfg.SnapshotPath when there is a usable one.
func NewRunner(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, cfg RunnerConfig) (*Runner, error) {
	r := &Runner{js: js, stream: stream, log: cfg.Logger, metrics: cfg.Metrics, onApply: cfg.OnApply, snapPath: cfg.SnapshotPath,
		snapEvery: cfg.SnapshotEvery, opts: cfg.Projector}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.metrics == nil {
		r.metrics = NewMetrics()
	}
	if r.snapEvery <= 0 {
		r.snapEvery = 30 * time.Second
	}
	r.proj = projector.New(cfg.Projector)
	if r.snapPath != "" {
		if p, err := r.loadSnapshot(ctx); err != nil {
			r.log.Warn("snapshot not used; rebuilding the projection from the stream", "path", r.snapPath, "err", err)
		} else if p != nil {
			r.proj = p
			r.log.Info("projection restored from snapshot", "position", p.Position())
		}
	}
	r.position.Store(r.proj.Position())
	r.snapAt.Store(r.proj.Position())
	return r, nil
}

func (r *Runner) loadSnapshot(ctx context.Context) (*projector.Projection, error) {
	f, err := os.Open(r.snapPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := projector.ReadSnapshot(bufio.NewReader(f), r.opts)
	if err != nil {
		return nil, err
	}
	info, err := r.stream.Info(ctx)
	if err != nil {
		return nil, err
	}
	if p.Position() > info.State.LastSeq {
		return nil, fmt.Errorf("snapshot at position %d is ahead of the stream (last %d): the stream is not the one it was taken from", p.Position(), info.State.LastSeq)
	}
	return p, nil
}

// Read runs fn with the projection under a read lock. fn must not keep
// references to what it reads past its return.
func (r *Runner) Read(fn func(*projector.Projection)) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	fn(r.proj)
}

// Position is the stream sequence of the last message applied.
func (r *Runner) Position() uint64 { return r.position.Load() }

// WaitFor waits until the projection has applied position seq.
func (r *Runner) WaitFor(ctx context.Context, seq uint64) error {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for r.position.Load() < seq {
		select {
		case <-ctx.Done():
			return fmt.Errorf("service: wait for position %d (at %d): %w", seq, r.position.Load(), ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// Run consumes the stream until ctx ends, then writes a last snapshot.
func (r *Runner) Run(ctx context.Context) error {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if pos := r.Position(); pos > 0 {
		cfg = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: pos + 1}
	}
	cons, err := r.js.OrderedConsumer(ctx, ledger.StreamName, cfg)
	if err != nil {
		return fmt.Errorf("service: ordered consumer: %w", err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(2048))
	if err != nil {
		return fmt.Errorf("service: consume: %w", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.snapshotLoop(ctx)
	}()
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-stopped:
		}
		it.Stop()
	}()
	for {
		msg, err := it.Next()
		if err != nil {
			close(stopped)
			wg.Wait()
			if snapErr := r.Snapshot(); snapErr != nil {
				r.log.Error("final snapshot", "err", snapErr)
			}
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return fmt.Errorf("service: consume at position %d: %w", r.Position(), err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			r.log.Error("message without metadata", "subject", msg.Subject(), "err", err)
			continue
		}
		// An imported message claims its original time; the fold decides
		// how much of the claim to believe (projector.EffectiveTime).
		var claimed time.Time
		if h := msg.Headers().Get(OriginalTimeHeader); h != "" {
			if ot, err := time.Parse(time.RFC3339Nano, h); err == nil {
				claimed = ot
			}
		}
		r.apply(projector.Msg{Seq: meta.Sequence.Stream, Subject: msg.Subject(), Data: msg.Data(), Time: meta.Timestamp, Claimed: claimed}, meta.NumPending)
	}
}

func (r *Runner) apply(m projector.Msg, pending uint64) {
	r.mu.Lock()
	out := r.proj.Apply(m)
	r.mu.Unlock()
	r.position.Store(m.Seq)
	r.metrics.observe(out, m.Seq, pending)
	if r.onApply != nil {
		r.onApply(m, out)
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

// Snapshot writes the projection to the snapshot path (atomically: a
// temporary file, fsync, rename) unless nothing changed since the last one.
func (r *Runner) Snapshot() error {
	if r.snapPath == "" || r.Position() == r.snapAt.Load() {
		return nil
	}
	dir := filepath.Dir(r.snapPath)
	tmp, err := os.CreateTemp(dir, ".snapshot-*")
	if err != nil {
		return fmt.Errorf("service: snapshot: %w", err)
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriterSize(tmp, 1<<20)
	var pos uint64
	r.mu.RLock()
	pos = r.proj.Position()
	err = r.proj.WriteSnapshot(w)
	r.mu.RUnlock()
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
		err = os.Rename(tmp.Name(), r.snapPath)
	}
	if err != nil {
		return fmt.Errorf("service: snapshot: %w", err)
	}
	r.snapAt.Store(pos)
	r.log.Debug("snapshot written", "position", pos)
	return nil
}
