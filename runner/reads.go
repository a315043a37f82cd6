package runner

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/projector"
)

// delibLock guards one deliberation's state. Its shard takes it with
// TryLock and never waits for it; while the shard holds messages of the
// deliberation back for a reader, new readers wait for them to be applied
// (wanted), so that readers who follow one another cannot starve the fold.
// Messages held while their re-verification runs do not make readers wait:
// the fold could not apply them anyway. Nobody polls: the reader that lets
// go of a wanted lock wakes its shard (runlock), and the shard wakes the
// readers waiting once it has applied what it held (release).
type delibLock struct {
	sync.RWMutex
	wanted atomic.Bool
	// drained is notified when the shard lets go of the lock after
	// applying what it held for readers (wanted cleared).
	drained notifier
	// wake is the shard's (shard.wake; nil: a runner without goroutines).
	wake chan struct{}
}

// readerWait bounds how long a new reader waits for the shard to apply
// what it holds back, should the reader it waits behind hold the lock for
// long: past it, the reader reads alongside.
const readerWait = 100 * time.Millisecond

// rlock read-locks l once the shard has applied what it holds back (or
// after readerWait).
func (l *delibLock) rlock() {
	if l.wanted.Load() {
		l.awaitDrained()
	}
	l.RLock()
}

func (l *delibLock) awaitDrained() {
	t := time.NewTimer(readerWait)
	defer t.Stop()
	for {
		c := l.drained.wait(0)
		if !l.wanted.Load() {
			return
		}
		select {
		case <-c:
		case <-t.C:
			return
		}
	}
}

// runlock read-unlocks l and, when the shard wants the lock, wakes it.
// The shard marks the lock wanted before it tries it a last time (take),
// so whichever reader lets go last either sees wanted or has let go before
// that try: the shard is never left waiting for a wake-up that no one
// sends.
func (l *delibLock) runlock() {
	l.RUnlock()
	if l.wanted.Load() {
		signal(l.wake)
	}
}

// take locks l for the shard's goroutine without waiting, or, when a
// reader holds it, marks it wanted and reports false: the reader that lets
// go last wakes the shard (runlock).
func (l *delibLock) take() bool {
	if l.TryLock() {
		return true
	}
	l.wanted.Store(true)
	// A reader that let go before wanted was set did not wake the shard:
	// try once more.
	return l.TryLock()
}

// release unlocks what take locked; if readers were waiting for the
// shard's held messages, they may read.
func (l *delibLock) release() {
	if !l.wanted.Load() {
		l.Unlock()
		return
	}
	l.wanted.Store(false)
	l.Unlock()
	l.drained.notify(math.MaxUint64)
}

// signal wakes the goroutine that receives on c (capacity 1), without
// waiting: a wake-up already pending is enough.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// ReadDeliberation runs fn with deliberation id under its read lock and
// reports whether it exists. fn must not keep references to what it reads
// past its return; while it runs, only this deliberation's messages wait.
func (r *Runner) ReadDeliberation(id string, fn func(*projector.Deliberation)) bool {
	if r.parts != nil {
		p := r.partOf(id)
		return p != nil && p.ReadDeliberation(id, fn)
	}

	d, l := r.lookup(id)
	if d == nil || l == nil {
		return false
	}
	l.rlock()
	defer l.runlock()
	fn(d)
	return true
}

// lookup returns deliberation id and its lock (nil when its shard holds
// no such deliberation).
func (r *Runner) lookup(id string) (*projector.Deliberation, *delibLock) {
	s := r.shardOf(id)
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.proj.Deliberation(id), s.locks[id]
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
	if r.parts != nil {
		p := r.partOf(id)
		return p != nil && p.ReadDeliberationYielding(id, fn)
	}

	d, l := r.lookup(id)
	if d == nil || l == nil {
		return false
	}
	l.rlock()
	defer l.runlock()
	fn(d, func(rest time.Duration) {
		if rest > 0 || l.wanted.Load() {
			l.runlock()
			time.Sleep(rest)
			l.rlock()
		}
	})
	return true
}

// EachDeliberation runs fn with every deliberation, each under its own read
// lock, in no particular order.
func (r *Runner) EachDeliberation(fn func(*projector.Deliberation)) {
	if r.parts != nil {
		for _, p := range r.held() {
			p.EachDeliberation(fn)
		}
		return
	}

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
			e.l.runlock()
		}
	}
}

// Deliberations returns the number of deliberations.
func (r *Runner) Deliberations() int {
	if r.parts != nil {
		n := 0
		for _, p := range r.held() {
			n += p.Deliberations()
		}
		return n
	}

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
func (r *Runner) Unrouted() ([]api.Rejection, int) {
	if r.parts != nil {
		return r.setUnrouted()
	}

	var all []api.Rejection
	total := 0
	for _, s := range r.shards {
		s.mu.RLock()
		kept, n := s.proj.Unrouted()
		all = append(all, kept...)
		total += n
		s.mu.RUnlock()
	}
	slices.SortFunc(all, func(a, b api.Rejection) int { return cmp.Compare(a.Position, b.Position) })
	if max := r.shards[0].proj.MaxKept(); len(all) > max {
		all = all[len(all)-max:]
	}
	return all, total
}

// Outcome says what the projection did with the message m of deliberation
// id (projector.Projection.OutcomeOf), once the projection has reached it.
func (r *Runner) Outcome(id string, m projector.Msg, want *canon.Digest) (projector.MessageOutcome, error) {
	if r.parts != nil {
		p := r.partOf(id)
		if p == nil {
			return projector.MessageOutcome{}, r.notHeld(id)
		}
		return p.Outcome(id, m, want)
	}

	if m.Seq > r.Position() {
		return projector.MessageOutcome{Deliberation: id, Position: m.Seq, Verdict: api.VerdictUnprojected,
			Note: "the projection is at position " + strconv.FormatUint(r.Position(), 10)}, nil
	}
	s := r.shardOf(id)
	s.mu.RLock()
	l := s.locks[id]
	s.mu.RUnlock()
	if l != nil {
		l.rlock()
		defer l.runlock()
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.proj.OutcomeOf(id, m, want)
}

// Position is the stream position up to which every message is applied.
func (r *Runner) Position() uint64 {
	if r.parts != nil {
		if p := r.slot(0); p != nil {
			return p.Position()
		}
		return 0
	}

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

// advanced wakes the waiters for positions up to the last one handed to
// the shards: what a shard applied, held or handed over may have moved
// theirs (every waiter's position is at most that one). Called after the
// move.
func (r *Runner) advanced() { r.moved.notify(r.dispatched.Load()) }

// WaitFor waits until the projection has applied every message up to
// position seq, or ctx ends. It does not poll: the shards wake the
// waiters each time they have applied a batch's part or held messages.
func (r *Runner) WaitFor(ctx context.Context, seq uint64) error {
	if r.parts != nil {
		p := r.partAt(seq)
		if p == nil {
			return r.notHeldAt(seq)
		}
		return p.WaitFor(ctx, seq)
	}

	return r.wait(ctx, seq, r.Position)
}

// WaitForIn waits until deliberation id's messages up to position seq are
// applied (a reader holding another deliberation does not delay it).
func (r *Runner) WaitForIn(ctx context.Context, id string, seq uint64) error {
	if r.parts != nil {
		// A position of another stream than id's (a client's write to
		// another deliberation) is waited for in its own stream.
		if k, _, _ := r.layout.Split(seq); k != r.layout.Index(id) {
			if r.slot(k) == nil {
				// A stream this engine does not fold (an owned set): id's
				// messages are all in its own stream, which the position
				// says nothing of.
				return nil
			}
			return r.WaitFor(ctx, seq)
		}
		p := r.partOf(id)
		if p == nil {
			return r.notHeld(id)
		}
		return p.WaitForIn(ctx, id, seq)
	}

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
	for {
		// The channel first, then the position: an advance after the
		// check closes the channel (notifier).
		moved := r.moved.wait(seq)
		if pos() >= seq {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("service: wait for position %d (at %d): %w", seq, pos(), ctx.Err())
		case <-moved:
		}
	}
}
