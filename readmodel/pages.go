package readmodel

import (
	"container/heap"
	"context"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/ledger"
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
// deliberation's, or a mangled one, is refused (cursor.invalid).

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

func badCursor(why string) *api.Error {
	return &api.Error{Kind: api.KindInvalid, Code: api.CodeCursorInvalid, Message: "cursor: " + why}
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

// PageLimit returns the page size a request asks for, or refuses it
// (limit.invalid).
func PageLimit(p api.PageRequest) (int, error) {
	switch {
	case p.Limit == 0:
		return wire.DefaultPageLimit, nil
	case p.Limit < 1 || p.Limit > wire.MaxPageLimit:
		return 0, &api.Error{Kind: api.KindInvalid, Code: api.CodeLimitInvalid,
			Message: "limit must be 1 to " + strconv.Itoa(wire.MaxPageLimit) + " (default " + strconv.Itoa(wire.DefaultPageLimit) + ")"}
	}
	return p.Limit, nil
}

var statuses = []api.Status{api.StatusOpen, api.StatusSuspended, api.StatusCompleted,
	api.StatusCancelled, api.StatusDeadlock, api.StatusExhausted}

// statusFilter returns the statuses a request admits (nil: any).
func statusFilter(p api.PageRequest) (map[api.Status]bool, error) {
	if p.Status == "" {
		return nil, nil
	}
	m := map[api.Status]bool{}
	for _, s := range strings.Split(p.Status, ",") {
		st := api.Status(strings.TrimSpace(s))
		ok := false
		for _, k := range statuses {
			ok = ok || k == st
		}
		if !ok {
			return nil, &api.Error{Kind: api.KindInvalid, Code: api.CodeStatusInvalid,
				Message: "status " + strconv.Quote(string(st)) + " is not one of open, suspended, completed, cancelled, deadlock, exhausted"}
		}
		m[st] = true
	}
	return m, nil
}

// DeliberationPage returns a page of the deliberations, newest opened
// first, and the cursor of the next page ("" at the end).
func (q *Queries) DeliberationPage(p api.PageRequest) ([]api.Summary, string, error) {
	return q.AppendDeliberationPage(p, nil)
}

// AppendDeliberationPage is DeliberationPage appending to out (whose
// memory a caller may reuse from one page to the next).
func (q *Queries) AppendDeliberationPage(p api.PageRequest, out []api.Summary) ([]api.Summary, string, error) {
	limit, before, want, err := deliberationPage(p)
	if err != nil {
		return nil, "", err
	}
	collect := func(d *projector.Deliberation) bool {
		if want == nil || want[d.Status] {
			out = append(out, d.Summary())
		}
		return len(out) <= limit
	}
	if q.r.Owned() && q.remote != nil {
		// The streams from the last to the first (positions order by
		// stream, then by sequence), each from this engine or its owner.
		l := q.r.Layout()
		for k := l.N() - 1; k >= 0 && len(out) <= limit; k-- {
			if before > 0 {
				if bk, _, _ := l.Split(before); bk < k {
					continue
				}
			}
			if q.r.DeliberationsBeforeIn(k, before, collect) {
				continue
			}
			sp := api.PageRequest{Limit: min(limit+1-len(out), wire.MaxPageLimit), Status: p.Status}
			if bk, _, _ := l.Split(before); before > 0 && bk == k {
				sp.Cursor = encodeCursor(cursorDeliberations, "", before)
			}
			ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
			page, more, err := q.remote(ctx, k, sp)
			cancel()
			if err != nil {
				return nil, "", StreamNotHeld(l.StreamAt(k), "its owner did not give its list: "+err.Error())
			}
			out = append(out, page...)
			if more && len(out) > 0 && len(out) <= limit {
				// The owner's page was full and the stream has more: the
				// next page goes on from this one's last.
				return out, encodeCursor(cursorDeliberations, "", out[len(out)-1].OpenedAt), nil
			}
		}
	} else {
		q.r.DeliberationsBefore(before, collect)
	}
	if len(out) > limit {
		return out[:limit], encodeCursor(cursorDeliberations, "", out[limit-1].OpenedAt), nil
	}
	if out == nil {
		out = []api.Summary{}
	}
	return out, "", nil
}

// deliberationPage reads a request of a page of the deliberations: its
// limit, the position it starts before, and the statuses it admits.
func deliberationPage(p api.PageRequest) (limit int, before uint64, want map[api.Status]bool, err error) {
	if limit, err = PageLimit(p); err != nil {
		return 0, 0, nil, err
	}
	if before, err = decodeCursor(p.Cursor, cursorDeliberations, ""); err != nil {
		return 0, 0, nil, err
	}
	want, err = statusFilter(p)
	return limit, before, want, err
}

// remoteTimeout bounds the read of another engine's page of a stream.
const remoteTimeout = 5 * time.Second

// DeliberationPageOf is DeliberationPage over the deliberations of the
// stream of index k alone, which this engine holds (partition.unavailable
// otherwise): what an engine that owns streams asks another for, to
// gather the list of every deliberation.
func (q *Queries) DeliberationPageOf(k int, p api.PageRequest) ([]api.Summary, string, error) {
	limit, before, want, err := deliberationPage(p)
	if err != nil {
		return nil, "", err
	}
	l := q.r.Layout()
	if k < 0 || k >= l.N() {
		return nil, "", &api.Error{Kind: api.KindInvalid, Code: api.CodeBadRequest, Message: "stream " + strconv.Itoa(k) + " is not one of the record's " + strconv.Itoa(l.N())}
	}
	out := []api.Summary{}
	if !q.r.DeliberationsBeforeIn(k, before, func(d *projector.Deliberation) bool {
		if want == nil || want[d.Status] {
			out = append(out, d.Summary())
		}
		return len(out) <= limit
	}) {
		return nil, "", StreamNotHeld(l.StreamAt(k), "another engine owns it")
	}
	if len(out) > limit {
		return out[:limit], encodeCursor(cursorDeliberations, "", out[limit-1].OpenedAt), nil
	}
	return out, "", nil
}

// ArtifactPage returns a page of a deliberation's artifacts in stream
// order, and the cursor of the next page ("" at the end).
func (q *Queries) ArtifactPage(id string, p api.PageRequest) ([]api.ArtifactEntry, string, error) {
	limit, err := PageLimit(p)
	if err != nil {
		return nil, "", err
	}
	after, err := decodeCursor(p.Cursor, cursorArtifacts, id)
	if err != nil {
		return nil, "", err
	}
	out, _, found := q.artifactsAfter(id, after, limit+1, -1)
	if !found {
		return nil, "", q.missing(id)
	}
	if len(out) > limit {
		return out[:limit], encodeCursor(cursorArtifacts, id, out[limit-1].Position), nil
	}
	return out, "", nil
}

// artifactsAfter returns up to n artifacts of deliberation id at positions
// after after, in stream order, of the first asOf admitted (asOf < 0: all
// there are now), and the number admitted when it read them.
func (q *Queries) artifactsAfter(id string, after uint64, n, asOf int) ([]api.ArtifactEntry, int, bool) {
	var out []api.ArtifactEntry
	found := q.r.ReadDeliberation(id, func(d *projector.Deliberation) {
		if asOf < 0 {
			asOf = d.Artifacts()
		}
		out = make([]api.ArtifactEntry, 0, min(n, d.Artifacts()))
		d.ArtifactsAfter(after, func(i int, e api.ArtifactEntry) bool {
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
type rejectionHeap []api.Rejection

func (h rejectionHeap) Len() int           { return len(h) }
func (h rejectionHeap) Less(i, j int) bool { return h[i].Position > h[j].Position }
func (h rejectionHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *rejectionHeap) Push(x any)        { *h = append(*h, x.(api.Rejection)) }
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
func (q *Queries) RejectionPage(id string, p api.PageRequest) (api.RejectionList, error) {
	var out api.RejectionList
	limit, err := PageLimit(p)
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
		out = api.RejectionList{Deliberation: id, Total: total, ByCode: make(map[string]int, len(codes)), Kept: len(kept)}
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
		return out, q.missing(id)
	}
	more := len(h) > limit
	if more {
		heap.Pop(&h) // the first of the next page
	}
	out.Rejections = make([]api.Rejection, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		out.Rejections[i] = heap.Pop(&h).(api.Rejection)
	}
	if more {
		out.NextCursor = encodeCursor(cursorRejections, id, out.Rejections[len(out.Rejections)-1].Position)
	}
	return out, nil
}

// UnroutedPage returns a page of the kept rejections of messages that
// belong to no open deliberation, in stream order, with the cursor of the
// next page in NextCursor.
func (q *Queries) UnroutedPage(p api.PageRequest) (api.RejectionList, error) {
	limit, err := PageLimit(p)
	if err != nil {
		return api.RejectionList{}, err
	}
	after, err := decodeCursor(p.Cursor, cursorUnrouted, "")
	if err != nil {
		return api.RejectionList{}, err
	}
	pg := q.r.UnroutedAfter(after, limit)
	out := api.RejectionList{Total: pg.Total, ByCode: pg.ByCode, Kept: pg.Kept, Rejections: pg.Rejections}
	if out.Rejections == nil {
		out.Rejections = []api.Rejection{}
	}
	if pg.More {
		out.NextCursor = encodeCursor(cursorUnrouted, "", out.Rejections[len(out.Rejections)-1].Position)
	}
	return out, nil
}

// Recording writes the DAG's artifacts in stream order, one canonical
// artifact a line (the recording engine closure reads): all of them as
// they were when it was asked (artifacts admitted since are left out, so
// that the recording is one moment's), read from the projection
// wire.MaxPageLimit at a time and from the stream one at a time; after the
// cursor of an artifacts page (or of a recording's) when p has one; with a
// limit, that many, and the cursor of the rest.
//
// Every body is read from the stream: admit (nil: always) admits it, and a
// ticket it returns is spent as the recording goes, waiting for the budget
// to refill rather than stopping. A refusal (the limit, the cursor, the
// budget, an unknown deliberation) is returned before anything is
// written; otherwise start is called once with the cursor of the rest
// ("": none), then write with each line, and a failure past that point
// (the stream, ctx, write) ends the recording short, with no error.
func (q *Queries) Recording(ctx context.Context, id string, p api.PageRequest, admit func() (*Ticket, error), start func(next string), write func([]byte) error) error {
	if p.Limit > wire.MaxPageLimit {
		if _, err := PageLimit(p); err != nil {
			return err
		}
	}
	after, err := decodeCursor(p.Cursor, cursorArtifacts, id)
	if err != nil {
		return err
	}
	chunk := wire.MaxPageLimit
	if p.Limit > 0 {
		chunk = p.Limit + 1
	}
	var t *Ticket
	if admit != nil {
		if t, err = admit(); err != nil {
			return err
		}
	}
	t.release()
	list, asOf, found := q.artifactsAfter(id, after, chunk, -1)
	if !found {
		return q.missing(id)
	}
	next := ""
	if p.Limit > 0 && len(list) > p.Limit {
		list = list[:p.Limit]
		next = encodeCursor(cursorArtifacts, id, list[len(list)-1].Position)
	}
	start(next)
	for len(list) > 0 {
		for _, a := range list {
			if !t.pace(ctx.Done()) {
				return nil
			}
			t0 := time.Now()
			msg, err := ledger.GetMsg(ctx, q.streams, a.Position)
			if err != nil {
				return nil // the truncated recording shows the failure
			}
			b, err := canon.Canonicalize(canon.AMD, msg.Data)
			t.charge(time.Since(t0))
			if err != nil {
				return nil
			}
			if err := write(append(b, '\n')); err != nil {
				return nil
			}
		}
		if p.Limit > 0 || len(list) < chunk {
			return nil
		}
		list, _, _ = q.artifactsAfter(id, list[len(list)-1].Position, chunk, asOf)
	}
	return nil
}
