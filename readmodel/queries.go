// Package readmodel is the engine's read model: the queries over the
// runner's projection and the stream that the HTTP API, the NATS micro
// service and the binding pages answer with (a deliberation's view, pages
// of listings, artifacts, closures, outcomes, provenance, binding
// moments), read-your-writes (min_position), and the budget of the
// expensive reads with its cache of closures (budget.go). It answers
// values of api's types, and refuses with *api.Error, whose Kind says
// what sort of refusal it is: it names no HTTP status, which the HTTP
// layer chooses.
package readmodel

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/substrate"
)

// Config of the read model.
type Config struct {
	Runner *runner.Runner
	Stream jetstream.Stream
	// Streams, over a partitioned layout of several streams, are every
	// stream in order of its index (Stream is then unused): the bodies
	// of the artifacts are read from the stream of their position.
	Streams []jetstream.Stream
	// Reverifier re-verifies provenance annotations (nil: none); the
	// provenance report names its roots and counts.
	Reverifier *substrate.Reverifier
	// Budget bounds the expensive reads of clients not signed in (the
	// zero value: DefaultReadBudget).
	Budget ReadBudget
	// MinPositionWait is how long a read with a min_position waits for
	// the projection to reach it (0: DefaultMinPositionWait).
	MinPositionWait time.Duration
	// Receipts gives receipts (nil: none; archive.Receipts over the
	// engine's stream).
	Receipts ReceiptsFunc
	// MaxReceiptLog bounds the log a receipt read rebuilds (0:
	// api.MaxReceiptLog).
	MaxReceiptLog uint64
	// Remote, for an engine that owns some of the streams (runner
	// NewOwnedSet), reads a page of the deliberations of the stream of
	// index k from the engine that holds it (its DeliberationPageOf):
	// the list of every deliberation gathers the streams' pages.
	// more says the stream has more past the page.
	Remote func(ctx context.Context, k int, p api.PageRequest) (page []api.Summary, more bool, err error)
}

// Queries are the reads of the query API, shared by HTTP and NATS micro.
type Queries struct {
	receipts      ReceiptsFunc
	receiptSem    chan struct{}
	maxReceiptLog uint64
	r             *runner.Runner
	remote        func(ctx context.Context, k int, p api.PageRequest) ([]api.Summary, bool, error)
	streams       []jetstream.Stream
	rv            *substrate.Reverifier
	budget        *Budget       // the read budget and the closure cache (budget.go)
	waiting       atomic.Int64  // reads waiting for their min_position
	minWait       time.Duration // how long they wait (0: DefaultMinPositionWait)
}

// New returns the read model over cfg's runner and stream.
func New(cfg Config) *Queries {
	streams := cfg.Streams
	if len(streams) == 0 {
		streams = []jetstream.Stream{cfg.Stream}
	}
	return &Queries{r: cfg.Runner, remote: cfg.Remote, streams: streams, rv: cfg.Reverifier, minWait: cfg.MinPositionWait, budget: NewBudget(cfg.Budget),
		receipts: cfg.Receipts, receiptSem: make(chan struct{}, receiptSlots), maxReceiptLog: cmp.Or(cfg.MaxReceiptLog, api.MaxReceiptLog)}
}

// Budget is the read budget and the closure cache.
func (q *Queries) Budget() *Budget { return q.budget }

// Waiting is the number of reads waiting for their min_position.
func (q *Queries) Waiting() int64 { return q.waiting.Load() }

// Read-your-writes. A read may carry min_position, the stream position
// the caller has seen (its last acknowledged publish): the engine answers
// once its projection has reached it (in the deliberation read, or
// everywhere for a listing of all), waiting up to Config.MinPositionWait, and
// otherwise refuses it with projection.behind (api.KindUnavailable: 503),
// which says: ask again, here or at another engine.
const (
	// DefaultMinPositionWait is how long a read waits for its
	// min_position (Config.MinPositionWait).
	DefaultMinPositionWait = time.Second
	// maxWaiting bounds the reads waiting for their min_position at once;
	// past it a read that would wait is answered behind at once.
	maxWaiting = 4096
)

// AwaitPosition waits until the projection has reached min (deliberation
// id's messages up to min; every message with id ""), for at most wait,
// and returns a projection.behind *api.Error if it has not.
func (q *Queries) AwaitPosition(ctx context.Context, id string, min uint64, wait time.Duration) error {
	if min == 0 {
		return nil
	}
	if wait > 0 {
		if q.waiting.Add(1) > maxWaiting {
			wait = 0
		}
		defer q.waiting.Add(-1)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var err error
	if id == "" {
		err = q.r.WaitFor(ctx, min)
	} else {
		err = q.r.WaitForIn(ctx, id, min)
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, runner.ErrNotHeld) {
		if id == "" {
			// A list of every deliberation, at an engine that does not
			// fold the position's stream: the list gathers that stream's
			// page from its owner, as its projection is.
			return nil
		}
		return notHeld(id)
	}
	at := q.r.PositionAt(min)
	if id != "" {
		at = q.r.PositionOf(id)
	}
	return &api.Error{Kind: api.KindUnavailable, Code: api.CodeBehind, Projected: at,
		Message: "the engine's projection is at position " + strconv.FormatUint(at, 10) + ", not yet at min_position " + strconv.FormatUint(min, 10) + ": ask again"}
}

// MinPositionWait is how long a read waits for its min_position.
func (q *Queries) MinPositionWait() time.Duration {
	if q.minWait > 0 {
		return q.minWait
	}
	return DefaultMinPositionWait
}

// Reached says, without waiting, whether the projection has reached min
// for deliberation id ("": everywhere).
func (q *Queries) Reached(id string, min uint64) bool {
	return q.AwaitPosition(context.Background(), id, min, 0) == nil
}

// missing is the error of a deliberation the projection does not hold:
// partition.unavailable when its stream is not this engine's (engine
// serve --own-streams: another engine folds it), not found otherwise.
func (q *Queries) missing(id string) *api.Error {
	if !q.r.Holds(id) {
		return notHeld(id)
	}
	return notFound("deliberation " + id)
}

func notHeld(id string) *api.Error {
	return NotHeld(id, "another engine owns it, or is taking it over")
}

// NotHeld is the partition.unavailable error of a read of deliberation
// id, whose stream this engine does not fold now, for the reason why
// (503, retried).
func NotHeld(id, why string) *api.Error {
	return &api.Error{Kind: api.KindUnavailable, Code: api.CodePartitionUnavailable, RetryAfter: 1,
		Message: "deliberation " + id + " is in a stream this engine does not fold now (" + why + "): ask again"}
}

// StreamNotHeld is the partition.unavailable error of a read of the
// stream named stream, which this engine does not fold now.
func StreamNotHeld(stream, why string) *api.Error {
	return &api.Error{Kind: api.KindUnavailable, Code: api.CodePartitionUnavailable, RetryAfter: 1,
		Message: "the stream " + stream + " is not folded by this engine now (" + why + "): ask again"}
}

// Holds reports whether the engine folds deliberation id's stream now
// (always, but for an engine that owns streams: engine serve
// --own-streams).
func (q *Queries) Holds(id string) bool { return q.r.Holds(id) }

func notFound(what string) *api.Error {
	return &api.Error{Kind: api.KindNotFound, Code: api.CodeNotFound, Message: what + " not found"}
}

// List returns every deliberation, most recently touched first, in one
// slice: its memory grows with the deliberations. The API pages instead
// (DeliberationPage).
func (q *Queries) List() []api.Summary {
	var out []api.Summary
	q.r.EachDeliberation(func(d *projector.Deliberation) {
		out = append(out, d.Summary())
	})
	slices.SortFunc(out, func(a, b api.Summary) int {
		if a.Position != b.Position {
			return int(int64(b.Position) - int64(a.Position))
		}
		return 0
	})
	if out == nil {
		out = []api.Summary{}
	}
	return out
}

// Get returns the view of a deliberation.
func (q *Queries) Get(id string) (api.View, error) {
	var v api.View
	found := false
	q.r.ReadDeliberation(id, func(d *projector.Deliberation) {
		v, found = d.View(), true
	})
	if !found {
		return v, q.missing(id)
	}
	return v, nil
}

// ArtifactList returns the artifacts of a deliberation's DAG in stream
// order, all in one slice (the API pages: ArtifactPage).
func (q *Queries) ArtifactList(id string) ([]api.ArtifactEntry, error) {
	var out []api.ArtifactEntry
	found := false
	q.r.ReadDeliberation(id, func(d *projector.Deliberation) {
		found = true
		out = make([]api.ArtifactEntry, 0, d.Artifacts())
		d.Nodes(func(a canon.Digest, n projector.Node) {
			out = append(out, api.ArtifactEntry{ArtifactID: a, Position: n.Seq, Ordinal: d.Ordinal(n.Seq), Participant: n.Participant, Type: string(n.Type)})
		})
	})
	if !found {
		return nil, q.missing(id)
	}
	slices.SortFunc(out, func(a, b api.ArtifactEntry) int {
		switch {
		case a.Position < b.Position:
			return -1
		case a.Position > b.Position:
			return 1
		}
		return 0
	})
	return out, nil
}

// Rejections returns the rejections of a deliberation, every kept one (the
// API pages: RejectionPage).
func (q *Queries) Rejections(id string) (api.RejectionList, error) {
	var out api.RejectionList
	found := false
	q.r.ReadDeliberation(id, func(d *projector.Deliberation) {
		found = true
		kept, total, codes := d.Rejections()
		out = api.RejectionList{Deliberation: id, Total: total, ByCode: map[string]int{}, Kept: len(kept),
			Rejections: append([]api.Rejection{}, kept...)}
		for i := range out.Rejections {
			out.Rejections[i].Ordinal = d.Ordinal(out.Rejections[i].Position)
		}
		for k, v := range codes {
			out.ByCode[k] = v
		}
	})
	if !found {
		return out, q.missing(id)
	}
	return out, nil
}

// Unrouted returns the rejections that belong to no open deliberation,
// every kept one (the API pages: UnroutedPage).
func (q *Queries) Unrouted() api.RejectionList {
	var out api.RejectionList
	kept, total := q.r.Unrouted()
	out = api.RejectionList{Total: total, Kept: len(kept), Rejections: append([]api.Rejection{}, kept...), ByCode: map[string]int{}}
	for _, r := range kept {
		out.ByCode[r.Code]++
	}
	return out
}

// Artifact returns the canonical bytes of an artifact of a deliberation,
// read from the stream at its position.
func (q *Queries) Artifact(ctx context.Context, delib, artifactID string) ([]byte, error) {
	d, ok := canon.ParseDigest(artifactID)
	if !ok {
		return nil, &api.Error{Kind: api.KindInvalid, Code: api.CodeBadRequest, Message: "artifact id is not sha256:<64 lowercase hex>"}
	}
	var seq uint64
	known := false
	q.r.ReadDeliberation(delib, func(dl *projector.Deliberation) {
		known = true
		seq = dl.PositionOf(d)
	})
	switch {
	case !known:
		return nil, q.missing(delib)
	case seq == 0:
		return nil, notFound("artifact " + artifactID)
	}
	msg, err := ledger.GetMsg(ctx, q.streams, seq)
	if err != nil {
		return nil, &api.Error{Kind: api.KindUnavailable, Code: api.CodeUnavailable, Message: "read position: " + err.Error()}
	}
	return canon.Canonicalize(canon.AMD, msg.Data)
}

// Closure verifies a decision of a deliberation over the live projection
// at position at (0: the decision's own), with the charter's limits. A
// final answer is kept (budget.go).
func (q *Queries) Closure(id, decisionID string, at uint64) (closure.Result, error) {
	return q.ClosureBudgeted(id, decisionID, at, nil)
}

// ClosureBudgeted is Closure; a verification not kept is first admitted
// by admit (nil: always), which may refuse it, and is paid for with the
// ticket admit returns.
func (q *Queries) ClosureBudgeted(id, decisionID string, at uint64, admit func() (*Ticket, error)) (closure.Result, error) {
	var r closure.Result
	d, ok := canon.ParseDigest(decisionID)
	if !ok {
		return r, &api.Error{Kind: api.KindInvalid, Code: api.CodeBadRequest, Message: "decision id is not sha256:<64 lowercase hex>"}
	}
	// Past the deliberation's position the answer is its answer there
	// (every artifact is at or before it), named for the position asked:
	// positions ahead, however many, are one verification.
	eff, final, size := at, false, 0
	if !q.r.ReadDeliberation(id, func(dl *projector.Deliberation) {
		if at > dl.Position {
			eff = dl.Position
		}
		final, size = closureFinal(dl, d, eff, q.r.PositionOf(id)), dl.Artifacts()
	}) {
		return r, q.missing(id)
	}
	named := func(r closure.Result) closure.Result {
		if eff != at && r.Position == eff {
			r.Position = at
		}
		return r
	}
	key := closureKey{deliberation: id, decision: d, at: eff}
	if q.budget != nil {
		if r, ok := q.budget.closures.get(key); ok {
			return named(r), nil
		}
	}
	var t *Ticket
	if admit != nil {
		var err error
		if t, err = admit(); err != nil {
			return r, err
		}
	}
	if final && size >= yieldAbove {
		// A long verification whose answer cannot change lets the
		// deliberation's writers in as it goes, and, paid from the read
		// budget, paces itself to the budget's rate.
		g := &yieldingGraph{t: t}
		q.r.ReadDeliberationYielding(id, func(dl *projector.Deliberation, yield func(time.Duration)) {
			g.d, g.yield = dl, yield
			g.start()
			r = closure.Verify(g, d, eff, dl.ClosureLimits())
		})
		t.charge(g.stop())
		t.release()
	} else {
		t0 := time.Now()
		q.r.ReadDeliberation(id, func(dl *projector.Deliberation) { r = dl.Verify(d, eff, dl.ClosureLimits()) })
		t.charge(time.Since(t0))
		t.release()
	}
	if q.budget != nil {
		q.budget.closures.misses.Add(1)
		if final {
			q.budget.closures.put(key, r)
		}
	}
	return named(r), nil
}

// EvidenceJudgement is one EVIDENCE's provenance judgement.
type EvidenceJudgement struct {
	ArtifactID  canon.Digest `json:"artifact_id"`
	Position    uint64       `json:"position"`
	Participant string       `json:"participant"`
	*projector.Admissibility
}

// ProvenanceReport is a deliberation's provenance policy and the
// judgement of each EVIDENCE it concerns, in stream order.
type ProvenanceReport struct {
	Deliberation string                      `json:"deliberation"`
	Policy       *projector.ProvenancePolicy `json:"policy"`
	// Roots are the engine's re-verification roots (none: annotations are
	// judged by the discipline alone) and Reverifications its counts.
	Roots           []string            `json:"roots"`
	Reverifications *substrate.Stats    `json:"reverifications,omitempty"`
	Evidence        []EvidenceJudgement `json:"evidence"`
	Inadmissible    int                 `json:"inadmissible"`
}

// Provenance returns a deliberation's provenance report.
func (q *Queries) Provenance(id string) (ProvenanceReport, error) {
	out := ProvenanceReport{Deliberation: id, Roots: []string{}, Evidence: []EvidenceJudgement{}}
	found := false
	q.r.ReadDeliberation(id, func(d *projector.Deliberation) {
		found = true
		out.Policy = d.Policy().Provenance
		d.Judgements(func(a canon.Digest, n projector.Node) {
			out.Evidence = append(out.Evidence, EvidenceJudgement{a, n.Seq, n.Participant, n.Provenance})
			if !n.Provenance.Admissible {
				out.Inadmissible++
			}
		})
	})
	if !found {
		return out, q.missing(id)
	}
	if q.rv != nil {
		out.Roots = q.rv.Roots()
		st := q.rv.Stats()
		out.Reverifications = &st
	}
	return out, nil
}

// Bindings returns the binding moments of a deliberation in stream order,
// as the projector keeps them (projector.Deliberation.BindingMoments): a
// moment is resolved only by its principal's artifact that the fold
// admitted.
func (q *Queries) Bindings(_ context.Context, id string) ([]binding.Moment, error) {
	var out []binding.Moment
	if !q.r.ReadDeliberation(id, func(d *projector.Deliberation) { out = d.BindingMoments() }) {
		return nil, q.missing(id)
	}
	return out, nil
}
