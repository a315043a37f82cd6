package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/internal/httplimit"
	"github.com/parley-engine/parley/internal/reclaim"
	"github.com/parley-engine/parley/readmodel"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/web"
)

// Bound is one of the engine's bounds on what clients may hold, as
// /healthz reports it. Hitting one is no fault of the engine's: /healthz
// stays ok (a client that fills a bound must not take the engine out of a
// load balancer), and says which were hit recently.
type Bound struct {
	// Name is the code its refusals carry (docs/ERRORS.md).
	Name  string `json:"name"`
	Limit int    `json:"limit"`
	InUse int    `json:"in_use"`
	// Hits counts the refusals since the start (and, for HTTP
	// connections, the connections closed to make room).
	Hits    uint64    `json:"hits"`
	LastHit time.Time `json:"last_hit,omitzero"`
	// Recent: hit within BoundRecent.
	Recent bool `json:"recent"`
}

// BoundRecent is how long a bound hit counts as recent in /healthz.
const BoundRecent = time.Minute

// BoundSources are what the bounds are read from; a nil one has no bound
// in the report.
type BoundSources struct {
	Budget   *httplimit.Budget
	Explorer *web.Explorer
	Reads    *readmodel.Budget
	Runner   *runner.Runner
	// Memory watches the runtime's soft memory limit: in the report only
	// while one is set.
	Memory *MemoryLimit
	// Consumers reads the bound on the stream's consumers that are not
	// the engine's (health.Watch's, limit.consumers): the bound, the
	// consumers at the last count, those deleted past it, the last.
	Consumers func() (limit, inUse int, hits uint64, last time.Time)
}

// CodeInFlightBytes names the bound on the bytes read from the stream and
// not yet applied (runner.Config.InFlightBytes). It refuses nothing: past
// it the engine's consumer waits and the messages wait in the stream.
const CodeInFlightBytes = "limit.in_flight_bytes"

// CodeKeptBytes names the bound on the bytes of the summaries kept of
// rejected, late and foreign messages (projector.Options.MaxKeptBytes).
// It refuses nothing: past it the oldest summaries are dropped (counts,
// totals and state digests still cover them).
const CodeKeptBytes = "limit.kept_bytes"

// CodeConsumers names the bound on the stream's consumers that are not
// the engine's own (health.DefaultMaxConsumers, engine serve
// --max-consumers): past it each new one is deleted as the engine learns
// of it.
const CodeConsumers = "limit.consumers"

// Report is the bounds as /healthz reports them at now.
func (b BoundSources) Report(now time.Time) []Bound {
	var out []Bound
	add := func(name string, limit, inUse int, hits uint64, last time.Time) {
		out = append(out, Bound{Name: name, Limit: limit, InUse: inUse, Hits: hits, LastHit: last.UTC(),
			Recent: !last.IsZero() && now.Sub(last) < BoundRecent})
	}
	if b.Budget != nil {
		st := b.Budget.Stats()
		add(httplimit.CodeConnections, st.Max, st.Open, st.Evicted+st.Shed, st.LastHit)
	}
	if b.Explorer != nil {
		st := b.Explorer.FeedStats()
		var hits uint64
		for _, n := range st.Refused {
			hits += n
		}
		add(web.CodeLiveFeeds, st.Max, st.Open, hits, st.LastRefused)
	}
	if b.Runner != nil {
		st := b.Runner.InFlight()
		add(CodeInFlightBytes, int(st.Max), int(st.Used), st.Waits, st.LastWait)
		used, max, dropped, last := b.Runner.KeptBytes()
		add(CodeKeptBytes, int(max), int(used), dropped, last)
	}
	if b.Reads != nil {
		st := b.Reads.Stats()
		var hits uint64
		for _, n := range st.Refused {
			hits += n
		}
		add(api.CodeReadBudget, st.Concurrent, st.Running, hits, st.LastHit)
	}
	if b.Consumers != nil {
		limit, inUse, hits, last := b.Consumers()
		add(CodeConsumers, limit, inUse, hits, last)
	}
	if b.Memory != nil {
		if st := b.Memory.Stats(); st.Limit > 0 {
			add(CodeMemoryLimit, int(st.Limit), int(st.InUse), st.Hits, st.LastHit)
		}
	}
	return out
}

// WatchDescriptors exports the engine's plan of its open descriptors: the
// limit, and the shares of HTTP connections, NATS clients and files.
func (m *Metrics) WatchDescriptors(limit, http, nats, files int) {
	for share, n := range map[string]int{"limit": limit, "http": http, "nats": nats, "files": files} {
		m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "parley_descriptors",
			Help:        "The engine's plan of its open descriptors: the limit, and the shares of HTTP connections, NATS clients and files.",
			ConstLabels: prometheus.Labels{"share": share}}, func() float64 { return float64(n) }))
	}
}

// WatchBounds exports the bounds' counts.
func (m *Metrics) WatchBounds(b BoundSources) {
	gauge := func(name, help string, f func() float64) {
		m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	counter := func(name, help string, labels prometheus.Labels, f func() float64) {
		m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, f))
	}
	budget := b.Budget
	gauge("parley_http_connections", "HTTP connections open.", func() float64 { return float64(budget.Stats().Open) })
	gauge("parley_http_connections_limit", "The HTTP connection budget.", func() float64 { return float64(budget.Stats().Max) })
	counter("parley_http_connections_evicted_total", "HTTP connections closed, while waiting for a request, to make room for a new one.", nil,
		func() float64 { return float64(budget.Stats().Evicted) })
	counter("parley_http_connections_shed_total", "HTTP connections answered 503 limit.http_connections: every connection was busy.", nil,
		func() float64 { return float64(budget.Stats().Shed) })
	ex := b.Explorer
	gauge("parley_live_feeds", "Live feeds open.", func() float64 { return float64(ex.FeedStats().Open) })
	for _, reason := range []string{web.FeedsFull, web.FeedsAnonymous, web.FeedsNetwork} {
		counter("parley_live_feeds_refused_total", "Live feeds refused with 503 limit.live_feeds, by reason: total (every place taken), anonymous (the room of readers not signed in), network (the client network's share).",
			prometheus.Labels{"reason": reason}, func() float64 { return float64(ex.FeedStats().Refused[reason]) })
	}
	if r := b.Runner; r != nil {
		gauge("parley_in_flight_bytes", "Bytes of messages read from the stream and not yet applied.", func() float64 { return float64(r.InFlight().Used) })
		gauge("parley_in_flight_bytes_limit", "The bound on the bytes read from the stream and not yet applied.", func() float64 { return float64(r.InFlight().Max) })
		counter("parley_in_flight_waits_total", "Messages the consumer held back because the in-flight byte bound was reached (limit.in_flight_bytes): they waited in the stream.", nil,
			func() float64 { return float64(r.InFlight().Waits) })
		kept := func(i int) func() float64 {
			return func() float64 {
				u, m, d, _ := r.KeptBytes()
				return [3]float64{float64(u), float64(m), float64(d)}[i]
			}
		}
		gauge("parley_kept_bytes", "Bytes of the summaries kept of rejected, late and foreign messages.", kept(0))
		gauge("parley_kept_bytes_limit", "The bound on the bytes of kept summaries (limit.kept_bytes).", kept(1))
		counter("parley_kept_dropped_total", "Summaries of rejected, late and foreign messages dropped for the byte bound (limit.kept_bytes); their counts and digests remain.", nil, kept(2))
		gauge("parley_breach_bytes", "Bytes of the limit breaches waiting for a supervisor FAILURE (at most 32 and 8 KiB a deliberation).", func() float64 {
			h, _ := r.Breaches()
			return float64(h)
		})
		counter("parley_breaches_dropped_total", "Limit breaches not kept for a supervisor FAILURE: their deliberation already had 32 (or 8 KiB) unanswered. Each is still rejected and counted by code; no FAILURE answers it.", nil, func() float64 {
			_, d := r.Breaches()
			return float64(d)
		})
	}
	rs := b.Reads
	for _, read := range readmodel.BudgetedReads {
		counter("parley_reads_refused_total", "Expensive reads of clients not signed in refused with 429 limit.read_budget, by read: closure, recording, bindings, list (a search or status filter).",
			prometheus.Labels{"read": read}, func() float64 { return float64(rs.Stats().Refused[read]) })
	}
	counter("parley_read_budget_spent_seconds_total", "Compute time spent by expensive reads of clients not signed in.", nil,
		func() float64 { return rs.Stats().Spent.Seconds() })
	if mem := b.Memory; mem != nil {
		gauge("parley_memory_limit_bytes", "The Go runtime's soft memory limit (--memory-limit, GOMEMLIMIT; 0: none).", func() float64 { return float64(mem.Stats().Limit) })
		counter("parley_memory_limit_hits_total", "Looks (every second) that found the memory at or above the soft memory limit, or the runtime's GC CPU limiter engaged since the look before (it let the memory exceed the limit rather than collect with more than half the CPU): limit.memory.", nil,
			func() float64 { return float64(mem.Stats().Hits) })
	}
	counter("parley_closure_cache_hits_total", "Closure verifications answered from the cache of final answers.", nil,
		func() float64 { return float64(rs.Stats().ClosureHits) })
	counter("parley_closure_cache_misses_total", "Closure verifications computed (the API's; the supervisor's are its own).", nil,
		func() float64 { return float64(rs.Stats().ClosureMisses) })
	gauge("parley_closure_cache_bytes", "Size of the cache of final closure answers.", func() float64 { return float64(rs.Stats().ClosureBytes) })
}

// WatchReclaim exports what the reclaimer gave back.
func (m *Metrics) WatchReclaim(rc *reclaim.Reclaimer) {
	m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "parley_memory_reclaims_total",
		Help: "Times the quiet engine collected and gave free memory back to the system (internal/reclaim)."}, func() float64 { return float64(rc.Reclaims.Load()) }))
	m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "parley_memory_reclaimed_bytes_total",
		Help: "Bytes those reclaims gave back."}, func() float64 { return float64(rc.Returned.Load()) }))
}
