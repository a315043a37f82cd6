package metrics

import (
	"context"
	"math"
	rtmetrics "runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// CodeMemoryLimit names the Go runtime's soft memory limit (engine serve
// --memory-limit, or GOMEMLIMIT). It refuses nothing: near it the
// collector runs more often. A hit is a look (MemoryLimit.Tick) that
// found the memory the limit counts at or above it (what the engine holds
// live is more than the limit: the collector cannot bring it under), or
// the runtime's GC CPU limiter engaged since the look before (collecting
// would have taken more than half the CPU, so the runtime let the memory
// exceed the limit).
const CodeMemoryLimit = "limit.memory"

// MemoryLimit watches the Go runtime's soft memory limit and its GC CPU
// limiter (runtime/metrics). Safe for concurrent use.
type MemoryLimit struct {
	mu      sync.Mutex
	samples []rtmetrics.Sample
	cycle   uint64 // the limiter's last-enabled GC cycle at the last look

	limit   atomic.Int64 // 0: none
	inUse   atomic.Int64
	hits    atomic.Uint64
	lastHit atomic.Int64 // Unix nanoseconds
}

// NewMemoryLimit returns a watch of the memory limit; what the limiter did
// before it counts for nothing.
func NewMemoryLimit() *MemoryLimit {
	m := &MemoryLimit{samples: []rtmetrics.Sample{
		{Name: "/gc/gomemlimit:bytes"},
		{Name: "/gc/limiter/last-enabled:gc-cycle"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}}
	m.cycle = m.read()
	return m
}

// read samples the runtime and returns the limiter's last-enabled cycle.
func (m *MemoryLimit) read() uint64 {
	rtmetrics.Read(m.samples)
	limit := m.samples[0].Value.Uint64()
	if limit >= math.MaxInt64 {
		limit = 0
	}
	m.limit.Store(int64(limit))
	// The memory the limit counts: what the runtime has mapped, less
	// what it has given back to the system.
	m.inUse.Store(int64(m.samples[2].Value.Uint64() - m.samples[3].Value.Uint64()))
	return m.samples[1].Value.Uint64()
}

// Tick looks once: with a limit set, memory at or above it, or a limiter
// enabled in a collection since the last look, is a hit at now.
func (m *MemoryLimit) Tick(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.read()
	limiter := c > m.cycle
	m.cycle = c
	if limit := m.limit.Load(); limit > 0 && (limiter || m.inUse.Load() >= limit) {
		m.hits.Add(1)
		m.lastHit.Store(now.UnixNano())
	}
}

// Run looks every period until ctx ends.
func (m *MemoryLimit) Run(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			m.Tick(now)
		}
	}
}

// MemoryStats is the memory limit at the last look.
type MemoryStats struct {
	Limit   int64 // 0: none
	InUse   int64 // the bytes the limit counts
	Hits    uint64
	LastHit time.Time
}

// Stats returns what the last look saw.
func (m *MemoryLimit) Stats() MemoryStats {
	st := MemoryStats{Limit: m.limit.Load(), InUse: m.inUse.Load(), Hits: m.hits.Load()}
	if n := m.lastHit.Load(); n != 0 {
		st.LastHit = time.Unix(0, n)
	}
	return st
}
