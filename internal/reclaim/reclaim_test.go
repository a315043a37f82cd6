package reclaim_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/parley-engine/parley/internal/reclaim"
)

// Buffers left in a pool, as the embedded server leaves its blocks' after
// a burst, are given back to the system by a quiet process's next tick,
// a tick while collections run (a busy process) does nothing, and once a
// reclaim gives back little the ticks rest.
func TestReclaim_PoolAfterBurst(t *testing.T) {
	r := reclaim.New(16 << 20)
	var pool sync.Pool
	bufs := make([]*[8 << 20]byte, 32) // 256 MiB
	for i := range bufs {
		bufs[i] = new([8 << 20]byte)
		bufs[i][0] = byte(i)
	}
	for _, b := range bufs {
		pool.Put(b)
	}
	bufs = nil
	// Busy: a collection ran since the last tick.
	runtime.GC()
	if _, acted := r.Tick(); acted {
		t.Fatal("reclaimed while collections run")
	}
	// Quiet now: nothing collected since the last tick.
	returned, acted := r.Tick()
	if !acted || returned < 128<<20 {
		t.Fatalf("acted %v, returned %d MiB of the pool's 256", acted, returned>>20)
	}
	// The next quiet tick looks again (the server's caches expire over
	// seconds after a burst) and finds little; then the ticks rest.
	if n, acted := r.Tick(); !acted || n > 16<<20 {
		t.Fatalf("the look after a fruitful reclaim: acted %v, returned %d MiB", acted, n>>20)
	}
	if _, acted := r.Tick(); acted {
		t.Fatal("reclaimed again with nothing held")
	}
	runtime.KeepAlive(&pool)
}
