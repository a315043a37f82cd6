package metrics_test

import (
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/parley-engine/parley/metrics"
)

// sink and live keep allocations from being optimized away.
var (
	sink []byte
	live []*node
)

// node makes a live heap of pointers, which costs the collector to mark.
type node struct{ prev, next *node }

// A memory limit far below what the process holds live is hit: the watch
// counts it, and the bounds report names limit.memory as hit recently,
// while a limit far above is not. Without a limit, the report has no such
// bound.
func TestMemoryLimit_Hit(t *testing.T) {
	m := metrics.NewMemoryLimit()
	b := metrics.BoundSources{Memory: m}
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })

	debug.SetMemoryLimit(1 << 62) // as good as none, yet a limit
	m.Tick(time.Now())
	if st := m.Stats(); st.Limit != 1<<62 || st.InUse <= 0 || st.Hits != 0 {
		t.Fatalf("with an unreachable limit: %+v", st)
	}

	// A live heap of pointers well above the limit, and garbage: each
	// collection must mark the whole heap, and the limit asks for one at
	// every allocation.
	t.Cleanup(func() { live = nil })
	live = make([]*node, 1<<20)
	for i := range live {
		live[i] = &node{}
		if i > 0 {
			live[i].prev, live[i-1].next = live[i-1], live[i]
		}
	}
	debug.SetMemoryLimit(8 << 20)
	deadline := time.Now().Add(30 * time.Second)
	for m.Stats().Hits == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no hit within 30 s: %+v", m.Stats())
		}
		for range 64 {
			sink = make([]byte, 256<<10)
		}
		m.Tick(time.Now())
	}
	st := m.Stats()
	if st.Limit != 8<<20 || st.LastHit.IsZero() || time.Since(st.LastHit) > time.Minute {
		t.Fatalf("after a hit: %+v", st)
	}
	rep := b.Report(time.Now())
	i := slices.IndexFunc(rep, func(x metrics.Bound) bool { return x.Name == metrics.CodeMemoryLimit })
	if i < 0 || !rep[i].Recent || rep[i].Hits != st.Hits || rep[i].Limit != 8<<20 {
		t.Fatalf("the report: %+v", rep)
	}
	live = nil

	debug.SetMemoryLimit(prev)
	if prev == 1<<63-1 {
		m.Tick(time.Now())
		if rep := b.Report(time.Now()); slices.ContainsFunc(rep, func(x metrics.Bound) bool { return x.Name == metrics.CodeMemoryLimit }) {
			t.Fatalf("without a limit the report names it: %+v", rep)
		}
	}
}
