// Package health watches the engine's stream and its own writes, and
// makes the health report (GET /healthz, parley.api.health): the watch of
// the stream's advisories and its periodic check, the halt when the
// stream could drop or erase messages, the refused writes and the storage
// at its limit, and the removal of push consumers that deliver the stream
// outside the inboxes (consumers.go). It reports to the metrics through
// Metrics, and answers the query API's halt through Halted.
package health

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/metrics"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/wire"
)

// The engine watches its stream: the JetStream advisories of the PARLEY
// stream (and the API audit of its administration), and a check every
// StreamCheckEvery of the stream's configuration and state. A change that
// could drop or erase a message (a limit set, the stream deleted or
// replaced, messages missing from its state) halts the engine: its
// supervisor emits nothing more, the query API answers 503 engine.halted
// with the reason, /healthz turns 503 with it, and the metric
// parley_health_problems_total counts it. A halt is not lifted while the
// engine runs: messages may already be gone, and the projection was built
// from a record that is no longer whole; the next start refuses an unsafe
// stream (ledger.Ensure) or rebuilds from a safe one.
//
// Refused writes (the engine's own publishes the server refused: the
// supervisor's FAILUREs and TERMINATIONs, principals' resolutions) and
// storage at its limit make /healthz unhealthy too, without halting: they
// clear when the engine's next write is stored and the storage check
// finds room.

// Problem codes of the health report (docs/OPERATIONS.md).
const (
	// Halting: the record may have lost messages.
	ProblemStreamUnsafe   = "stream.unsafe"        // a configuration that could drop or erase messages
	ProblemStreamDeleted  = "stream.deleted"       // the stream is gone
	ProblemStreamReplaced = "stream.replaced"      // another stream of the name, or one behind the projection
	ProblemMessagesLost   = "stream.messages_lost" // the stream's state is missing messages
	// Not halting: they clear when the condition does.
	ProblemStreamUnavailable = "stream.unavailable" // the stream's info cannot be read (no leader, JetStream off)
	ProblemWriteRefused      = "write.refused"      // the server refused the engine's last write
	ProblemStorageExhausted  = "storage.exhausted"  // JetStream storage at its limit
	ProblemProjectionStalled = "projection.stalled" // behind the stream and not moving for StallAfter
)

// StallAfter is how long the projection may stand still behind the stream
// before the health report says so (a reader or a re-verification holds a
// deliberation for seconds at most; a consumer that stopped delivering
// holds it for ever).
const StallAfter = 30 * time.Second

// haltingProblems are the problems that stop the engine's judging.
var haltingProblems = []string{ProblemStreamUnsafe, ProblemStreamDeleted, ProblemStreamReplaced, ProblemMessagesLost}

// DefaultStreamCheckEvery is the interval of the stream check.
const DefaultStreamCheckEvery = 2 * time.Second

// HealthProblem is one reason the engine is not healthy.
type HealthProblem struct {
	Code    string    `json:"code"`
	Message string    `json:"message"`
	Since   time.Time `json:"since"`
	// NoticedBy is what noticed it: the check, an advisory's subject, a
	// write.
	NoticedBy string `json:"noticed_by"`
	Halts     bool   `json:"halts,omitempty"`
}

// Health is the health report (GET /healthz, parley.api.health).
type Health struct {
	OK         bool   `json:"ok"`
	Position   uint64 `json:"position"`
	StreamLast uint64 `json:"stream_last"`
	Lag        uint64 `json:"lag"`
	// Error is every problem's message, joined by "; ".
	Error string `json:"error,omitempty"`
	// Halted: the engine stopped judging (a halting problem): its
	// supervisor emits nothing and the query API answers 503.
	Halted   bool            `json:"halted"`
	Problems []HealthProblem `json:"problems,omitempty"`
	// Checked is when the stream check last ran, and Advisories whether
	// the engine receives the stream's advisories (false: the check alone
	// watches the stream, every CheckEvery).
	Checked    time.Time  `json:"checked,omitzero"`
	CheckEvery string     `json:"check_every,omitempty"`
	Advisories bool       `json:"advisories"`
	Writes     WriteStats `json:"writes"`
	// Storage is the tightest JetStream storage limit the engine can see.
	Storage *StorageReport `json:"storage,omitempty"`
	// Bounds are the engine's bounds on what clients may hold, and
	// BoundsHit the names of those hit within metrics.BoundRecent:
	// they do not make the engine unhealthy.
	Bounds    []metrics.Bound `json:"bounds,omitempty"`
	BoundsHit []string        `json:"bounds_hit,omitempty"`
}

// WriteStats counts the engine's own publishes by result.
type WriteStats struct {
	Stored      uint64 `json:"stored"`
	Superseded  uint64 `json:"superseded"` // an expected lost race: the deliberation moved on
	Refused     uint64 `json:"refused"`    // refused by the server, storage included
	Storage     uint64 `json:"storage"`    // of which for storage or resource limits
	Unavailable uint64 `json:"unavailable"`
	LastRefused string `json:"last_refused,omitempty"`
}

// StorageReport is a JetStream storage limit and its use.
type StorageReport struct {
	Scope string `json:"scope"` // "server" (the embedded server's max_file_store) or "account"
	Used  uint64 `json:"used_bytes"`
	Limit int64  `json:"limit_bytes"`
}

// Metrics is what the watch counts and sets (metrics.Metrics is one).
type Metrics interface {
	SetHealthy(ok bool)
	Halted()
	Problem(code string)
	Advisory(kind string)
	Write(result string)
	Storage(used uint64, limit int64)
	ConsumerRemoved()
	// ConsumerLimited counts a consumer deleted past the bound on the
	// stream's consumers.
	ConsumerLimited()
}

// Report reports the watch's problems, whether the stream answers, and
// the projector's lag.
func (w *Watch) Report(ctx context.Context) Health {
	h := Health{Position: w.r.Position(), Advisories: false}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := w.stream.Info(ctx)
	var errs []string
	if err != nil {
		errs = append(errs, "stream info: "+err.Error())
	} else {
		// Over several streams a position carries its stream's index
		// above the sequence (ledger.Position): the lag is the stream's.
		h.StreamLast = info.State.LastSeq
		if seq := ledger.Sequence(h.Position); h.StreamLast > seq && w.holds() {
			h.Lag = h.StreamLast - seq
		}
	}
	w.fill(&h)
	for _, p := range h.Problems {
		errs = append(errs, p.Message)
	}
	if bounds := w.bounds.Load(); bounds != nil {
		h.Bounds = (*bounds)(time.Now())
		for _, b := range h.Bounds {
			if b.Recent {
				h.BoundsHit = append(h.BoundsHit, b.Name)
			}
		}
	}
	h.OK = len(errs) == 0
	h.Error = strings.Join(errs, "; ")
	return h
}

// Projection is what a watch reads of the projection folded from its
// stream (*runner.Runner is one). One that also has a method Held() bool
// is watched for its position only while it holds the stream: an engine
// that does not hold it is neither behind it nor stalled.
type Projection interface {
	Position() uint64
	Layout() ledger.Layout
	OwnsConsumer(name string) bool
}

// holds reports whether the watch's projection holds the stream now.
func (w *Watch) holds() bool {
	h, ok := w.r.(interface{ Held() bool })
	return !ok || h.Held()
}

var _ Projection = (*runner.Runner)(nil)

// Watch watches the engine's stream and its writes.
type Watch struct {
	js      jetstream.JetStream
	stream  jetstream.Stream
	r       Projection
	name    string         // the stream's
	srv     *server.Server // the embedded server, for its storage limit
	m       Metrics
	log     *slog.Logger
	every   time.Duration
	created time.Time
	halt    func(reason string) // stops judging; called once
	kick    chan string         // an advisory asks for a check now
	// consumers are consumers whose creation an advisory announced, to
	// inspect (consumers.go).
	consumers chan seenConsumer
	// audited: the API audit has named a created consumer (so the bare
	// creation advisories are left alone).
	audited atomic.Bool
	// sweepDue: the queue of consumers overflowed; the next check sweeps.
	sweepDue atomic.Bool

	// The consumer bound (consumers.go).
	cmu          sync.Mutex
	maxConsumers int
	known        map[string]time.Time // the stream's consumers not the engine's, by name: when created
	limited      uint64
	lastLimited  time.Time

	mu         sync.Mutex
	problems   map[string]*HealthProblem
	halted     bool
	checked    time.Time
	advisories bool
	denied     bool          // the subscription to the advisories was refused
	notFound   int           // consecutive checks that found no stream
	lastPos    uint64        // the projection's position at the last check that saw it move
	lastMove   time.Time     // when
	stallAfter time.Duration // StallAfter (tests shorten it)
	writes     WriteStats
	storage    *StorageReport
	bounds     atomic.Pointer[func(now time.Time) []metrics.Bound]
}

// Config is what a watch watches, and whom it tells.
type Config struct {
	JS     jetstream.JetStream
	Stream jetstream.Stream
	// Runner is the projection folded from the stream: a
	// *runner.Runner, or a view of one stream of an engine that holds it
	// only at times (its Held says when; engine serve --own-streams).
	Runner Projection
	// Server is the embedded server, for its storage limit (nil: an
	// external one).
	Server  *server.Server
	Metrics Metrics
	Log     *slog.Logger
	// CheckEvery is the interval of the check (0: DefaultStreamCheckEvery).
	CheckEvery time.Duration
	// Halt stops the engine's judging; it is called once, at the first
	// halting problem.
	Halt func(reason string)
	// MaxConsumers bounds the stream's consumers that are not the
	// engine's own (0: DefaultMaxConsumers): past it each new one is
	// deleted (CodeConsumers).
	MaxConsumers int
}

// New returns a watch of cfg.Stream; it watches once Subscribe and Run
// are called.
func New(cfg Config) *Watch {
	every := cfg.CheckEvery
	if every <= 0 {
		every = DefaultStreamCheckEvery
	}
	w := &Watch{js: cfg.JS, stream: cfg.Stream, r: cfg.Runner, srv: cfg.Server, m: cfg.Metrics, log: cfg.Log, every: every, halt: cfg.Halt,
		kick: make(chan string, 1), consumers: make(chan seenConsumer, 4096), problems: map[string]*HealthProblem{},
		maxConsumers: cmp.Or(max(cfg.MaxConsumers, 0), DefaultMaxConsumers), known: map[string]time.Time{}}
	w.name = wire.StreamName
	if ci := cfg.Stream.CachedInfo(); ci != nil {
		w.created, w.name = ci.Created, ci.Config.Name
	}
	w.m.SetHealthy(true)
	return w
}

// SetBounds gives the report the engine's bounds on what clients may
// hold (metrics.BoundSources.Report): /healthz lists them.
func (w *Watch) SetBounds(bounds func(now time.Time) []metrics.Bound) { w.bounds.Store(&bounds) }

// advisorySubjects are what the watch subscribes to: the stream's own
// advisories (created, updated, deleted, leader elected, quorum lost,
// snapshots, restores, abandoned batches) and the API audit, which names
// every JetStream API request, purges and message deletes included
// (which have no stream advisory of their own).
func (w *Watch) advisorySubjects() []string {
	return []string{"$JS.EVENT.ADVISORY.STREAM.*." + w.name, "$JS.EVENT.ADVISORY.API", w.consumerAdvisory() + "*", w.consumerDeletedAdvisory() + "*"}
}

// Subscribe subscribes to the advisories. A refused subscription (the
// user may not subscribe to $JS.EVENT.ADVISORY.>) is reported
// asynchronously, to PermissionDenied.
func (w *Watch) Subscribe(nc *nats.Conn) ([]*nats.Subscription, error) {
	var subs []*nats.Subscription
	for _, subj := range w.advisorySubjects() {
		sub, err := nc.Subscribe(subj, w.onAdvisory)
		if err != nil {
			for _, s := range subs {
				s.Unsubscribe()
			}
			return nil, fmt.Errorf("service: subscribe to %s: %w", subj, err)
		}
		subs = append(subs, sub)
	}
	// A round trip: a permission violation comes back before the flush's
	// pong.
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		return subs, fmt.Errorf("service: subscribe to the stream's advisories: %w", err)
	}
	w.mu.Lock()
	if !w.denied {
		w.advisories = true
	}
	w.mu.Unlock()
	return subs, nil
}

// PermissionDenied is told of an asynchronous permission error on the
// engine's connection; one on the advisories' subjects means the watch
// has only its check.
func (w *Watch) PermissionDenied(err error) {
	if err == nil || !strings.Contains(err.Error(), "$JS.EVENT.ADVISORY") {
		return
	}
	w.mu.Lock()
	w.advisories, w.denied = false, true
	w.mu.Unlock()
	w.log.Warn("the engine may not subscribe to the stream's advisories: it watches the stream by its check alone", "every", w.every, "err", err)
}

// advisoryKinds are the stream advisories the server publishes: the
// metric's label is one of them (or of the API.* audit kinds), or "other",
// so that whoever may publish on $JS.EVENT.ADVISORY.STREAM.*.PARLEY (a
// user of an external server's configuration) cannot add label values.
var advisoryKinds = []string{"CREATED", "UPDATED", "DELETED", "SNAPSHOT_CREATE", "SNAPSHOT_COMPLETE", "RESTORE_CREATE",
	"RESTORE_COMPLETE", "LEADER_ELECTED", "QUORUM_LOST", "BATCH_ABANDONED"}

func advisoryLabel(kind string) string {
	if slices.Contains(advisoryKinds, kind) {
		return kind
	}
	for _, v := range adminVerbs {
		if kind == "API."+v {
			return kind
		}
	}
	return "other"
}

// adminVerbs are the API requests on the stream the audit advisory is
// watched for.
var adminVerbs = []string{"UPDATE", "DELETE", "PURGE", "MSG.DELETE"}

func (w *Watch) onAdvisory(msg *nats.Msg) {
	if strings.HasPrefix(msg.Subject, w.consumerAdvisory()) {
		w.onConsumerCreated(msg.Subject)
		return
	}
	if strings.HasPrefix(msg.Subject, w.consumerDeletedAdvisory()) {
		w.onConsumerDeleted(msg.Subject)
		return
	}
	kind, by := "", msg.Subject
	if rest, ok := strings.CutPrefix(msg.Subject, "$JS.EVENT.ADVISORY.STREAM."); ok {
		kind, _, _ = strings.Cut(rest, ".")
	} else {
		// The audit of every API request of the account: the creations
		// of the stream's consumers (consumers.go), and the requests on
		// this stream's administration, which a cheap test finds before
		// any decoding.
		if create := w.consumerCreate(); bytes.Contains(msg.Data, []byte(create[:len(create)-1])) {
			w.onConsumerAudit(msg.Data)
			return
		}
		if !bytes.Contains(msg.Data, []byte("$JS.API.STREAM.")) || !bytes.Contains(msg.Data, []byte(w.name)) {
			return
		}
		var a struct {
			Subject string `json:"subject"`
		}
		if json.Unmarshal(msg.Data, &a) != nil {
			return
		}
		for _, v := range adminVerbs {
			if a.Subject == "$JS.API.STREAM."+v+"."+w.name {
				kind, by = "API."+v, msg.Subject+" ("+a.Subject+")"
			}
		}
		if kind == "" {
			return
		}
	}
	w.m.Advisory(advisoryLabel(kind))
	switch kind {
	case "DELETED":
		w.raise(ProblemStreamDeleted, "the stream "+w.name+" was deleted", by)
		return
	case "QUORUM_LOST":
		w.log.Warn("stream advisory: the stream lost its quorum", "subject", msg.Subject)
	case "LEADER_ELECTED":
		w.log.Info("stream advisory: a stream leader was elected", "subject", msg.Subject)
	default:
		w.log.Info("stream advisory", "subject", msg.Subject, "kind", kind)
	}
	select {
	case w.kick <- by:
	default:
	}
}

// Run checks every CheckEvery, and at once when an advisory asks, until
// ctx ends.
func (w *Watch) Run(ctx context.Context) {
	// The consumers' housekeeping on a goroutine of its own: a sweep of
	// thousands of consumers, or a server that does not answer, never
	// holds up the stream's check.
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.runConsumers(ctx)
	}()
	defer func() { <-done }()
	t := time.NewTicker(w.every)
	defer t.Stop()
	w.check(ctx, "check")
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.check(ctx, "check")
		case subj := <-w.kick:
			w.check(ctx, subj)
		}
	}
}

// runConsumers inspects each consumer an advisory announces, and sweeps
// every consumer of the stream at start, every sweepEvery check
// intervals, and at the next interval after the queue of announced ones
// overflowed, until ctx ends.
func (w *Watch) runConsumers(ctx context.Context) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	w.sweepConsumers(ctx)
	for n := 1; ; {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n++; n%sweepEvery == 0 || w.sweepDue.Swap(false) {
				w.sweepConsumers(ctx)
			}
		case c := <-w.consumers:
			w.inspectConsumer(ctx, c)
		}
	}
}

// check reads the stream's info and the storage use, and raises or clears
// problems.
func (w *Watch) check(ctx context.Context, by string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Before the info: the stream is at least there. The stream's
	// sequence, compared with the stream's state (a position over several
	// streams carries its stream's index, ledger.Position).
	position := ledger.Sequence(w.r.Position())
	info, err := w.stream.Info(ctx)
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return // shutting down
	}
	w.mu.Lock()
	w.checked = time.Now()
	w.mu.Unlock()
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		// Twice in a row: a cluster electing its leaders answers oddly for
		// a moment; the deletion's advisory halts at once.
		w.mu.Lock()
		w.notFound++
		n := w.notFound
		w.mu.Unlock()
		if n >= 2 {
			w.raise(ProblemStreamDeleted, "the stream "+w.name+" no longer exists", by)
		} else {
			w.raise(ProblemStreamUnavailable, "stream info: "+err.Error(), by)
		}
		return
	case err != nil:
		w.raise(ProblemStreamUnavailable, "stream info: "+err.Error(), by)
		return
	}
	w.mu.Lock()
	w.notFound = 0
	w.mu.Unlock()
	w.clear(ProblemStreamUnavailable)
	l := w.r.Layout()
	k, _ := l.IndexOf(w.name)
	if err := l.CheckAt(k, info.Config); err != nil {
		w.raise(ProblemStreamUnsafe, strings.TrimPrefix(err.Error(), "ledger: "), by)
	}
	if !w.created.IsZero() && !info.Created.Equal(w.created) {
		w.raise(ProblemStreamReplaced, fmt.Sprintf("the stream %s was created at %s, not at %s as when the engine started: another stream of the name", w.name, info.Created.Format(time.RFC3339Nano), w.created.Format(time.RFC3339Nano)), by)
	}
	st := info.State
	if !w.holds() {
		// Another engine folds the stream: no position to compare.
		w.mu.Lock()
		w.lastPos, w.lastMove = 0, time.Time{}
		w.mu.Unlock()
		w.clear(ProblemProjectionStalled)
		position = st.LastSeq
	}
	if st.LastSeq < position {
		w.raise(ProblemStreamReplaced, fmt.Sprintf("the stream ends at %d, behind the projection at %d", st.LastSeq, position), by)
	}
	// Behind the stream, and the same position since StallAfter: raised;
	// cleared once it moves or catches up.
	w.mu.Lock()
	now := time.Now()
	if w.lastMove.IsZero() || position != w.lastPos || st.LastSeq <= position {
		w.lastPos, w.lastMove = position, now
	}
	still := now.Sub(w.lastMove)
	w.mu.Unlock()
	stall := w.stallAfter
	if stall <= 0 {
		stall = StallAfter
	}
	if st.LastSeq > position && still >= stall {
		w.raise(ProblemProjectionStalled, fmt.Sprintf("the projection has stood at position %d for %s while the stream is at %d", position, still.Round(time.Second), st.LastSeq), by)
	} else {
		w.clear(ProblemProjectionStalled)
	}
	first := max(info.Config.FirstSeq, 1)
	switch {
	case st.Lost != nil && len(st.Lost.Msgs) > 0:
		w.raise(ProblemMessagesLost, fmt.Sprintf("the server lost %d messages of the stream (%d bytes)", len(st.Lost.Msgs), st.Lost.Bytes), by)
	case st.LastSeq > 0 && st.FirstSeq != first:
		w.raise(ProblemMessagesLost, fmt.Sprintf("the stream's first message is %d, not %d: messages were removed from its head", st.FirstSeq, first), by)
	case st.LastSeq > 0 && st.Msgs != st.LastSeq-first+1:
		w.raise(ProblemMessagesLost, fmt.Sprintf("the stream holds %d messages of sequences %d to %d (%d deleted)", st.Msgs, first, st.LastSeq, st.NumDeleted), by)
	}
	w.checkStorage(ctx, by)
}

// checkStorage reads the tightest storage limit the engine can see: the
// embedded server's max_file_store, or the account's limit.
func (w *Watch) checkStorage(ctx context.Context, by string) {
	var reports []StorageReport
	if w.srv != nil {
		if jsz, err := w.srv.Jsz(nil); err == nil && jsz.Config.MaxStore > 0 {
			reports = append(reports, StorageReport{Scope: "server", Used: jsz.Store, Limit: jsz.Config.MaxStore})
		}
	}
	if ai, err := w.js.AccountInfo(ctx); err == nil {
		tiers := []jetstream.Tier{ai.Tier}
		for _, t := range ai.Tiers {
			tiers = append(tiers, t)
		}
		for _, t := range tiers {
			if t.Limits.MaxStore > 0 {
				reports = append(reports, StorageReport{Scope: "account", Used: t.Store, Limit: t.Limits.MaxStore})
			}
		}
	}
	if len(reports) == 0 {
		w.mu.Lock()
		w.storage = nil
		w.mu.Unlock()
		w.m.Storage(0, 0)
		w.clear(ProblemStorageExhausted)
		return
	}
	// The one with the least room.
	tight := slices.MinFunc(reports, func(a, b StorageReport) int { return cmp.Compare(free(a), free(b)) })
	w.mu.Lock()
	w.storage = &tight
	w.mu.Unlock()
	w.m.Storage(tight.Used, tight.Limit)
	if full(tight) {
		w.raise(ProblemStorageExhausted, fmt.Sprintf("JetStream %s storage is at its limit: %d of %d bytes used", tight.Scope, tight.Used, tight.Limit), by)
	} else {
		w.clear(ProblemStorageExhausted)
	}
}

func free(r StorageReport) int64 { return r.Limit - int64(r.Used) }

// full: less room than a large message (1 MiB), or than 5% of a small
// limit.
func full(r StorageReport) bool { return free(r) <= min(1<<20, r.Limit/20) }

// Wrote records the result of one of the engine's publishes (JetStream
// records those made through it).
func (w *Watch) Wrote(err error) {
	if w == nil {
		return
	}
	var apiErr *jetstream.APIError
	result := "stored"
	switch {
	case err == nil:
	case ledger.IsLostRace(err):
		// an expected lost race, not a fault: the deliberation moved on
		// after the position judged, or a duplicate is being stored
		result = "superseded"
	case ledger.IsResourcesExceeded(err):
		result = "refused_storage"
	case errors.As(err, &apiErr):
		result = "refused"
	default:
		result = "unavailable"
	}
	w.m.Write(result)
	w.mu.Lock()
	switch result {
	case "stored":
		w.writes.Stored++
	case "superseded":
		w.writes.Superseded++
	case "refused", "refused_storage":
		w.writes.Refused++
		if result == "refused_storage" {
			w.writes.Storage++
		}
		w.writes.LastRefused = err.Error()
	default:
		w.writes.Unavailable++
	}
	w.mu.Unlock()
	switch result {
	case "stored", "superseded":
		// The server stored or judged the write: it is taking writes.
		w.clear(ProblemWriteRefused)
	case "refused", "refused_storage":
		w.raise(ProblemWriteRefused, "the server refused the engine's write: "+err.Error(), "write")
	}
}

// raise records a problem (counted once until it clears); a halting one
// stops the engine's judging.
func (w *Watch) raise(code, message, by string) {
	halts := slices.Contains(haltingProblems, code)
	w.mu.Lock()
	p, seen := w.problems[code]
	if seen {
		p.Message = message
		w.mu.Unlock()
		return
	}
	w.problems[code] = &HealthProblem{Code: code, Message: message, Since: time.Now().UTC(), NoticedBy: by, Halts: halts}
	halt := halts && !w.halted
	if halt {
		w.halted = true
	}
	w.m.SetHealthy(false) // under the lock: in the order of the changes
	w.mu.Unlock()
	w.m.Problem(code)
	if halts {
		w.log.Error("the engine's stream could drop or erase messages", "problem", code, "reason", message, "noticed_by", by)
	} else {
		w.log.Warn("engine unhealthy", "problem", code, "reason", message, "noticed_by", by)
	}
	if halt {
		w.m.Halted()
		w.halt(code + ": " + message)
	}
}

// clear ends a problem that is not halting.
func (w *Watch) clear(code string) {
	w.mu.Lock()
	p, ok := w.problems[code]
	if !ok || p.Halts {
		w.mu.Unlock()
		return
	}
	delete(w.problems, code)
	if len(w.problems) == 0 {
		w.m.SetHealthy(true)
	}
	w.mu.Unlock()
	w.log.Info("engine problem cleared", "problem", code)
}

// Halted is the API's answer once the engine halted, or nil.
func (w *Watch) Halted() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.halted {
		return nil
	}
	var reasons []string
	for _, code := range haltingProblems {
		if p, ok := w.problems[code]; ok {
			reasons = append(reasons, p.Message)
		}
	}
	return &api.Error{Kind: api.KindUnavailable, Code: api.CodeHalted,
		Message: "the engine stopped judging and serving its projection: " + strings.Join(reasons, "; ") +
			" (the record may have lost messages; see /healthz, and restart the engine once the stream is safe)"}
}

// fill adds the watch's state to a health report.
func (w *Watch) fill(h *Health) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h.Halted = w.halted
	h.Checked = w.checked.UTC()
	h.CheckEvery = w.every.String()
	h.Advisories = w.advisories
	h.Writes = w.writes
	if w.storage != nil {
		s := *w.storage
		h.Storage = &s
	}
	for _, p := range w.problems {
		h.Problems = append(h.Problems, *p)
	}
	slices.SortFunc(h.Problems, func(a, b HealthProblem) int { return strings.Compare(a.Code, b.Code) })
}

// JetStream is js for the engine's own writes: each publish's result goes
// to the watch (Wrote).
func (w *Watch) JetStream(js jetstream.JetStream) jetstream.JetStream {
	return watchedJS{JetStream: js, w: w}
}

type watchedJS struct {
	jetstream.JetStream
	w *Watch
}

func (j watchedJS) Publish(ctx context.Context, subject string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := j.JetStream.Publish(ctx, subject, data, opts...)
	j.w.Wrote(err)
	return ack, err
}

func (j watchedJS) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := j.JetStream.PublishMsg(ctx, msg, opts...)
	j.w.Wrote(err)
	return ack, err
}
