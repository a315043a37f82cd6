// Package httpapi is the query API over HTTP (docs/API.md): the reads
// under /api/v1, answered from the read model (readmodel) in api's JSON,
// their pages and cursors, the recording, read-your-writes (MinPosition),
// the one write (a principal's resolution, through Writer), /healthz
// (through Health) and /metrics; the HTTP tokens and their
// authentication (auth.go); and the halted engine's refusal (Guard). A
// refusal is an *api.Error answered with its Kind's status.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/health"
	"github.com/parley-engine/parley/readmodel"
	"github.com/parley-engine/parley/web"
)

// Writer is the API's one write, a principal's resolution
// (bindwrite.Writer is one).
type Writer interface {
	Resolve(ctx context.Context, id, envDigest string, body []byte, principal string) (*binding.Resolved, error)
}

// Health makes the health report of GET /healthz (health.Watch is one).
type Health interface {
	Report(ctx context.Context) health.Health
}

// Config is what the API answers from.
type Config struct {
	Queries *readmodel.Queries
	Writer  Writer
	Health  Health
	// Metrics are gathered for GET /metrics.
	Metrics prometheus.Gatherer
	// EngineKey is the engine's public key (GET /api/v1/engine).
	EngineKey string
	// Stream and Partitioned are the record the engine reads (GET
	// /api/v1/engine).
	Stream      string
	Partitioned bool
	// Streams, over several streams, are their names (api.EngineInfo).
	Streams []string
}

// API answers the query API over HTTP from the read model (the NATS
// micro service is microapi's), with the engine's health and its one
// write (a principal's resolution).
type API struct {
	engine  api.EngineInfo
	q       *readmodel.Queries
	write   Writer
	health  Health
	metrics prometheus.Gatherer
}

// New returns the API of cfg.
func New(cfg Config) *API {
	return &API{q: cfg.Queries, write: cfg.Writer, health: cfg.Health, metrics: cfg.Metrics, engine: api.EngineInfo{Key: cfg.EngineKey, Stream: cfg.Stream, Partitioned: cfg.Partitioned, Streams: cfg.Streams}}
}

// Admit admits an expensive read of what for r from the read budget; a
// signed-in reader's is not budgeted (no ticket).
func (a *API) Admit(r *http.Request, what string) (*readmodel.Ticket, error) {
	if SignedIn(r) {
		return nil, nil
	}
	return a.q.Budget().Admit(r.Context(), web.ClientNetwork(r.RemoteAddr), what)
}

// MinPosition is the HTTP side of read-your-writes: a request under
// /api/v1 with ?min_position=N is served once the projection has reached
// N in the deliberation the path names (everywhere for the listings of
// all), or answered projection.behind (503) with Retry-After.
func (a *API) MinPosition(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := r.URL.Query().Get("min_position")
		if s == "" || !strings.HasPrefix(r.URL.Path, "/api/v1/") {
			next.ServeHTTP(w, r)
			return
		}
		min, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			reply(w, nil, &api.Error{Kind: api.KindInvalid, Code: api.CodeBadRequest, Message: "min_position must be a stream position"})
			return
		}
		id := ""
		if rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/deliberations/"); ok {
			id, _, _ = strings.Cut(rest, "/")
		}
		if err := a.q.AwaitPosition(r.Context(), id, min, a.q.MinPositionWait()); err != nil {
			w.Header().Set("Retry-After", "1")
			reply(w, nil, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Resolver returns the participant a principal's resolution is published
// as: the one the request's token stands for. ?as= may name it, and no
// other. It is what web.NewBinder is given, and the POST's own.
func Resolver(r *http.Request) (string, error) {
	p, ok := principalOf(r.Context())
	if !ok {
		return "", errUnauthorized
	}
	if as := r.URL.Query().Get("as"); as != "" && as != p {
		return "", &api.Error{Kind: api.KindForbidden, Code: api.CodeForbidden,
			Message: "this token resolves as " + strconv.Quote(p) + ": ?as= cannot choose another participant"}
	}
	return p, nil
}

// Handler serves the HTTP query API under /api/v1, /healthz and /metrics
// (service.Start mounts web's pages beside it). It authenticates nothing:
// a write needs the participant a token stands for, which only the
// engine's authentication (Auth.Wrap, around this handler in
// service.Start) puts in the request; without it every write is refused.
// Nor does it wait for min_position: service.Start wraps it, with web's
// pages, in MinPosition once.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/deliberations", a.serveDeliberations)
	mux.HandleFunc("GET /api/v1/deliberations/{id}", func(w http.ResponseWriter, r *http.Request) {
		v, err := a.q.Get(r.PathValue("id"))
		reply(w, v, err)
	})
	mux.HandleFunc("GET /api/v1/deliberations/{id}/rejections", a.serveRejections)
	mux.HandleFunc("GET /api/v1/deliberations/{id}/messages/{position}", func(w http.ResponseWriter, r *http.Request) {
		pos, err := strconv.ParseUint(r.PathValue("position"), 10, 64)
		if err != nil {
			reply(w, nil, &api.Error{Kind: api.KindInvalid, Code: api.CodeBadRequest, Message: "position must be a stream position"})
			return
		}
		v, err := a.q.Outcome(r.Context(), r.PathValue("id"), pos, r.URL.Query().Get("artifact_id"))
		reply(w, v, err)
	})
	mux.HandleFunc("GET /api/v1/deliberations/{id}/artifacts", a.serveArtifacts)
	mux.HandleFunc("GET /api/v1/deliberations/{id}/recording", a.serveRecording)
	mux.HandleFunc("GET /api/v1/deliberations/{id}/artifacts/{artifact_id}", func(w http.ResponseWriter, r *http.Request) {
		b, err := a.q.Artifact(r.Context(), r.PathValue("id"), r.PathValue("artifact_id"))
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
				reply(w, nil, &api.Error{Kind: api.KindInvalid, Code: api.CodeBadRequest, Message: "at must be a stream position"})
				return
			}
			at = n
		}
		v, err := a.q.ClosureBudgeted(r.PathValue("id"), r.PathValue("decision_id"), at, func() (*readmodel.Ticket, error) { return a.Admit(r, readmodel.ReadClosure) })
		reply(w, v, err)
	})
	mux.HandleFunc("GET /api/v1/deliberations/{id}/receipts", func(w http.ResponseWriter, r *http.Request) {
		var ords []uint64
		for _, s := range r.URL.Query()["ordinal"] {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil || n == 0 {
				reply(w, nil, &api.Error{Kind: api.KindInvalid, Code: api.CodeBadRequest, Message: "ordinal must be a message's ordinal (1 or more): " + strconv.Quote(s)})
				return
			}
			ords = append(ords, n)
		}
		v, err := a.q.Receipts(r.Context(), r.PathValue("id"), ords, func() (*readmodel.Ticket, error) { return a.Admit(r, readmodel.ReadRecording) })
		reply(w, v, err)
	})
	mux.HandleFunc("GET /api/v1/engine", func(w http.ResponseWriter, r *http.Request) {
		reply(w, a.engine, nil)
	})
	mux.HandleFunc("GET /api/v1/deliberations/{id}/provenance", func(w http.ResponseWriter, r *http.Request) {
		v, err := a.q.Provenance(r.PathValue("id"))
		reply(w, v, err)
	})
	mux.HandleFunc("GET /api/v1/deliberations/{id}/bindings", func(w http.ResponseWriter, r *http.Request) {
		// Every artifact's body is read from the stream: budgeted.
		t, err := a.Admit(r, readmodel.ReadBindings)
		if err != nil {
			reply(w, nil, err)
			return
		}
		v, err := a.q.Bindings(r.Context(), r.PathValue("id"))
		t.Done()
		reply(w, v, err)
	})
	mux.HandleFunc("POST /api/v1/deliberations/{id}/bindings/{envelope_digest}", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, canon.DefaultMaxSize+1))
		if err != nil || len(body) > canon.DefaultMaxSize {
			reply(w, nil, &api.Error{Kind: api.KindInvalid, Code: api.CodeBadRequest, Message: "the resolution could not be read, or is larger than 1 MiB"})
			return
		}
		as, err := Resolver(r)
		if err != nil {
			reply(w, nil, err)
			return
		}
		v, err := a.write.Resolve(r.Context(), r.PathValue("id"), r.PathValue("envelope_digest"), body, as)
		if err != nil {
			reply(w, v, err)
			return
		}
		writeJSON(w, http.StatusCreated, v)
	})
	mux.HandleFunc("GET /api/v1/rejections", a.serveUnrouted)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		h := a.health.Report(r.Context())
		status := http.StatusOK
		if !h.OK {
			status = http.StatusServiceUnavailable
		}
		writeJSON(w, status, h)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.metrics, promhttp.HandlerOpts{}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		reply(w, nil, &api.Error{Kind: api.KindNotFound, Code: api.CodeNotFound, Message: "no such endpoint: " + r.Method + " " + r.URL.Path})
	})
	return mux
}

// Guard answers 503 engine.halted (halted's error, health.Watch.Halted) to
// every request of the API but /healthz and /metrics once the engine
// halted.
func Guard(halted func() error, next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && r.URL.Path != "/metrics" {
			if err := halted(); err != nil {
				reply(rw, nil, err)
				return
			}
		}
		next.ServeHTTP(rw, r)
	})
}

// reply answers v, or the refusal err: an *api.Error with its Kind's
// status (and Retry-After), anything else as a 500.
func reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		ae := asAPIError(err)
		if ae.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(ae.RetryAfter))
		}
		writeJSON(w, ae.HTTPStatus(), ae)
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

// asAPIError is err as the API answers it: an *api.Error as it is, a
// canon error (stored bytes that no longer canonicalize) with its code,
// anything else as internal; each of the last two a KindInternal.
func asAPIError(err error) *api.Error {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae
	}
	var ce *canon.Error
	if errors.As(err, &ce) {
		return &api.Error{Kind: api.KindInternal, Code: ce.Code, Message: "stored bytes no longer canonicalize: " + ce.Error()}
	}
	return &api.Error{Kind: api.KindInternal, Code: api.CodeInternal, Message: err.Error()}
}

// Reply answers v, or the refusal err, as every handler of the API does.
func Reply(w http.ResponseWriter, v any, err error) { reply(w, v, err) }
