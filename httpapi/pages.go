package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/readmodel"
	"github.com/parley-engine/parley/wire"
)

// pageRequest reads a page request from an HTTP query.
func pageRequest(r *http.Request) (api.PageRequest, error) {
	qv := r.URL.Query()
	p := api.PageRequest{Cursor: qv.Get("cursor"), Status: qv.Get("status")}
	if s := qv.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return p, &api.Error{Kind: api.KindInvalid, Code: api.CodeLimitInvalid,
				Message: "limit must be 1 to " + strconv.Itoa(wire.MaxPageLimit) + " (default " + strconv.Itoa(wire.DefaultPageLimit) + ")"}
		}
		p.Limit = n
	}
	return p, nil
}

// setNext announces the next page: the cursor in wire.NextCursorHeader,
// and the request's own URL with that cursor as a Link rel="next".
func setNext(w http.ResponseWriter, r *http.Request, next string) {
	if next == "" {
		return
	}
	qv := r.URL.Query()
	qv.Set("cursor", next)
	u := url.URL{Path: r.URL.Path, RawQuery: qv.Encode()}
	w.Header().Set(wire.NextCursorHeader, next)
	w.Header().Set("Link", "<"+u.String()+`>; rel="next"`)
}

var comma = []byte{','}

// writeItems writes a JSON array item by item, as it encodes them.
func writeItems[T any](w http.ResponseWriter, items []T) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	w.Write([]byte{'['})
	for i := range items {
		if i > 0 {
			w.Write(comma)
		}
		if enc.Encode(&items[i]) != nil {
			return // the status is sent; the truncated body shows the failure
		}
	}
	w.Write([]byte("]\n"))
}

// writeRejections writes a api.RejectionList, its rejections item
// by item.
func writeRejections(w http.ResponseWriter, l api.RejectionList) {
	items := l.Rejections
	l.Rejections = nil
	var head bytes.Buffer
	enc := json.NewEncoder(&head)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(l); err != nil {
		reply(w, nil, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	// head is {…,"rejections":null}\n: the array goes in null's place.
	w.Write(head.Bytes()[:head.Len()-len("null}\n")])
	enc = json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	w.Write([]byte{'['})
	for i := range items {
		if i > 0 {
			w.Write(comma)
		}
		if enc.Encode(&items[i]) != nil {
			return
		}
	}
	w.Write([]byte("]}\n"))
}

// The HTTP listings.

func (a *API) serveDeliberations(w http.ResponseWriter, r *http.Request) {
	p, err := pageRequest(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	if p.Status != "" {
		// A filter may read every deliberation to fill its page.
		t, err := a.Admit(r, readmodel.ReadList)
		if err != nil {
			reply(w, nil, err)
			return
		}
		defer t.Done()
	}
	// The page's memory is reused from one request to the next: a walk of
	// a long list makes no garbage of its pages.
	buf := summaryPages.Get().(*[]api.Summary)
	defer summaryPages.Put(buf)
	list, next, err := a.q.AppendDeliberationPage(p, (*buf)[:0])
	if err != nil {
		reply(w, nil, err)
		return
	}
	*buf = list[:0]
	setNext(w, r, next)
	writeItems(w, list)
}

var summaryPages = sync.Pool{New: func() any {
	b := make([]api.Summary, 0, wire.MaxPageLimit+1)
	return &b
}}

func (a *API) serveArtifacts(w http.ResponseWriter, r *http.Request) {
	p, err := pageRequest(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	list, next, err := a.q.ArtifactPage(r.PathValue("id"), p)
	if err != nil {
		reply(w, nil, err)
		return
	}
	setNext(w, r, next)
	writeItems(w, list)
}

func (a *API) serveRejections(w http.ResponseWriter, r *http.Request) {
	p, err := pageRequest(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	l, err := a.q.RejectionPage(r.PathValue("id"), p)
	if err != nil {
		reply(w, nil, err)
		return
	}
	setNext(w, r, l.NextCursor)
	writeRejections(w, l)
}

func (a *API) serveUnrouted(w http.ResponseWriter, r *http.Request) {
	p, err := pageRequest(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	l, err := a.q.UnroutedPage(p)
	if err != nil {
		reply(w, nil, err)
		return
	}
	setNext(w, r, l.NextCursor)
	writeRejections(w, l)
}

// serveRecording writes the DAG's artifacts in stream order, one
// canonical artifact a line (readmodel.Queries.Recording), with a limit
// that many and the cursor of the rest.
func (a *API) serveRecording(w http.ResponseWriter, r *http.Request) {
	p, err := pageRequest(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	err = a.q.Recording(r.Context(), r.PathValue("id"), p,
		func() (*readmodel.Ticket, error) { return a.Admit(r, readmodel.ReadRecording) },
		func(next string) {
			setNext(w, r, next)
			w.Header().Set("Content-Type", "application/x-ndjson")
		},
		func(b []byte) error {
			_, err := w.Write(b)
			return err
		})
	if err != nil {
		reply(w, nil, err)
	}
}
