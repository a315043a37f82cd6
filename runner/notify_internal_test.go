package runner

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Waiters that check after taking the channel never miss an advance, however
// the notifications interleave with their checks.
func TestNotifier_NoLostWakeUp(t *testing.T) {
	var n notifier
	var pos atomic.Uint64
	const last = 20000
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for want := uint64(1); want <= last; want++ {
				for {
					c := n.wait(want)
					if pos.Load() >= want {
						break
					}
					select {
					case <-c:
					case <-time.After(10 * time.Second):
						t.Errorf("stuck at %d waiting for %d: a wake-up was lost", pos.Load(), want)
						return
					}
				}
			}
		}()
	}
	for i := uint64(1); i <= last; i++ {
		pos.Store(i)
		n.notify(i)
	}
	wg.Wait()
}

// A waiter for a position beyond what a notify says may be reached is not
// woken by it (a reader far ahead of the projection does not wake with
// every batch); one within it is.
func TestNotifier_WakesOnlyWithinTheBound(t *testing.T) {
	var n notifier
	far := n.wait(100)
	n.notify(50)
	select {
	case <-far:
		t.Fatal("woken by a notify up to 50 while waiting for 100")
	default:
	}
	near := n.wait(40)
	n.notify(50)
	select {
	case <-near:
	default:
		t.Fatal("not woken by a notify up to 50 while waiting for 40")
	}
	// Woken too (they shared the channel): it waits again, for 100 alone.
	<-far
	again := n.wait(100)
	n.notify(99)
	select {
	case <-again:
		t.Fatal("woken by a notify up to 99 while waiting for 100")
	default:
	}
	n.notify(100)
	<-again
}
