// Package httplimit holds the bounds every HTTP server of parley runs
// with, so that no client can hold the process's descriptors, memory or
// goroutines by being slow: timeouts for reading a request and writing
// each part of a response, a limit on headers and bodies, and a
// connection budget (Budget) that keeps the descriptors the rest of the
// process needs (the NATS server's clients, the store's files) out of
// HTTP's reach.
//
//	b := httplimit.NewBudget(ln, 4096)
//	srv := httplimit.Server(handler, b)
//	srv.Serve(b)
//
// A response may last as long as its handler writes: each write must be
// taken by the client within Limits.Write of its start (a live feed, a
// recording, the MCP server's event streams), rather than the whole
// response within a time of the request.
package httplimit

import (
	"net/http"
	"time"
)

// Limits are a server's bounds.
type Limits struct {
	// ReadHeader bounds the reading of a request's headers, Read the
	// reading of the whole request, its body included.
	ReadHeader, Read time.Duration
	// Write bounds each write of a response: the client must take it
	// within this time, or the connection is closed.
	Write time.Duration
	// Idle is how long a kept-alive connection waits for its next
	// request.
	Idle time.Duration
	// MaxHeaderBytes bounds a request's headers (the request line
	// included), MaxBodyBytes its body: past it the read fails and the
	// connection is closed after the answer.
	MaxHeaderBytes int
	MaxBodyBytes   int64
}

// Default are the bounds of parley's servers. The engine's largest body is
// a principal's resolution (at most 1 MiB), which needs 35 KB/s to arrive
// within Read.
var Default = Limits{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 30 * time.Second,
	Idle: 60 * time.Second, MaxHeaderBytes: 64 << 10, MaxBodyBytes: 2 << 20}

// Server returns a server for h with the Default bounds (Limits.Server).
func Server(h http.Handler, b *Budget) *http.Server { return Default.Server(h, b) }

// Server returns a server for h with the bounds l. With a budget b (nil:
// none), the server tells b which connections are in a request's handler,
// so that b drops only connections waiting for a request (Budget); serve
// it on b.
func (l Limits) Server(h http.Handler, b *Budget) *http.Server {
	h = l.bounded(h)
	s := &http.Server{Handler: h, ReadHeaderTimeout: l.ReadHeader, ReadTimeout: l.Read,
		WriteTimeout: l.Write, IdleTimeout: l.Idle, MaxHeaderBytes: l.MaxHeaderBytes}
	if b != nil {
		s.Handler = b.track(h)
		s.ConnContext = b.connContext
	}
	return s
}

// bounded limits a request's body and gives each write of its response
// l.Write.
func (l Limits) bounded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody && l.MaxBodyBytes > 0 {
			r.Body = http.MaxBytesReader(w, r.Body, l.MaxBodyBytes)
		}
		if l.Write > 0 {
			w = &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: l.Write}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineWriter sets the connection's write deadline before each write
// and flush: a response lasts as long as its handler writes, and each
// part must be taken within d. The server's own WriteTimeout (from the end
// of the request) would end a live feed or a long recording however
// healthy.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.ResponseWriter.Write(p)
}

// FlushError is what http.ResponseController.Flush calls.
func (w *deadlineWriter) FlushError() error {
	w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.rc.Flush()
}

// Flush makes the writer an http.Flusher (for handlers that assert it).
func (w *deadlineWriter) Flush() { w.FlushError() }

// Unwrap lets http.ResponseController reach the connection's deadlines.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
