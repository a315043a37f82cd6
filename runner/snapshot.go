package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/parley-engine/parley/projector"
)

// install makes p the shard's projection (restored from a snapshot).
func (s *shard) install(p *projector.Projection) {
	s.proj = p
	s.snapAt.Store(p.Position())
	p.Deliberations(func(d *projector.Deliberation) { s.locks[d.ID] = s.newLock() })
	s.indexOpened()
}

func (r *Runner) loadSnapshots(ctx context.Context) ([]*projector.Projection, error) {
	ps := make([]*projector.Projection, len(r.shards))
	errs := make([]error, len(r.shards))
	var wg sync.WaitGroup
	for i := range r.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps[i], errs[i] = r.loadShard(ctx, i)
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
		kept, err := r.store.List(ctx)
		if err != nil {
			return nil, err
		}
		for _, k := range kept {
			if k.Of != len(r.shards) {
				return nil, snapErr(ErrSnapshotShards, nil, "snapshots of another number of shards (%s); this engine has %d", k.Name, len(r.shards))
			}
		}
		return nil, nil
	case missing > 0:
		return nil, snapErr(ErrSnapshotMissing, nil, "%d of %d shard snapshots missing", missing, len(ps))
	}
	info, err := r.stream.Info(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if p.Position() > r.pos(info.State.LastSeq) {
			return nil, snapErr(ErrSnapshotAhead, nil, "a snapshot at position %d is ahead of the stream (last %d): the stream is not the one it was taken from", p.Position(), r.pos(info.State.LastSeq))
		}
	}
	return ps, nil
}

func (r *Runner) loadShard(ctx context.Context, i int) (*projector.Projection, error) {
	var p *projector.Projection
	found, err := r.store.Read(ctx, i, len(r.shards), r.maxSnap, func(rd io.Reader) error {
		var err error
		p, err = projector.ReadSnapshot(rd, r.opts)
		return err
	})
	if err != nil || !found {
		return nil, err
	}
	return p, nil
}

func (r *Runner) snapshotLoop(ctx context.Context) {
	if r.store == nil {
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
// snapshot to the snapshot store (atomically: a file's temporary file,
// fsync and rename; an object's chunks, then its meta).
// A shard is paused only while its state is frozen (projector.Freeze, whose
// cost is not the size of its DAGs); the serialization and the writing run
// here while it folds on. A shard that holds messages back is skipped
// until the next time.
func (r *Runner) Snapshot() error {
	if r.parts != nil {
		return r.setSnapshot()
	}

	if r.store == nil {
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
		if ok, _ := r.store.Has(context.Background(), s.i, len(r.shards)); ok {
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
	if err := r.store.Write(context.Background(), s.i, len(r.shards), f.Write); err != nil {
		return fmt.Errorf("service: snapshot of shard %d: %w", s.i, err)
	}
	s.snapAt.Store(f.Position())
	r.log.Debug("snapshot written", "shard", s.i, "position", f.Position())
	return nil
}
