package runner

import (
	"sync"
	"time"
)

// DefaultInFlightBytes is how many bytes of messages the runner holds
// between the consumer and the fold by default (Config.InFlightBytes).
const DefaultInFlightBytes = 32 << 20

// byteBudget bounds the bytes of the messages read from the stream and not
// yet applied: the consumer's handler takes a message's size (its subject,
// headers and data) before it hands the message on, and waits while the
// budget is spent; the shard gives it back once the message is applied.
// So the messages a client sends faster than the fold takes them wait in
// the stream, not in the engine's memory, whatever their size. A message
// larger than the whole budget takes all of it.
type byteBudget struct {
	mu   sync.Mutex
	cond sync.Cond
	max  int64
	used int64
	// waits counts the takes that had to wait, last when the last began.
	waits uint64
	last  time.Time
	peak  int64
	now   func() time.Time
}

func newByteBudget(max int64, now func() time.Time) *byteBudget {
	b := &byteBudget{max: max, now: now}
	b.cond.L = &b.mu
	return b
}

// take waits until n bytes (at most the whole budget) are free, takes
// them and returns what it took.
func (b *byteBudget) take(n int64) int64 {
	n = min(max(n, 1), b.max)
	b.mu.Lock()
	if b.used+n > b.max {
		b.waits++
		b.last = b.now()
		for b.used+n > b.max {
			b.cond.Wait()
		}
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	b.mu.Unlock()
	return n
}

// give returns n bytes taken.
func (b *byteBudget) give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	b.cond.Broadcast()
}

// BudgetStats is the in-flight byte budget's state.
type BudgetStats struct {
	Max, Used, Peak int64
	// Waits counts the messages the consumer held back because the budget
	// was spent; LastWait is when the last wait began.
	Waits    uint64
	LastWait time.Time
}

func (b *byteBudget) stats() BudgetStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BudgetStats{Max: b.max, Used: b.used, Peak: b.peak, Waits: b.waits, LastWait: b.last}
}

// InFlight reports the in-flight byte budget: its size, the bytes read
// from the stream and not yet applied, and how often the consumer waited.
func (r *Runner) InFlight() BudgetStats {
	if r.parts != nil {
		return r.setInFlight()
	}
	return r.budget.stats()
}

// KeptBytes reports the bytes of the summaries kept of rejected, late and
// foreign messages across the shards, their bound, how many the bound has
// dropped since the start, and the stream time of the last drop.
func (r *Runner) KeptBytes() (used, max int64, dropped uint64, last time.Time) {
	if r.parts != nil {
		return r.setKeptBytes()
	}

	for _, s := range r.shards {
		s.mu.RLock()
		u, m, d, l := s.proj.KeptBytes()
		s.mu.RUnlock()
		used, max, dropped = used+u, max+m, dropped+d
		if l.After(last) {
			last = l
		}
	}
	return used, max, dropped, last
}

// Breaches reports, across the shards, the bytes of the limit breaches
// waiting for a supervisor FAILURE and the breaches not kept for their
// bounds (projector.Projection.Breaches).
func (r *Runner) Breaches() (held int64, dropped uint64) {
	if r.parts != nil {
		return r.setBreaches()
	}

	for _, s := range r.shards {
		s.mu.RLock()
		h, d := s.proj.Breaches()
		s.mu.RUnlock()
		held, dropped = held+h, dropped+d
	}
	return held, dropped
}
