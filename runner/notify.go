package runner

import (
	"math"
	"sync"
	"sync/atomic"
)

// notifier wakes the goroutines waiting for a position to be reached (the
// applied position, a deliberation's held messages applied). A waiter
// takes the channel for the position it waits for (wait), then checks
// whether it is reached, then blocks on the channel; whoever moves the
// position moves it first, then calls notify with a bound on what any
// waiter can now find reached (for the runner: the last position handed
// to the shards), which closes the channel if someone waits for a
// position within the bound. Go's atomics are sequentially consistent, so
// either the waiter's check sees the move or notify sees the waiter: no
// wake-up is lost. With nobody waiting, or only for positions beyond the
// bound (a reader far ahead of the projection), notify costs an atomic
// load and wakes no one; a woken waiter whose position is not reached yet
// waits again.
type notifier struct {
	mu sync.Mutex
	ch chan struct{} // nil: nobody waits
	// low is 1 + the smallest position waited for on ch (0: nobody).
	low atomic.Uint64
}

// wait returns a channel closed by a notify that may have reached seq.
func (n *notifier) wait(seq uint64) <-chan struct{} {
	want := min(seq, math.MaxUint64-1) + 1
	n.mu.Lock()
	defer n.mu.Unlock()
	if l := n.low.Load(); l == 0 || want < l {
		n.low.Store(want)
	}
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

// notify wakes the waiters when one of them waits for a position up to
// reached.
func (n *notifier) notify(reached uint64) {
	if l := n.low.Load(); l == 0 || reached < l-1 {
		return
	}
	n.mu.Lock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.low.Store(0)
	n.mu.Unlock()
}
