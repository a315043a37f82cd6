package readmodel

import (
	"container/list"
	"context"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
)

// Readers never slow the writers. A read whose cost grows with a
// deliberation (a closure verification of a large DAG at a position, a
// recording, the binding moments) is either answered from a cache or paid
// for out of a budget:
//
//   - A closure verification whose answer can no longer change (its
//     position reached: closureFinal)
//     is kept, keyed by deliberation, decision and position, within
//     closureCacheBytes: any number of readers of it cost one verification.
//   - Every other expensive read of an HTTP client that is not signed in
//     is paid for out of the ReadBudget: at most Concurrent at once (one a
//     client network), and PerSecond of compute time per second in all; a
//     read waits up to admitWait for it, and is then answered 429
//     limit.read_budget with Retry-After.
//     A recording spends the budget as it goes, and waits for it to refill
//     rather than stop.
//   - A long verification lets go of the deliberation's lock whenever its
//     shard holds a message back for it (runner.ReadDeliberationYielding),
//     so that the deliberation's own writers wait a moment, not the whole
//     verification.
//
// Signed-in readers (a valid HTTP token) are not budgeted; the NATS query
// service's reads are served one at a time by their endpoint.

// ReadBudget bounds the expensive reads of HTTP clients that are not
// signed in.
type ReadBudget struct {
	// Concurrent is the most such reads running at once (one a client
	// network, web.ClientNetwork).
	Concurrent int
	// PerSecond is the compute time they may spend per second, in all, and
	// Burst what they may spend at once after a quiet time.
	PerSecond, Burst time.Duration
}

// DefaultReadBudget: two reads at once, 100 ms of compute a second (a
// twentieth of two cores), 500 ms at once.
var DefaultReadBudget = ReadBudget{Concurrent: 2, PerSecond: 100 * time.Millisecond, Burst: 500 * time.Millisecond}

// Reads that spend the budget (the read label of its metrics).
const (
	ReadClosure   = "closure"
	ReadRecording = "recording"
	ReadBindings  = "bindings"
	ReadList      = "list" // a listing that may read every deliberation: a search, a status filter
)

// BudgetedReads are the reads that spend the budget.
var BudgetedReads = []string{ReadClosure, ReadRecording, ReadBindings, ReadList}

// closureCacheBytes bounds the closure results kept.
const closureCacheBytes = 32 << 20

// yieldEvery is how many graph reads a long verification makes between
// two offers to yield its deliberation's lock; yieldAbove the DAG size
// from which it offers (below, a verification takes under a millisecond).
const (
	yieldEvery = 1024
	yieldAbove = 4096
)

// Budget holds the read budget and the closure cache.
type Budget struct {
	cfg ReadBudget

	mu      sync.Mutex
	tokens  float64 // nanoseconds of compute available (may go below 0)
	refill  time.Time
	running int
	perNet  map[string]int
	changed chan struct{} // closed (and replaced) when a place is given back

	refused  [4]atomic.Uint64 // by read, as BudgetedReads
	lastHit  atomic.Int64     // unix nanoseconds of the last refusal
	spent    atomic.Int64     // nanoseconds of compute spent from the budget
	closures closureCache
}

// NewBudget returns a budget of cfg (its zero fields: DefaultReadBudget's).
func NewBudget(cfg ReadBudget) *Budget {
	if cfg.Concurrent <= 0 {
		cfg.Concurrent = DefaultReadBudget.Concurrent
	}
	if cfg.PerSecond <= 0 {
		cfg.PerSecond = DefaultReadBudget.PerSecond
	}
	if cfg.Burst <= 0 {
		cfg.Burst = max(cfg.PerSecond, DefaultReadBudget.Burst)
	}
	return &Budget{cfg: cfg, tokens: float64(cfg.Burst), refill: time.Now(), perNet: map[string]int{}, changed: make(chan struct{}),
		closures: closureCache{max: closureCacheBytes, m: map[closureKey]*list.Element{}}}
}

// Ticket is a read admitted by the budget; charge spends what it used,
// Done gives its place back. A nil Ticket (a reader the budget does not
// count) spends nothing.
type Ticket struct {
	r       *Budget
	network string
	start   time.Time
}

// admitWait is how long a read waits for the budget before it is
// refused: a client that asks again at once, whatever Retry-After says,
// asks at most once a second a connection.
const admitWait = time.Second

// Admit admits an expensive read of what for a reader of client network
// network (web.ClientNetwork) not signed in, waiting up to admitWait for
// the budget (ctx ends the wait), or returns the limit.read_budget
// refusal (api.KindLimited, with RetryAfter). A signed-in reader is not
// budgeted: its caller does not ask (a nil Budget admits at once, with no
// ticket).
func (rs *Budget) Admit(ctx context.Context, network, what string) (*Ticket, error) {
	if rs == nil {
		return nil, nil
	}
	timeout := time.NewTimer(admitWait)
	defer timeout.Stop()
	for {
		rs.mu.Lock()
		now := time.Now()
		rs.refillLocked(now)
		var why string
		switch {
		case rs.tokens <= 0:
			why = "the engine's reads for readers not signed in have spent their compute budget (" + rs.cfg.PerSecond.String() + " a second)"
		case rs.running >= rs.cfg.Concurrent:
			why = "the engine runs " + strconv.Itoa(rs.cfg.Concurrent) + " such reads at once for readers not signed in"
		case rs.perNet[network] > 0:
			why = "the engine runs one such read at once for " + network
		}
		if why == "" {
			rs.running++
			rs.perNet[network]++
			rs.mu.Unlock()
			return &Ticket{r: rs, network: network, start: now}, nil
		}
		// Wait for a place to be given back, or for the budget to refill.
		wake, refill := rs.changed, time.Duration(0)
		if rs.tokens <= 0 {
			refill = time.Duration(-rs.tokens/float64(rs.cfg.PerSecond)*float64(time.Second)) + time.Millisecond
		}
		wait := rs.retryAfterLocked()
		rs.mu.Unlock()
		var refilled <-chan time.Time
		var t *time.Timer
		if refill > 0 {
			t = time.NewTimer(refill)
			refilled = t.C
		}
		again := false
		select {
		case <-wake:
			again = true
		case <-refilled:
			again = true
		case <-ctx.Done():
		case <-timeout.C:
		}
		if t != nil {
			t.Stop()
		}
		if again {
			continue
		}
		for i, n := range BudgetedReads {
			if n == what {
				rs.refused[i].Add(1)
			}
		}
		rs.lastHit.Store(time.Now().UnixNano())
		return nil, &api.Error{Kind: api.KindLimited, Code: api.CodeReadBudget, RetryAfter: wait,
			Message: "this " + what + " read is refused: " + why + "; sign in (a token) or ask again in " + strconv.Itoa(wait) + " s"}
	}
}

func (rs *Budget) refillLocked(now time.Time) {
	if d := now.Sub(rs.refill); d > 0 {
		rs.tokens = math.Min(float64(rs.cfg.Burst), rs.tokens+float64(d)*float64(rs.cfg.PerSecond)/float64(time.Second))
		rs.refill = now
	}
}

// retryAfterLocked is how many seconds until the budget has compute again
// (at least 1).
func (rs *Budget) retryAfterLocked() int {
	if rs.tokens > 0 {
		return 1
	}
	s := -rs.tokens / float64(rs.cfg.PerSecond)
	return max(1, int(math.Ceil(s)))
}

// charge spends d of the budget (nil ticket: nothing to spend).
func (t *Ticket) charge(d time.Duration) {
	if t == nil || d <= 0 {
		return
	}
	t.r.spent.Add(int64(d))
	t.r.mu.Lock()
	t.r.refillLocked(time.Now())
	t.r.tokens -= float64(d)
	t.r.mu.Unlock()
}

// pace waits until the budget has compute again (ctx ends it); a
// recording spends its budget as it goes.
func (t *Ticket) pace(done <-chan struct{}) bool {
	if t == nil {
		return true
	}
	for {
		t.r.mu.Lock()
		t.r.refillLocked(time.Now())
		short := -t.r.tokens
		t.r.mu.Unlock()
		if short <= 0 {
			return true
		}
		wait := time.Duration(short / float64(t.r.cfg.PerSecond) * float64(time.Second))
		select {
		case <-done:
			return false
		case <-time.After(max(wait, time.Millisecond)):
		}
	}
}

// Done spends the time since admission and gives the place back.
func (t *Ticket) Done() {
	if t == nil {
		return
	}
	t.charge(time.Since(t.start))
	t.release()
}

// release gives the place back, spending nothing: a read that charges as
// it goes (a recording, paced) holds no place while it streams.
func (t *Ticket) release() {
	if t == nil {
		return
	}
	t.r.mu.Lock()
	t.r.running--
	if t.r.perNet[t.network]--; t.r.perNet[t.network] <= 0 {
		delete(t.r.perNet, t.network)
	}
	close(t.r.changed) // the reads waiting for a place look again
	t.r.changed = make(chan struct{})
	t.r.mu.Unlock()
}

// ReadStats are the read budget's and the closure cache's counts.
type ReadStats struct {
	// Refused counts reads refused for the budget, by read (closure,
	// recording, bindings).
	Refused map[string]uint64
	LastHit time.Time
	// Spent is the compute time spent from the budget since the start.
	Spent time.Duration
	// Running is the budgeted reads running now.
	Running int
	// ClosureHits and ClosureMisses count verifications answered from the
	// cache, and computed; ClosureBytes is the cache's size.
	ClosureHits, ClosureMisses uint64
	ClosureBytes               int
	// Concurrent is the most budgeted reads at once (ReadBudget.Concurrent).
	Concurrent int
}

// Stats returns the budget's and the cache's counts.
func (rs *Budget) Stats() ReadStats {
	st := ReadStats{Refused: map[string]uint64{}, Spent: time.Duration(rs.spent.Load())}
	for i, n := range BudgetedReads {
		st.Refused[n] = rs.refused[i].Load()
	}
	if t := rs.lastHit.Load(); t != 0 {
		st.LastHit = time.Unix(0, t)
	}
	rs.mu.Lock()
	st.Running = rs.running
	rs.mu.Unlock()
	st.ClosureHits, st.ClosureMisses = rs.closures.hits.Load(), rs.closures.misses.Load()
	st.ClosureBytes = rs.closures.size()
	st.Concurrent = rs.cfg.Concurrent
	return st
}

// closureKey names a verification; its answer is final once closureFinal.
type closureKey struct {
	deliberation string
	decision     canon.Digest
	at           uint64
}

// closureCache keeps final closure results, the least recently used
// dropped first past max bytes.
type closureCache struct {
	max          int
	mu           sync.Mutex
	bytes        int
	lru          list.List // of *closureEntry, the most recent first
	m            map[closureKey]*list.Element
	hits, misses atomic.Uint64
}

type closureEntry struct {
	key   closureKey
	r     closure.Result
	bytes int
}

func (c *closureCache) get(k closureKey) (closure.Result, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[k]
	if !ok {
		return closure.Result{}, false
	}
	c.lru.MoveToFront(el)
	c.hits.Add(1)
	return el.Value.(*closureEntry).r, true
}

func (c *closureCache) put(k closureKey, r closure.Result) {
	n := 256 + len(k.deliberation) + len(r.Decision) + len(r.Status)
	for _, f := range r.Findings {
		n += 96 + len(f.Code) + len(f.ArtifactID) + len(f.Message) + len(f.Severity)
	}
	if n > c.max/8 {
		return // one result does not take the cache
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok {
		return
	}
	c.m[k] = c.lru.PushFront(&closureEntry{k, r, n})
	c.bytes += n
	for c.bytes > c.max {
		old := c.lru.Back()
		e := old.Value.(*closureEntry)
		c.lru.Remove(old)
		delete(c.m, e.key)
		c.bytes -= e.bytes
	}
}

func (c *closureCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// closureFinal reports whether a verification of decision at position at
// over d (read-locked) can no longer change: every message of the
// deliberation up to its position is applied (its own position is there,
// or the projection's everywhere); nothing is held pending, so later
// messages only append nodes at later positions, which a
// verification at an earlier one does not count.
func closureFinal(d *projector.Deliberation, decision canon.Digest, at, projected uint64) bool {
	if at == 0 {
		if at = d.PositionOf(decision); at == 0 {
			return false // not (yet) in the DAG
		}
	}
	return d.Position >= at || projected >= at
}

// yieldingGraph is a deliberation's DAG read for a long verification: it
// offers its lock every yieldEvery reads (runner.ReadDeliberationYielding).
// Each read is made under the lock; nodes are never changed once
// admitted, so a verification whose answer is final reads the same
// answer as it would without yielding. Paid from the read budget (t not
// nil), it also rests, the lock let go, so as to compute at most the
// budget's share of the time (PerSecond a second): one verification never
// takes a core for long.
type yieldingGraph struct {
	d     *projector.Deliberation
	yield func(rest time.Duration)
	n     int
	t     *Ticket
	// work is the compute time so far, mark when the current stretch
	// of it began; slice is how long a stretch lasts (0: paceSlice).
	work  time.Duration
	mark  time.Time
	slice time.Duration
}

// paceSlice is how long a paced verification computes between rests.
const paceSlice = 5 * time.Millisecond

func (g *yieldingGraph) start() { g.mark = time.Now() }

// stop returns the compute time spent.
func (g *yieldingGraph) stop() time.Duration { return g.work + time.Since(g.mark) }

func (g *yieldingGraph) tick() {
	if g.n++; g.n%yieldEvery != 0 {
		return
	}
	if g.t == nil {
		g.yield(0)
		return
	}
	stretch, slice := time.Since(g.mark), g.slice
	if slice <= 0 {
		slice = paceSlice
	}
	if stretch < slice {
		g.yield(0)
		return
	}
	g.work += stretch
	share := float64(g.t.r.cfg.PerSecond) / float64(time.Second)
	g.yield(time.Duration(float64(stretch) * (1 - share) / share))
	g.mark = time.Now()
}

var _ closure.EvidenceGraph = (*yieldingGraph)(nil)

func (g *yieldingGraph) Lookup(id canon.Digest) (closure.Info, bool) {
	g.tick()
	return g.d.Lookup(id)
}

func (g *yieldingGraph) References(id canon.Digest, fn func(canon.Digest, events.Relation)) {
	g.tick()
	g.d.References(id, fn)
}

func (g *yieldingGraph) Objections(id canon.Digest, fn func(canon.Digest)) {
	g.tick()
	g.d.Objections(id, fn)
}

func (g *yieldingGraph) InadmissibleSupport(id canon.Digest, fn func(canon.Digest, string)) {
	g.tick()
	g.d.InadmissibleSupport(id, fn)
}

var _ closure.OrdinalGraph = (*yieldingGraph)(nil)

func (g *yieldingGraph) Ordinal(position uint64) uint64 { return g.d.Ordinal(position) }
