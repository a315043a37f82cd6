package service

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/substrate"
)

// Queries are the reads of the query API, shared by HTTP and NATS micro.
type Queries struct {
	r      *runner.Runner
	stream jetstream.Stream
	js     jetstream.JetStream // for the one write of the API: a principal's resolution
	rv     *substrate.Reverifier
	watch  *streamWatch // the stream watch (health.go); nil: none

	reads   *reads                      // the read budget and the closure cache (reads.go); nil: none
	bounds  func(now time.Time) []Bound // the bounds for /healthz (bounds.go); nil: none
	waiting atomic.Int64                // reads waiting for their min_position
	offLoop atomic.Int64                // micro reads served off their endpoint's goroutine
	minWait time.Duration               // how long they wait (0: DefaultMinPositionWait)
}

// apiError is an error with an HTTP status and a stable code.
type apiError struct {
	Status   int    `json:"-"`
	Code     string `json:"code"`
	Message  string `json:"error"`
	Findings any    `json:"findings,omitempty"`
	// Projected is, in a projection.behind answer, the position the
	// engine's projection had reached.
	Projected uint64 `json:"projected,omitempty"`
	// RetryAfter, when positive, is sent as Retry-After (seconds).
	RetryAfter int `json:"-"`
}

// Read-your-writes. A read may carry min_position, the stream position
// the caller has seen (its last acknowledged publish): the engine answers
// once its projection has reached it (in the deliberation read, or
// everywhere for a listing of all), waiting up to Config.MinPositionWait, and
// otherwise answers 503 projection.behind, which says: ask again, here or
// at another engine.
const (
	// DefaultMinPositionWait is how long a read waits for its
	// min_position (Config.MinPositionWait).
	DefaultMinPositionWait = time.Second
	// CodeBehind is the code of a read whose min_position the projection
	// has not reached within the wait.
	CodeBehind = "projection.behind"
	// maxWaiting bounds the reads waiting for their min_position at once;
	// past it a read that would wait is answered behind at once.
	maxWaiting = 4096
)

// awaitPosition waits until the projection has reached min (deliberation
// id's messages up to min; every message with id ""), for at most wait,
// and returns a projection.behind *apiError if it has not.
func (q *Queries) awaitPosition(ctx context.Context, id string, min uint64, wait time.Duration) error {
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
	at := q.r.Position()
	return &apiError{Status: http.StatusServiceUnavailable, Code: CodeBehind, Projected: at,
		Message: "the engine's projection is at position " + strconv.FormatUint(at, 10) + ", not yet at min_position " + strconv.FormatUint(min, 10) + ": ask again"}
}

func (q *Queries) minPositionWait() time.Duration {
	if q.minWait > 0 {
		return q.minWait
	}
	return DefaultMinPositionWait
}

// reached says, without waiting, whether the projection has reached min
// for deliberation id ("": everywhere).
func (q *Queries) reached(id string, min uint64) bool {
	return q.awaitPosition(context.Background(), id, min, 0) == nil
}

// minPosition is the HTTP side of read-your-writes: a request under
// /api/v1 with ?min_position=N is served once the projection has reached
// N in the deliberation the path names (everywhere for the listings of
// all), or answered 503 projection.behind with Retry-After.
func (q *Queries) minPosition(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := r.URL.Query().Get("min_position")
		if s == "" || !strings.HasPrefix(r.URL.Path, "/api/v1/") {
			next.ServeHTTP(w, r)
			return
		}
		min, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			reply(w, nil, &apiError{Status: http.StatusBadRequest, Code: "bad_request", Message: "min_position must be a stream position"})
			return
		}
		id := ""
		if rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/deliberations/"); ok {
			id, _, _ = strings.Cut(rest, "/")
		}
		if err := q.awaitPosition(r.Context(), id, min, q.minPositionWait()); err != nil {
			w.Header().Set("Retry-After", "1")
			reply(w, nil, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (e *apiError) Error() string { return e.Message }

// ErrorCode and RetryAfterSeconds tell web's pages how to answer it.
func (e *apiError) ErrorCode() string      { return e.Code }
func (e *apiError) RetryAfterSeconds() int { return e.RetryAfter }

// HTTPStatus is the status the error is answered with (web's binding
// pages answer a refused resolution with it).
func (e *apiError) HTTPStatus() int { return e.Status }

func notFound(what string) *apiError {
	return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: what + " not found"}
}

// List returns every deliberation, most recently touched first, in one
// slice: its memory grows with the deliberations. The API pages instead
// (DeliberationPage).
func (q *Queries) List() []projector.Summary {
	var out []projector.Summary
	q.r.EachDeliberation(func(d *projector.Deliberation) {
		out = append(out, d.Summary())
	})
	slices.SortFunc(out, func(a, b projector.Summary) int {
		if a.Position != b.Position {
			return int(int64(b.Position) - int64(a.Position))
		}
		return 0
	})
	if out == nil {
		out = []projector.Summary{}
	}
	return out
}

// Get returns the view of a deliberation.
func (q *Queries) Get(id string) (projector.View, error) {
	var v projector.View
	found := false
	q.r.ReadDeliberation(id, func(d *projector.Deliberation) {
		v, found = d.View(), true
	})
	if !found {
		return v, notFound("deliberation " + id)
	}
	return v, nil
}

// ArtifactList returns the artifacts of a deliberation's DAG in stream
// order, all in one slice (the API pages: ArtifactPage).
func (q *Queries) ArtifactList(id string) ([]projector.ArtifactEntry, error) {
	var out []projector.ArtifactEntry
	found := false
	q.r.ReadDeliberation(id, func(d *projector.Deliberation) {
		found = true
		out = make([]projector.ArtifactEntry, 0, d.Artifacts())
		d.Nodes(func(a canon.Digest, n projector.Node) {
			out = append(out, projector.ArtifactEntry{ArtifactID: a, Position: n.Seq, Ordinal: d.Ordinal(n.Seq), Participant: n.Participant, Type: string(n.Type)})
		})
	})
	if !found {
		return nil, notFound("deliberation " + id)
	}
	slices.SortFunc(out, func(a, b projector.ArtifactEntry) int {
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
func (q *Queries) Rejections(id string) (projector.RejectionList, error) {
	var out projector.RejectionList
	found := false
	q.r.ReadDeliberation(id, func(d *projector.Deliberation) {
		found = true
		kept, total, codes := d.Rejections()
		out = projector.RejectionList{Deliberation: id, Total: total, ByCode: map[string]int{}, Kept: len(kept),
			Rejections: append([]projector.Rejection{}, kept...)}
		for i := range out.Rejections {
			out.Rejections[i].Ordinal = d.Ordinal(out.Rejections[i].Position)
		}
		for k, v := range codes {
			out.ByCode[k] = v
		}
	})
	if !found {
		return out, notFound("deliberation " + id)
	}
	return out, nil
}

// Unrouted returns the rejections that belong to no open deliberation,
// every kept one (the API pages: UnroutedPage).
func (q *Queries) Unrouted() projector.RejectionList {
	var out projector.RejectionList
	kept, total := q.r.Unrouted()
	out = projector.RejectionList{Total: total, Kept: len(kept), Rejections: append([]projector.Rejection{}, kept...), ByCode: map[string]int{}}
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
		return nil, &apiError{Status: http.StatusBadRequest, Code: "bad_request", Message: "artifact id is not sha256:<64 lowercase hex>"}
	}
	var seq uint64
	known := false
	q.r.ReadDeliberation(delib, func(dl *projector.Deliberation) {
		known = true
		seq = dl.PositionOf(d)
	})
	switch {
	case !known:
		return nil, notFound("deliberation " + delib)
	case seq == 0:
		return nil, notFound("artifact " + artifactID)
	}
	msg, err := q.stream.GetMsg(ctx, seq)
	if err != nil {
		return nil, &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "read position: " + err.Error()}
	}
	return canon.Canonicalize(canon.AMD, msg.Data)
}

// Closure verifies a decision of a deliberation over the live projection
// at position at (0: the decision's own), with the charter's limits. A
// final answer is kept (reads.go).
func (q *Queries) Closure(id, decisionID string, at uint64) (closure.Result, error) {
	return q.closure(id, decisionID, at, nil)
}

// closure is Closure; a verification not kept is first admitted by admit
// (nil: always), which may refuse it.
func (q *Queries) closure(id, decisionID string, at uint64, admit func() (*ticket, error)) (closure.Result, error) {
	var r closure.Result
	d, ok := canon.ParseDigest(decisionID)
	if !ok {
		return r, &apiError{Status: http.StatusBadRequest, Code: "bad_request", Message: "decision id is not sha256:<64 lowercase hex>"}
	}
	// Past the deliberation's position the answer is its answer there
	// (every artifact is at or before it), named for the position asked:
	// positions ahead, however many, are one verification.
	eff, final, size := at, false, 0
	if !q.r.ReadDeliberation(id, func(dl *projector.Deliberation) {
		if at > dl.Position {
			eff = dl.Position
		}
		final, size = closureFinal(dl, d, eff, q.r.Position()), dl.Artifacts()
	}) {
		return r, notFound("deliberation " + id)
	}
	named := func(r closure.Result) closure.Result {
		if eff != at && r.Position == eff {
			r.Position = at
		}
		return r
	}
	key := closureKey{deliberation: id, decision: d, at: eff}
	if q.reads != nil {
		if r, ok := q.reads.closures.get(key); ok {
			return named(r), nil
		}
	}
	var t *ticket
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
	if q.reads != nil {
		q.reads.closures.misses.Add(1)
		if final {
			q.reads.closures.put(key, r)
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
		return out, notFound("deliberation " + id)
	}
	if q.rv != nil {
		out.Roots = q.rv.Roots()
		st := q.rv.Stats()
		out.Reverifications = &st
	}
	return out, nil
}

// resolver returns the participant a principal's resolution is published
// as: the one the request's token stands for. ?as= may name it, and no
// other.
func resolver(r *http.Request) (string, error) {
	p, ok := principalOf(r.Context())
	if !ok {
		return "", errUnauthorized
	}
	if as := r.URL.Query().Get("as"); as != "" && as != p {
		return "", &apiError{Status: http.StatusForbidden, Code: "forbidden",
			Message: "this token resolves as " + strconv.Quote(p) + ": ?as= cannot choose another participant"}
	}
	return p, nil
}

// Handler serves the HTTP query API under /api/v1, /healthz and /metrics
// (Start mounts web's pages beside it). It authenticates nothing: a write
// needs the participant a token stands for, which only the engine's
// authentication (around this handler in Start) puts in the request;
// without it every write is refused. Nor does it wait for min_position:
// Start wraps it, with web's pages, in minPosition once.
func (q *Queries) Handler(m *Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/deliberations", q.serveDeliberations)
	mux.HandleFunc("GET /api/v1/deliberations/{id}", func(w http.ResponseWriter, r *http.Request) {
		v, err := q.Get(r.PathValue("id"))
		reply(w, v, err)
	})
	mux.HandleFunc("GET /api/v1/deliberations/{id}/rejections", q.serveRejections)
	mux.HandleFunc("GET /api/v1/deliberations/{id}/messages/{position}", func(w http.ResponseWriter, r *http.Request) {
		pos, err := strconv.ParseUint(r.PathValue("position"), 10, 64)
		if err != nil {
			reply(w, nil, &apiError{Status: http.StatusBadRequest, Code: "bad_request", Message: "position must be a stream position"})
			return
		}
		v, err := q.Outcome(r.Context(), r.PathValue("id"), pos, r.URL.Query().Get("artifact_id"))
		reply(w, v, err)
	})
	mux.HandleFunc("GET /api/v1/deliberations/{id}/artifacts", q.serveArtifacts)
	mux.HandleFunc("GET /api/v1/deliberations/{id}/recording", q.serveRecording)
	mux.HandleFunc("GET /api/v1/deliberations/{id}/artifacts/{artifact_id}", func(w http.ResponseWriter, r *http.Request) {
		b, err := q.Artifact(r.Context(), r.PathValue("id"), r.PathValue("artifact_id"))
		if err != nil {
			reply(w, nil, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
	mux.HandleFunc("GET /api/v1/deliberations/{id}/closure/{decision_id}", func(w http.ResponseWriter, r *http.Request) {
		var at uint64
		if s := r.URL.Query().Get("at"); s != "" {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				reply(w, nil, &apiError{Status: http.StatusBadRequest, Code: "bad_request", Message: "at must be a stream position"})
				return
			}
			at = n
		}
		v, err := q.closure(r.PathValue("id"), r.PathValue("decision_id"), at, func() (*ticket, error) { return q.reads.admit(r, readClosure) })
		reply(w, v, err)
	})
	mux.HandleFunc("GET /api/v1/deliberations/{id}/provenance", func(w http.ResponseWriter, r *http.Request) {
		v, err := q.Provenance(r.PathValue("id"))
		reply(w, v, err)
	})
	mux.HandleFunc("GET /api/v1/deliberations/{id}/bindings", func(w http.ResponseWriter, r *http.Request) {
		// Every artifact's body is read from the stream: budgeted.
		t, err := q.reads.admit(r, readBindings)
		if err != nil {
			reply(w, nil, err)
			return
		}
		v, err := q.Bindings(r.Context(), r.PathValue("id"))
		t.done()
		reply(w, v, err)
	})
	mux.HandleFunc("POST /api/v1/deliberations/{id}/bindings/{envelope_digest}", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, canon.DefaultMaxSize+1))
		if err != nil || len(body) > canon.DefaultMaxSize {
			reply(w, nil, &apiError{Status: http.StatusBadRequest, Code: "bad_request", Message: "the resolution could not be read, or is larger than 1 MiB"})
			return
		}
		as, err := resolver(r)
		if err != nil {
			reply(w, nil, err)
			return
		}
		v, err := q.Resolve(r.Context(), r.PathValue("id"), r.PathValue("envelope_digest"), body, as)
		if err != nil {
			reply(w, v, err)
			return
		}
		writeJSON(w, http.StatusCreated, v)
	})
	mux.HandleFunc("GET /api/v1/rejections", q.serveUnrouted)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		h := q.Health(r.Context())
		status := http.StatusOK
		if !h.OK {
			status = http.StatusServiceUnavailable
		}
		writeJSON(w, status, h)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		reply(w, nil, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "no such endpoint: " + r.Method + " " + r.URL.Path})
	})
	return mux
}

func reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(ae.RetryAfter))
		}
		if !errors.As(err, &ae) {
			var ce *canon.Error
			if errors.As(err, &ce) {
				ae = &apiError{Status: http.StatusInternalServerError, Code: ce.Code, Message: "stored bytes no longer canonicalize: " + ce.Error()}
			} else {
				ae = &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: err.Error()}
			}
		}
		writeJSON(w, ae.Status, ae)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
