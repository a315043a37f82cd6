package eventually_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-engine/parley/internal/eventually"
)

// Within returns as soon as the condition holds, and false once the
// deadline has passed without it.
func TestWithin(t *testing.T) {
	var n atomic.Int32
	if !eventually.Within(10*time.Second, func() bool { return n.Add(1) == 3 }) || n.Load() != 3 {
		t.Fatalf("polled %d times, want 3", n.Load())
	}
	if eventually.Within(30*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds held")
	}
}
