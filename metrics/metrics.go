// Package metrics holds the engine's Prometheus metrics, in a registry of
// their own: what the projection applied, the binding moments and their
// resolutions, the stream watch's problems, advisories and writes (package
// health reports them here), what the engine refused to act on, and the
// bounds on what clients may hold (bounds.go), which /healthz reports too.
// The metric names are the engine's interface with its operators
// (docs/OPERATIONS.md): they do not change.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/microapi"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/substrate"
)

// Metrics are the engine's Prometheus metrics, in their own registry.
type Metrics struct {
	Registry   *prometheus.Registry
	messages   prometheus.Counter
	accepted   prometheus.Counter
	rejections *prometheus.CounterVec
	position   prometheus.Gauge
	lag        prometheus.Gauge

	bindingMoments, bindingSuppressed, bindingResolutions *prometheus.CounterVec

	// The stream watch (package health).
	problems, advisories, writes *prometheus.CounterVec
	healthy, halted              prometheus.Gauge
	storageUsed, storageLimit    prometheus.Gauge

	// What the engine refused to act on (microapi, the stream watch's removal of consumers).
	ignored          *prometheus.CounterVec
	consumersRemoved prometheus.Counter
	consumersLimited prometheus.Counter
}

// New registers the metrics.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		messages: prometheus.NewCounter(prometheus.CounterOpts{Name: "parley_ingested_messages_total",
			Help: "Stream messages applied to the projection."}),
		accepted: prometheus.NewCounter(prometheus.CounterOpts{Name: "parley_accepted_artifacts_total",
			Help: "Artifacts admitted to a deliberation's DAG."}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "parley_rejections_total",
			Help: "Messages recorded as rejections, by code."}, []string{"code"}),
		position: prometheus.NewGauge(prometheus.GaugeOpts{Name: "parley_projector_position",
			Help: "Stream sequence of the last message applied."}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "parley_projector_lag_messages",
			Help: "Messages in the stream not yet applied, as the consumer last saw it."}),
		bindingMoments: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "parley_binding_moments_total",
			Help: "Binding moments (provisional DECISIONs asking the principal with an envelope not asked before) admitted, by decider (its token when the charter lists it, else other)."}, []string{"decider"}),
		bindingSuppressed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "parley_binding_hatch_suppressed_total",
			Help: "Binding moments whose envelope disables an escape hatch (seed 002 §12.3), by decider (its token when the charter lists it, else other)."}, []string{"decider"}),
		bindingResolutions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "parley_binding_resolutions_total",
			Help: "Resolutions of binding moments by their principal, admitted, by decider (its token when the charter lists it, else other) and resolution (option, answer, question, declined); the question-space veto rate (seed 002 §12.2) is resolution=\"question\" over all."}, []string{"decider", "resolution"}),
		problems: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "parley_health_problems_total",
			Help: "Problems the engine noticed, by code, each counted once until it clears (stream.unsafe, stream.deleted, stream.replaced and stream.messages_lost halt the engine)."}, []string{"code"}),
		advisories: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "parley_stream_advisories_total",
			Help: "JetStream advisories about the engine's stream, by kind (UPDATED, DELETED, LEADER_ELECTED, QUORUM_LOST, …; API.PURGE and the like for administrative requests on it)."}, []string{"kind"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "parley_engine_writes_total",
			Help: "The engine's own publishes (supervisor emissions, principals' resolutions), by result: stored, superseded (an expected lost race), refused, refused_storage, unavailable."}, []string{"result"}),
		healthy: prometheus.NewGauge(prometheus.GaugeOpts{Name: "parley_healthy",
			Help: "1 while the engine has no health problem, 0 otherwise (the reasons are in /healthz)."}),
		halted: prometheus.NewGauge(prometheus.GaugeOpts{Name: "parley_halted",
			Help: "1 once the engine stopped judging because its stream could drop or erase messages (until a restart)."}),
		storageUsed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "parley_storage_used_bytes",
			Help: "JetStream storage used under the tightest limit the engine sees (the embedded server's max_file_store, or the account's); 0 with no limit."}),
		storageLimit: prometheus.NewGauge(prometheus.GaugeOpts{Name: "parley_storage_limit_bytes",
			Help: "That storage limit; 0 when the engine sees none."}),
		ignored: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "parley_ignored_messages_total",
			Help: "Messages on the query API's subjects the engine did not act on, by reason: jetstream_delivery (stream messages the server delivered there, for a participant's consumer), reply_subject (a request whose reply subject is a parley or $ subject)."}, []string{"reason"}),
		consumersRemoved: prometheus.NewCounter(prometheus.CounterOpts{Name: "parley_consumers_removed_total",
			Help: "Push consumers of the stream the engine deleted because their deliver subject is not under _INBOX."}),
		consumersLimited: prometheus.NewCounter(prometheus.CounterOpts{Name: "parley_consumers_limited_total",
			Help: "Consumers of the stream the engine deleted past its bound on consumers (limit.consumers)."}),
	}
	for _, r := range []string{microapi.IgnoredDelivery, microapi.IgnoredReplySubject} {
		m.ignored.WithLabelValues(r)
	}
	for _, r := range []string{"stored", "superseded", "refused", "refused_storage", "unavailable"} {
		m.writes.WithLabelValues(r)
	}
	m.Registry.MustRegister(m.messages, m.accepted, m.rejections, m.position, m.lag, m.bindingMoments, m.bindingSuppressed, m.bindingResolutions,
		m.problems, m.advisories, m.writes, m.healthy, m.halted, m.storageUsed, m.storageLimit, m.ignored, m.consumersRemoved, m.consumersLimited,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// SetHealthy sets parley_healthy: 1 while the engine has no health
// problem.
func (m *Metrics) SetHealthy(ok bool) {
	if ok {
		m.healthy.Set(1)
	} else {
		m.healthy.Set(0)
	}
}

// Halted sets parley_halted: the engine stopped judging.
func (m *Metrics) Halted() { m.halted.Set(1) }

// Problem counts a health problem raised (by its code).
func (m *Metrics) Problem(code string) { m.problems.WithLabelValues(code).Inc() }

// Advisory counts a stream advisory (by its kind, a label value the watch
// bounds).
func (m *Metrics) Advisory(kind string) { m.advisories.WithLabelValues(kind).Inc() }

// Write counts one of the engine's own publishes by result (stored,
// superseded, refused, refused_storage, unavailable).
func (m *Metrics) Write(result string) { m.writes.WithLabelValues(result).Inc() }

// Storage sets the tightest storage limit the engine sees and its use (0,
// 0: none).
func (m *Metrics) Storage(used uint64, limit int64) {
	m.storageUsed.Set(float64(used))
	m.storageLimit.Set(float64(limit))
}

// Ignored counts a message on the query API's subjects the engine did not
// act on (microapi.Config.Ignored), by reason.
func (m *Metrics) Ignored(reason string) { m.ignored.WithLabelValues(reason).Inc() }

// ConsumerRemoved counts a push consumer the engine deleted.
func (m *Metrics) ConsumerRemoved() { m.consumersRemoved.Inc() }

// ConsumerLimited counts a consumer the engine deleted past the bound on
// the stream's consumers.
func (m *Metrics) ConsumerLimited() { m.consumersLimited.Inc() }

// BindingMoment counts a binding moment admitted, by decider (a label
// value: the caller bounds them), and whether its envelope suppresses an
// escape hatch.
func (m *Metrics) BindingMoment(decider string, suppressed bool) {
	m.bindingMoments.WithLabelValues(decider).Inc()
	if suppressed {
		m.bindingSuppressed.WithLabelValues(decider).Inc()
	}
}

// BindingResolution counts a principal's resolution admitted, by decider
// and resolution (label values: the caller bounds them).
func (m *Metrics) BindingResolution(decider, resolution string) {
	m.bindingResolutions.WithLabelValues(decider, resolution).Inc()
}

// Observe is the runner's hook (runner.Config.Observe): a message
// applied, at seq, with pending messages of the stream not yet.
func (m *Metrics) Observe(out projector.Outcome, seq, pending uint64) {
	m.messages.Inc()
	m.accepted.Add(float64(len(out.Accepted)))
	if out.Rejection != nil {
		m.rejections.WithLabelValues(out.Rejection.Code).Inc()
	}
	m.position.Set(float64(seq))
	m.lag.Set(float64(pending))
}

// statusCollector reports deliberations by status at scrape time.
type statusCollector struct {
	r    *runner.Runner
	desc *prometheus.Desc
}

func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[api.Status]int{}
	for _, s := range []api.Status{api.StatusOpen, api.StatusSuspended, api.StatusCompleted,
		api.StatusCancelled, api.StatusDeadlock, api.StatusExhausted} {
		counts[s] = 0
	}
	c.r.EachDeliberation(func(d *projector.Deliberation) { counts[d.Status]++ })
	for s, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), string(s))
	}
}

// WatchReverifier exports the re-verifier's counts.
func (m *Metrics) WatchReverifier(rv *substrate.Reverifier) {
	for _, result := range []string{provenance.ResultVerified, provenance.ResultFailed, provenance.ResultUnavailable} {
		m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "parley_provenance_reverifications_total",
			Help: "Provenance annotations re-verified against the engine's roots, by result (cache hits included).", ConstLabels: prometheus.Labels{"result": result}},
			func() float64 {
				st := rv.Stats()
				switch result {
				case provenance.ResultVerified:
					return float64(st.Verified)
				case provenance.ResultFailed:
					return float64(st.Failed)
				}
				return float64(st.Unavailable)
			}))
	}
	m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "parley_provenance_reverification_cache_hits_total",
		Help: "Re-verifications answered from the cache."}, func() float64 { return float64(rv.Stats().CacheHits) }))
}

// WatchRunner exports the deliberations by status, read from r at
// scrape time.
func (m *Metrics) WatchRunner(r *runner.Runner) {
	m.Registry.MustRegister(&statusCollector{r: r, desc: prometheus.NewDesc("parley_deliberations",
		"Deliberations by status.", []string{"status"}, nil)})
}
