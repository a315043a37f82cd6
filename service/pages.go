package service

import (
	"bytes"
	"container/heap"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/wire"
)

// Listings come in pages (wire.DefaultPageLimit, wire.MaxPageLimit): each
// is read from the projection with memory for the page only, and encoded
// as it goes out. A cursor says where the page after another starts:
//
//   - deliberations: newest opened first, the cursor the last one's open
//     position (positions are unique and never change, so a deliberation
//     that existed when the first page was read is on exactly one page; one
//     opened since then comes at the front of a new walk);
//   - a deliberation's artifacts, its rejections, the unrouted rejections:
//     stream order, the cursor the last one's position.
//
// Cursors are opaque: base64url of a version, the listing's kind, the
// position and a checksum over those and the listing's scope (the
// deliberation), so that a cursor of another listing, or of another
// deliberation's, or a mangled one, is refused (400 cursor.invalid).

// PageRequest asks for a page: at most Limit items (0: the default), after
// Cursor (empty: the first page), and, for deliberations, of the statuses
// in Status (comma-separated; empty: any).
type PageRequest struct {
	Limit  int    `json:"limit,omitempty"`
	Cursor string `json:"cursor,omitempty"`
	Status string `json:"status,omitempty"`
}

// Kinds of cursor.
const (
	cursorDeliberations = 'd'
	cursorArtifacts     = 'a'
	cursorRejections    = 'r'
	cursorUnrouted      = 'u'
)

const cursorVersion = 1

func cursorSum(b []byte, scope string) uint32 {
	h := crc32.NewIEEE()
	h.Write(b)
	h.Write([]byte(scope))
	return h.Sum32()
}

func encodeCursor(kind byte, scope string, pos uint64) string {
	b := make([]byte, 0, 2+binary.MaxVarintLen64+4)
	b = append(b, cursorVersion, kind)
	b = binary.AppendUvarint(b, pos)
	b = binary.BigEndian.AppendUint32(b, cursorSum(b, scope))
	return base64.RawURLEncoding.EncodeToString(b)
}

func badCursor(why string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: "cursor.invalid", Message: "cursor: " + why}
}

// decodeCursor returns the position of a cursor of the listing kind of
// scope (0 for the empty cursor: the first page).
func decodeCursor(s string, kind byte, scope string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	if len(s) > 32 {
		return 0, badCursor("too long")
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 2+1+4 {
		return 0, badCursor("not a cursor of this engine")
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if body[0] != cursorVersion {
		return 0, badCursor("unknown version")
	}
	pos, n := binary.Uvarint(body[2:])
	switch {
	case n <= 0 || 2+n != len(body) || pos == 0:
		return 0, badCursor("not a cursor of this engine")
	case cursorSum(body, scope) != sum:
		if body[1] != kind {
			return 0, badCursor("a cursor of another listing")
		}
		return 0, badCursor("a cursor of another listing, or damaged")
	case body[1] != kind:
		return 0, badCursor("a cursor of another listing")
	}
	return pos, nil
}

// limit returns the page size a request asks for.
func (p PageRequest) limit() (int, error) {
	switch {
	case p.Limit == 0:
		return wire.DefaultPageLimit, nil
	case p.Limit < 1 || p.Limit > wire.MaxPageLimit:
		return 0, &apiError{Status: http.StatusBadRequest, Code: "limit.invalid",
			Message: "limit must be 1 to " + strconv.Itoa(wire.MaxPageLimit) + " (default " + strconv.Itoa(wire.DefaultPageLimit) + ")"}
	}
	return p.Limit, nil
}

var statuses = []projector.Status{projector.StatusOpen, projector.StatusSuspended, projector.StatusCompleted,
	projector.StatusCancelled, projector.StatusDeadlock, projector.StatusExhausted}

// statusFilter returns the statuses a request admits (nil: any).
func (p PageRequest) statusFilter() (map[projector.Status]bool, error) {
	if p.Status == "" {
		return nil, nil
	}
	m := map[projector.Status]bool{}
	for _, s := range strings.Split(p.Status, ",") {
		st := projector.Status(strings.TrimSpace(s))
		ok := false
		for _, k := range statuses {
			ok = ok || k == st
		}
		if !ok {
			return nil, &apiError{Status: http.StatusBadRequest, Code: "status.invalid",
				Message: "status " + strconv.Quote(string(st)) + " is not one of open, suspended, completed, cancelled, deadlock, exhausted"}
		}
		m[st] = true
	}
	return m, nil
}

// DeliberationPage returns a page of the deliberations, newest opened
// first, and the cursor of the next page ("" at the end).
func (q *Queries) DeliberationPage(p PageRequest) ([]projector.Summary, string, error) {
	return q.deliberationPage(p, nil)
}

// deliberationPage is DeliberationPage appending to out.
func (q *Queries) deliberationPage(p PageRequest, out []projector.Summary) ([]projector.Summary, string, error) {
	limit, err := p.limit()
	if err != nil {
		return nil, "", err
	}
	before, err := decodeCursor(p.Cursor, cursorDeliberations, "")
	if err != nil {
		return nil, "", err
	}
	want, err := p.statusFilter()
	if err != nil {
		return nil, "", err
	}
	q.r.DeliberationsBefore(before, func(d *projector.Deliberation) bool {
		if want == nil || want[d.Status] {
			out = append(out, d.Summary())
		}
		return len(out) <= limit
	})
	if len(out) > limit {
		return out[:limit], encodeCursor(cursorDeliberations, "", out[limit-1].OpenedAt), nil
	}
	if out == nil {
		out = []projector.Summary{}
	}
	return out, "", nil
}

// ArtifactPage returns a page of a deliberation's artifacts in stream
// order, and the cursor of the next page ("" at the end).
func (q *Queries) ArtifactPage(id string, p PageRequest) ([]projector.ArtifactEntry, string, error) {
	limit, err := p.limit()
	if err != nil {
		return nil, "", err
	}
	after, err := decodeCursor(p.Cursor, cursorArtifacts, id)
	if err != nil {
		return nil, "", err
	}
	out, _, found := q.artifactsAfter(id, after, limit+1, -1)
	if !found {
		return nil, "", notFound("deliberation " + id)
	}
	if len(out) > limit {
		return out[:limit], encodeCursor(cursorArtifacts, id, out[limit-1].Position), nil
	}
	return out, "", nil
}

// artifactsAfter returns up to n artifacts of deliberation id at positions
// after after, in stream order, of the first asOf admitted (asOf < 0: all
// there are now), and the number admitted when it read them.
func (q *Queries) artifactsAfter(id string, after uint64, n, asOf int) ([]projector.ArtifactEntry, int, bool) {
	var out []projector.ArtifactEntry
	found := q.r.ReadDeliberation(id, func(d *projector.Deliberation) {
		if asOf < 0 {
			asOf = d.Artifacts()
		}
		out = make([]projector.ArtifactEntry, 0, min(n, d.Artifacts()))
		d.ArtifactsAfter(after, func(i int, e projector.ArtifactEntry) bool {
			if i < asOf {
				e.Ordinal = d.Ordinal(e.Position)
				out = append(out, e)
			}
			return len(out) < n
		})
	})
	return out, asOf, found
}

// rejectionHeap keeps the smallest positions seen: a max-heap of them.
type rejectionHeap []projector.Rejection

func (h rejectionHeap) Len() int           { return len(h) }
func (h rejectionHeap) Less(i, j int) bool { return h[i].Position > h[j].Position }
func (h rejectionHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *rejectionHeap) Push(x any)        { *h = append(*h, x.(projector.Rejection)) }
func (h *rejectionHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// RejectionPage returns a page of a deliberation's kept rejections, in
// stream order, with the cursor of the next page in NextCursor. The kept
// rejections are in the order they were recorded, which is stream order
// but for pending artifacts rejected once released: the page is chosen
// with a heap of its size over them (at most projector.Options.MaxKept).
func (q *Queries) RejectionPage(id string, p PageRequest) (projector.RejectionList, error) {
	var out projector.RejectionList
	limit, err := p.limit()
	if err != nil {
		return out, err
	}
	after, err := decodeCursor(p.Cursor, cursorRejections, id)
	if err != nil {
		return out, err
	}
	var h rejectionHeap
	found := q.r.ReadDeliberation(id, func(d *projector.Deliberation) {
		kept, total, codes := d.Rejections()
		out = projector.RejectionList{Deliberation: id, Total: total, ByCode: make(map[string]int, len(codes)), Kept: len(kept)}
		for k, v := range codes {
			out.ByCode[k] = v
		}
		h = make(rejectionHeap, 0, min(limit+1, len(kept)))
		for _, rj := range kept {
			if rj.Position <= after {
				continue
			}
			rj.Ordinal = d.Ordinal(rj.Position)
			if len(h) <= limit {
				heap.Push(&h, rj)
			} else if rj.Position < h[0].Position {
				h[0] = rj
				heap.Fix(&h, 0)
			}
		}
	})
	if !found {
		return out, notFound("deliberation " + id)
	}
	more := len(h) > limit
	if more {
		heap.Pop(&h) // the first of the next page
	}
	out.Rejections = make([]projector.Rejection, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		out.Rejections[i] = heap.Pop(&h).(projector.Rejection)
	}
	if more {
		out.NextCursor = encodeCursor(cursorRejections, id, out.Rejections[len(out.Rejections)-1].Position)
	}
	return out, nil
}

// UnroutedPage returns a page of the kept rejections of messages that
// belong to no open deliberation, in stream order, with the cursor of the
// next page in NextCursor.
func (q *Queries) UnroutedPage(p PageRequest) (projector.RejectionList, error) {
	limit, err := p.limit()
	if err != nil {
		return projector.RejectionList{}, err
	}
	after, err := decodeCursor(p.Cursor, cursorUnrouted, "")
	if err != nil {
		return projector.RejectionList{}, err
	}
	pg := q.r.UnroutedAfter(after, limit)
	out := projector.RejectionList{Total: pg.Total, ByCode: pg.ByCode, Kept: pg.Kept, Rejections: pg.Rejections}
	if out.Rejections == nil {
		out.Rejections = []projector.Rejection{}
	}
	if pg.More {
		out.NextCursor = encodeCursor(cursorUnrouted, "", out.Rejections[len(out.Rejections)-1].Position)
	}
	return out, nil
}

// pageRequest reads a page request from an HTTP query.
func pageRequest(r *http.Request) (PageRequest, error) {
	qv := r.URL.Query()
	p := PageRequest{Cursor: qv.Get("cursor"), Status: qv.Get("status")}
	if s := qv.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return p, &apiError{Status: http.StatusBadRequest, Code: "limit.invalid",
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

// writeRejections writes a projector.RejectionList, its rejections item
// by item.
func writeRejections(w http.ResponseWriter, l projector.RejectionList) {
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

func (q *Queries) serveDeliberations(w http.ResponseWriter, r *http.Request) {
	p, err := pageRequest(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	if p.Status != "" {
		// A filter may read every deliberation to fill its page.
		t, err := q.reads.admit(r, readList)
		if err != nil {
			reply(w, nil, err)
			return
		}
		defer t.done()
	}
	// The page's memory is reused from one request to the next: a walk of
	// a long list makes no garbage of its pages.
	buf := summaryPages.Get().(*[]projector.Summary)
	defer summaryPages.Put(buf)
	list, next, err := q.deliberationPage(p, (*buf)[:0])
	if err != nil {
		reply(w, nil, err)
		return
	}
	*buf = list[:0]
	setNext(w, r, next)
	writeItems(w, list)
}

var summaryPages = sync.Pool{New: func() any {
	b := make([]projector.Summary, 0, wire.MaxPageLimit+1)
	return &b
}}

func (q *Queries) serveArtifacts(w http.ResponseWriter, r *http.Request) {
	p, err := pageRequest(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	list, next, err := q.ArtifactPage(r.PathValue("id"), p)
	if err != nil {
		reply(w, nil, err)
		return
	}
	setNext(w, r, next)
	writeItems(w, list)
}

func (q *Queries) serveRejections(w http.ResponseWriter, r *http.Request) {
	p, err := pageRequest(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	l, err := q.RejectionPage(r.PathValue("id"), p)
	if err != nil {
		reply(w, nil, err)
		return
	}
	setNext(w, r, l.NextCursor)
	writeRejections(w, l)
}

func (q *Queries) serveUnrouted(w http.ResponseWriter, r *http.Request) {
	p, err := pageRequest(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	l, err := q.UnroutedPage(p)
	if err != nil {
		reply(w, nil, err)
		return
	}
	setNext(w, r, l.NextCursor)
	writeRejections(w, l)
}

// serveRecording writes the DAG's artifacts in stream order, one canonical
// artifact a line (the recording engine closure reads): all of them as
// they were when the request came (artifacts admitted since are left out,
// so that the recording is one moment's), read from the projection
// wire.MaxPageLimit at a time and from the stream one at a time; after the
// cursor of an artifacts page (or of a recording's) when it has one; with
// a limit, that many, and the cursor of the rest.
func (q *Queries) serveRecording(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p, err := pageRequest(r)
	if err == nil && p.Limit > wire.MaxPageLimit {
		_, err = p.limit()
	}
	if err != nil {
		reply(w, nil, err)
		return
	}
	after, err := decodeCursor(p.Cursor, cursorArtifacts, id)
	if err != nil {
		reply(w, nil, err)
		return
	}
	chunk := wire.MaxPageLimit
	if p.Limit > 0 {
		chunk = p.Limit + 1
	}
	// Every body is read from the stream: a reader not signed in spends
	// the read budget as it goes, and waits for it to refill.
	t, err := q.reads.admit(r, readRecording)
	if err != nil {
		reply(w, nil, err)
		return
	}
	t.release()
	list, asOf, found := q.artifactsAfter(id, after, chunk, -1)
	if !found {
		reply(w, nil, notFound("deliberation "+id))
		return
	}
	if p.Limit > 0 && len(list) > p.Limit {
		list = list[:p.Limit]
		setNext(w, r, encodeCursor(cursorArtifacts, id, list[len(list)-1].Position))
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	for len(list) > 0 {
		for _, a := range list {
			if !t.pace(r.Context().Done()) {
				return
			}
			t0 := time.Now()
			msg, err := q.stream.GetMsg(r.Context(), a.Position)
			if err != nil {
				return // the status is sent; the truncated body shows the failure
			}
			b, err := canon.Canonicalize(canon.AMD, msg.Data)
			t.charge(time.Since(t0))
			if err != nil {
				return
			}
			if _, err := w.Write(append(b, '\n')); err != nil {
				return
			}
		}
		if p.Limit > 0 || len(list) < chunk {
			return
		}
		list, _, _ = q.artifactsAfter(id, list[len(list)-1].Position, chunk, asOf)
	}
}
