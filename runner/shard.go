package runner

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/wire"
)

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
	// wake (capacity 1) tells the shard's goroutine that held messages
	// may be applied: a reader let go of a lock the shard wants, or a
	// re-verification ended.
	wake chan struct{}

	snapReq chan chan frozen
	snapAt  atomic.Uint64 // the position of the shard's last snapshot
	running atomic.Bool   // its goroutine is running (snapshots go through it)
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

// newLock returns the lock of a deliberation of the shard.
func (s *shard) newLock() *delibLock { return &delibLock{wake: s.wake} }

// runShard applies the shard's messages until its channel is closed and
// drained.
func (r *Runner) runShard(ctx context.Context, s *shard) {
	s.running.Store(true)
	defer s.running.Store(false)
	// closed applies what the shard holds once its channel is closed: as
	// the readers let go and the re-verifications end, each of which wakes
	// the shard.
	closed := func() {
		for {
			r.drain(s)
			if len(s.held) == 0 {
				return
			}
			select {
			case <-s.wake:
			case reply := <-s.snapReq:
				reply <- r.freezeShard(s)
			}
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
		r.advanced()
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
		select {
		case its, ok := <-s.in:
			if !take(its, ok) {
				return
			}
		case <-s.wake:
			// A reader let go of a lock the shard wants, or a
			// re-verification ended.
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
			s.locks[id] = s.newLock()
			s.noteOpened(d)
		}
		s.mu.Unlock()
		r.applied(it, out)
		return
	}
	if !it.done() || !l.take() {
		s.hold(id, it)
		return
	}
	it.m.Reverified = it.rev
	out := s.proj.Apply(it.m)
	l.release()
	r.applied(it, out)
}

func (s *shard) hold(id string, it *item) {
	s.held[id] = append(s.held[id], it)
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
// up to the first whose re-verification is still running. The shard runs
// it when woken (shard.wake): by the last reader to let go of a lock it
// wants, and by the re-verifiers as each finishes.
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
		if !l.take() {
			continue // the reader that lets go last wakes the shard
		}
		outs := make([]projector.Outcome, n)
		for i, it := range q[:n] {
			it.m.Reverified = it.rev
			outs[i] = s.proj.Apply(it.m)
		}
		l.release()
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
	r.advanced()
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
