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
					c := n.wait()
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
		n.notify()
	}
	wg.Wait()
}
