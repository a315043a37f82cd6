package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/parley-engine/parley/httpapi"
	"github.com/parley-engine/parley/microapi"
	"github.com/parley-engine/parley/readmodel"
	"github.com/parley-engine/parley/web"
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

// remoteList is the explorer's RemoteList: the list page of stream k
// from the engine that holds it, asked over HTTP with the credentials
// the client gave this engine (the owner checks them again).
func (s *Service) remoteList(r *http.Request, k int, query url.Values) (web.ListPage, error) {
	ctx, cancel := context.WithTimeout(r.Context(), microapi.DefaultForwardTimeout)
	defer cancel()
	m, err := s.ownerOf(ctx, k)
	if err != nil {
		return web.ListPage{}, err
	}
	if m.Name == s.self.Name || m.HTTP == "" {
		return web.ListPage{}, errors.New("nobody else holds the stream")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(m.HTTP, "/")+r.URL.Path+"?"+query.Encode(), nil)
	if err != nil {
		return web.ListPage{}, err
	}
	for _, h := range []string{"Authorization", "Cookie"} {
		if v := r.Header.Values(h); len(v) > 0 {
			req.Header[h] = v
		}
	}
	req.Header.Set(microapi.ForwardedHeader, "1")
	resp, err := forwardClient.Do(req)
	if err != nil {
		s.forgetRoute(k)
		return web.ListPage{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.forgetRoute(k)
		return web.ListPage{}, fmt.Errorf("%s answered %s", m.Name, resp.Status)
	}
	var page web.ListPage
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&page); err != nil {
		return web.ListPage{}, fmt.Errorf("%s: a page that is not one: %w", m.Name, err)
	}
	if n, _ := strconv.Atoi(query.Get("limit")); n > 0 && len(page.Deliberations) > n {
		page.Deliberations = page.Deliberations[:n] // no more than asked
	}
	return page, nil
}

// forwardClient asks other engines.
var forwardClient = &http.Client{Transport: forwardTransport}
