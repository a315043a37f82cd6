// Package web is the engine's deliberation explorer: the pages served at
// / (the list of deliberations) and /deliberations/{id} (one
// deliberation: its DAG laid out by dagre, an inspector for every
// artifact, its decisions with their closure, its rejections and binding
// moments), their assets, embedded in the binary, and the two endpoints
// only they need: a list of deliberations with their counts and
// participants, searchable by title, and a live feed of a deliberation as
// server-sent events, resumable from a position. The pages read the rest
// from the query API (/api/v1), and obey the same authentication: they
// are mounted behind it.
//
// The package holds the engine's other pages too: the binding pages
// (/bind, /bind/{id}), where a principal resolves binding moments, and
// the page a browser is shown when a request is refused (bind.go).
package web

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/runner"
)

//go:embed assets
var assets embed.FS

// Explorer serves the explorer's pages, assets and endpoints.
type Explorer struct {
	r      *runner.Runner
	stream jetstream.Stream
	// Streams, over a partitioned layout of several streams, are every
	// stream in order of its index: bodies are read from the stream of
	// their position (ledger.GetMsg). Unset: the one stream of New.
	Streams []jetstream.Stream
	// JetStream, when set, is the engine's, from which a deliberation's
	// recording is exported for download and audit (nil: those answer
	// 503 unavailable).
	JetStream jetstream.JetStream
	// MaxFeeds bounds the live feeds open at once; MaxFeedsPerNetwork
	// those of one client network that is not signed in (an IPv4 /24, an
	// IPv6 /64: one client holds many addresses of its network, rarely
	// many networks); ReservedSignedIn of MaxFeeds are kept for signed-in
	// readers (SignedIn), whom the per-network bound does not count. New
	// sets MaxStreams, MaxStreamsPerClient and ReservedSignedIn.
	MaxFeeds, MaxFeedsPerNetwork, ReservedSignedIn int
	// SignedIn says whether a request carries a valid token (the engine's
	// authentication, which the explorer is mounted behind); nil: none
	// is.
	SignedIn func(*http.Request) bool
	// Admit, when set, admits a list that may read every deliberation (a
	// search, a status filter) or refuses it (the engine's read budget:
	// an error with HTTPStatus, ErrorCode and RetryAfterSeconds); done
	// ends it.
	Admit func(r *http.Request) (done func(), err error)
	// RemoteList, for an engine that owns some of the record's streams
	// (runner NewOwnedSet), reads the list page of the stream of index k
	// from the engine that holds it (this endpoint with stream=k, asked
	// as r asked), for the list of every deliberation to gather them.
	RemoteList func(r *http.Request, k int, query url.Values) (ListPage, error)
	feeds      feedCount
	// Poll is how often a live feed looks for new messages, Heartbeat how
	// often an idle one writes a comment (proxies close idle connections),
	// MaxLife how long one lasts before the browser reconnects with its
	// Last-Event-ID (every request has a deadline).
	Poll, Heartbeat, MaxLife time.Duration
	// Halted, when set, says why the engine serves no state (a feed open
	// when it halts ends; the guard in front refuses the reconnection).
	Halted    func() error
	etags     map[string]string
	closing   chan struct{}
	closeOnce sync.Once
}

// Shutdown ends the live feeds (an HTTP server's Shutdown waits for every
// connection to become idle, which a feed never does):
// http.Server.RegisterOnShutdown(e.Shutdown).
func (e *Explorer) Shutdown() { e.closeOnce.Do(func() { close(e.closing) }) }

// MaxStreams is the number of live feeds an engine serves at once, and
// MaxStreamsPerClient the number it serves to one client network that is
// not signed in (the IPv4 /24 or IPv6 /64 of the connection's remote
// address: behind a reverse proxy, the proxy's); ReservedSignedIn of
// MaxStreams are kept for signed-in readers. The next is refused with 503
// limit.live_feeds and Retry-After.
const (
	MaxStreams          = 256
	MaxStreamsPerClient = 32
	ReservedSignedIn    = 64
)

// New returns the explorer over the engine's runner (the projection) and
// stream (the artifacts' bodies).
func New(r *runner.Runner, stream jetstream.Stream) *Explorer {
	e := &Explorer{r: r, stream: stream, MaxFeeds: MaxStreams, MaxFeedsPerNetwork: MaxStreamsPerClient, ReservedSignedIn: ReservedSignedIn,
		feeds: feedCount{perNet: map[string]int{}}, Poll: 200 * time.Millisecond, Heartbeat: 15 * time.Second, MaxLife: 30 * time.Minute, etags: map[string]string{},
		closing: make(chan struct{})}
	fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := assets.ReadFile(p)
			sum := sha256.Sum256(b)
			e.etags[strings.TrimPrefix(p, "assets/")] = `"` + hex.EncodeToString(sum[:8]) + `"`
		}
		return nil
	})
	return e
}

// Register adds the explorer's routes to mux.
func (e *Explorer) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", e.page)
	mux.HandleFunc("GET /deliberations/{id}", e.page)
	mux.HandleFunc("GET /assets/{name}", e.asset)
	mux.HandleFunc("GET /api/v1/explorer/deliberations", e.serveList)
	mux.HandleFunc("GET /api/v1/deliberations/{id}/events", e.serveEvents)
	mux.HandleFunc("GET /api/v1/explorer/deliberations/{id}/lineage", e.serveLineage)
	mux.HandleFunc("GET /api/v1/explorer/deliberations/{id}/compare", e.serveCompare)
	mux.HandleFunc("GET /api/v1/explorer/deliberations/{id}/recording", e.serveRecording)
	mux.HandleFunc("GET /api/v1/explorer/deliberations/{id}/audit", e.serveAudit)
}

// IsPage reports whether path is one of the explorer's pages (a refusal
// there is a page too, not JSON).
func IsPage(p string) bool {
	return p == "/" || strings.HasPrefix(p, "/deliberations/")
}

// page serves the one HTML page; its script reads the address.
func (e *Explorer) page(w http.ResponseWriter, r *http.Request) {
	b, err := assets.ReadFile("assets/index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	w.Write(b)
}

var contentTypes = map[string]string{
	".js":  "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8",
	".txt": "text/plain; charset=utf-8",
	".svg": "image/svg+xml",
}

// asset serves an embedded asset, revalidated by its ETag.
func (e *Explorer) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ct, ok := contentTypes[path.Ext(name)]
	tag, known := e.etags[name]
	if !ok || !known {
		writeError(w, http.StatusNotFound, "not_found", "no such asset: "+name)
		return
	}
	h := w.Header()
	h.Set("ETag", tag)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	if r.Header.Get("If-None-Match") == tag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	b, _ := assets.ReadFile("assets/" + name)
	h.Set("Content-Type", ct)
	w.Write(b)
}

type apiError struct {
	Code    string `json:"code"`
	Message string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, apiError{code, msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// refusal is an error that says how to answer it.
type refusal interface {
	error
	HTTPStatus() int
	ErrorCode() string
	RetryAfterSeconds() int
}

// refuse answers err: as it says, or 503 unavailable.
func refuse(w http.ResponseWriter, err error) {
	if r, ok := err.(refusal); ok {
		if s := r.RetryAfterSeconds(); s > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(s))
		}
		writeError(w, r.HTTPStatus(), r.ErrorCode(), r.Error())
		return
	}
	writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
}

// getMsg reads the message at a position of the record.
func (e *Explorer) getMsg(ctx context.Context, position uint64) (*jetstream.RawStreamMsg, error) {
	if len(e.Streams) > 0 {
		return ledger.GetMsg(ctx, e.Streams, position)
	}
	return e.stream.GetMsg(ctx, position)
}
