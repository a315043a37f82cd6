package runner

import (
	"sync"
	"sync/atomic"
)

// notifier wakes the goroutines waiting for something to change (the
// applied position, a deliberation's held messages applied). A waiter
// takes the channel (wait), then checks what it waits for, then blocks on
// the channel; whoever changes it changes it first, then calls notify,
// which closes the channel and forgets it (the next wait makes another).
// Go's atomics are sequentially consistent, so either the waiter's check
// sees the change or notify sees the waiter's channel: no wake-up is lost.
// With nobody waiting, notify costs an atomic load.
type notifier struct {
	mu sync.Mutex
	ch atomic.Pointer[chan struct{}] // nil: nobody waits
}

// wait returns a channel closed by the next notify.
func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p := n.ch.Load(); p != nil {
		return *p
	}
	c := make(chan struct{})
	n.ch.Store(&c)
	return c
}

// notify wakes every waiter.
func (n *notifier) notify() {
	if n.ch.Load() == nil {
		return
	}
	n.mu.Lock()
	if p := n.ch.Swap(nil); p != nil {
		close(*p)
	}
	n.mu.Unlock()
}
