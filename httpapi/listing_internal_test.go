package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/google/uuid"

	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/readmodel"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/wire"
)

// opened returns a runner of 8 shards, with no stream, with n
// deliberations open.
func opened(tb testing.TB, n int) *runner.Runner {
	tb.Helper()
	r := runner.NewInMemory(8, projector.Options{})
	for seq := uint64(1); seq <= uint64(n); seq++ {
		id := uuid.NewString()
		if out := r.ApplyInMemory(projector.Msg{Seq: seq, Subject: wire.ControlSubject(id), Data: []byte(`{"op":"open","charter":{"title":"t"}}`)}); out.Control != "open" {
			tb.Fatal("not opened")
		}
	}
	return r
}

type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkDeliberationPage serves a page of the list from a projection of
// 100,000 deliberations: what one page costs the handler (not the HTTP
// server around it).
func BenchmarkDeliberationPage(b *testing.B) {
	q := &API{q: readmodel.New(readmodel.Config{Runner: opened(b, 100000)})}
	for _, limit := range []int{100, 1000} {
		b.Run(strconv.Itoa(limit), func(b *testing.B) {
			req := httptest.NewRequest("GET", "/api/v1/deliberations?limit="+strconv.Itoa(limit), nil)
			w := &discard{h: http.Header{}}
			q.serveDeliberations(w, req)
			cursor := w.h.Get(wire.NextCursorHeader)
			req = httptest.NewRequest("GET", "/api/v1/deliberations?limit="+strconv.Itoa(limit)+"&cursor="+cursor, nil)
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				q.serveDeliberations(w, req)
			}
		})
	}
}
