package service

import (
	"context"
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/parley-engine/parley/httpapi"
	"github.com/parley-engine/parley/microapi"
	"github.com/parley-engine/parley/readmodel"
	"github.com/parley-engine/parley/wire"
)

// EngineHeader names, in an answer an engine forwarded, the engine that
// answered it (engine serve --own-streams).
const EngineHeader = "Parley-Engine"

// routeHTTP forwards a request about one deliberation (the first path
// segment that is a deliberation id: the API's, the explorer's, its live
// feed's, the binding pages') to the engine that holds its stream, when
// this one does not, and relays the answer (streamed: a live feed stays
// live). A request already forwarded is never forwarded again: it is
// answered 503 partition.unavailable, which clients ask again.
func (s *Service) routeHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := pathDeliberation(r.URL.Path)
		if id == "" {
			next.ServeHTTP(w, r)
			return
		}
		k := s.Runner.Layout().Index(id)
		if s.Runner.HoldsStream(k) {
			next.ServeHTTP(w, r)
			return
		}
		if r.Header.Get(microapi.ForwardedHeader) != "" {
			httpapi.Reply(w, nil, readmodel.NotHeld(id, "it moved while the request was forwarded"))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), microapi.DefaultForwardTimeout)
		m, err := s.ownerOf(ctx, k)
		cancel()
		switch {
		case err != nil:
			httpapi.Reply(w, nil, readmodel.NotHeld(id, "no engine holds its stream now: "+err.Error()))
			return
		case m.Name == s.self.Name:
			httpapi.Reply(w, nil, readmodel.NotHeld(id, "this engine is taking its stream over"))
			return
		}
		target, err := url.Parse(m.HTTP)
		if err != nil || target.Host == "" {
			httpapi.Reply(w, nil, readmodel.NotHeld(id, "its owner "+m.Name+" gave no URL to reach it at"))
			return
		}
		failed := false
		p := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.Out.Host = target.Host
				pr.Out.Header.Set(microapi.ForwardedHeader, "1")
				pr.SetXForwarded()
			},
			FlushInterval: -1, // a live feed's events as they come
			ModifyResponse: func(resp *http.Response) error {
				resp.Header.Set(EngineHeader, m.Name)
				return nil
			},
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				failed = true
				if errors.Is(err, context.Canceled) {
					return // the client went away
				}
				httpapi.Reply(w, nil, readmodel.NotHeld(id, "its owner "+m.Name+" did not answer: "+err.Error()))
			},
			Transport: forwardTransport,
		}
		p.ServeHTTP(w, r)
		if failed {
			s.forgetRoute(k)
		}
	})
}

// forwardTransport carries forwarded requests between engines.
var forwardTransport = &http.Transport{
	Proxy:                 nil,
	MaxIdleConnsPerHost:   64,
	IdleConnTimeout:       90 * time.Second,
	ResponseHeaderTimeout: microapi.DefaultForwardTimeout + 5*time.Second, // past a read's min_position wait
}

// pathDeliberation is the first segment of path that is a deliberation
// id ("" when none is).
func pathDeliberation(path string) string {
	for seg := range strings.SplitSeq(path, "/") {
		if wire.ValidDeliberation(seg) {
			return seg
		}
	}
	return ""
}
