package web

import (
	"cmp"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
)

// Row is one deliberation of the explorer's list.
type Row struct {
	ID         string     `json:"id"`
	Title      string     `json:"title"`
	Status     api.Status `json:"status"`
	OpenedAt   uint64     `json:"opened_at"`
	Position   uint64     `json:"position"`
	Artifacts  int        `json:"artifacts"`
	Rejections int        `json:"rejections"`
	// Counts are the artifacts by type (the types it has).
	Counts map[events.Type]int `json:"counts"`
	// Participants are the participants who have artifacts in its DAG,
	// the most prolific first.
	Participants []Participant `json:"participants"`
	OpenBlocking int           `json:"open_blocking_objections"`
	// LastActivity is when its last message was stored (absent when the
	// stream could not say).
	LastActivity *time.Time `json:"last_activity,omitempty"`
}

// Participant is a participant and its number of artifacts.
type Participant struct {
	ID        string `json:"id"`
	Artifacts int    `json:"artifacts"`
}

// ListPage is a page of the list: newest opened first; NextBefore asks for
// the next page (0: this is the last).
type ListPage struct {
	Deliberations []Row  `json:"deliberations"`
	NextBefore    uint64 `json:"next_before,omitempty"`
}

// Bounds of the list's page.
const (
	DefaultListLimit = 25
	MaxListLimit     = 100
	maxQueryLen      = 200
)

var allStatuses = []api.Status{api.StatusOpen, api.StatusSuspended, api.StatusCompleted,
	api.StatusCancelled, api.StatusDeadlock, api.StatusExhausted}

// serveList answers GET /api/v1/explorer/deliberations?status=&q=&limit=&before=:
// status a comma-separated list of statuses (empty: any), q words that
// must all appear in the title (case folded) or begin the id, before the
// next_before of the previous page.
func (e *Explorer) serveList(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	limit := DefaultListLimit
	if s := qv.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxListLimit {
			writeError(w, http.StatusBadRequest, "limit.invalid", "limit must be 1 to "+strconv.Itoa(MaxListLimit)+" (default "+strconv.Itoa(DefaultListLimit)+")")
			return
		}
		limit = n
	}
	var before uint64
	if s := qv.Get("before"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			writeError(w, http.StatusBadRequest, "before.invalid", "before must be the next_before of a page (a stream position)")
			return
		}
		before = n
	}
	var want map[api.Status]bool
	if s := qv.Get("status"); s != "" {
		want = map[api.Status]bool{}
		for _, p := range strings.Split(s, ",") {
			st := api.Status(strings.TrimSpace(p))
			if !slices.Contains(allStatuses, st) {
				writeError(w, http.StatusBadRequest, "status.invalid", "status "+strconv.Quote(string(st))+" is not one of open, suspended, completed, cancelled, deadlock, exhausted")
				return
			}
			want[st] = true
		}
	}
	q := qv.Get("q")
	if len(q) > maxQueryLen {
		writeError(w, http.StatusBadRequest, "q.invalid", "q is at most "+strconv.Itoa(maxQueryLen)+" bytes")
		return
	}
	words := strings.Fields(strings.ToLower(q))
	if (len(words) > 0 || want != nil) && e.Admit != nil {
		// A search may read every deliberation.
		done, err := e.Admit(r)
		if err != nil {
			refuse(w, err)
			return
		}
		defer done()
	}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	out := ListPage{Deliberations: []Row{}}
	collect := func(d *projector.Deliberation) bool {
		if ctx.Err() != nil {
			return false
		}
		if want != nil && !want[d.Status] {
			return true
		}
		if !matches(d, words) {
			return true
		}
		if len(out.Deliberations) == limit {
			out.NextBefore = out.Deliberations[limit-1].OpenedAt
			return false
		}
		out.Deliberations = append(out.Deliberations, row(d))
		return true
	}
	l := e.r.Layout()
	switch {
	case qv.Has("stream"):
		// One stream's page, which this engine holds: what an engine
		// that owns streams asks another for.
		k, err := strconv.Atoi(qv.Get("stream"))
		if err != nil || k < 0 || k >= l.N() {
			writeError(w, http.StatusBadRequest, "stream.invalid", "stream must be the index of one of the record's "+strconv.Itoa(l.N())+" streams")
			return
		}
		if !e.r.DeliberationsBeforeIn(k, before, collect) {
			writeError(w, http.StatusServiceUnavailable, "partition.unavailable", "the stream "+l.StreamAt(k)+" is not folded by this engine now: ask again")
			return
		}
	case e.r.Owned() && e.RemoteList != nil:
		// The streams from the last to the first, each from this engine
		// or from its owner.
		for k := l.N() - 1; k >= 0 && out.NextBefore == 0 && len(out.Deliberations) < limit; k-- {
			if before > 0 {
				if bk, _, _ := l.Split(before); bk < k {
					continue
				}
			}
			if e.r.DeliberationsBeforeIn(k, before, collect) {
				continue
			}
			sub := url.Values{}
			for key, v := range qv {
				sub[key] = v
			}
			sub.Set("stream", strconv.Itoa(k))
			sub.Set("limit", strconv.Itoa(limit-len(out.Deliberations)))
			sub.Del("before")
			if bk, _, _ := l.Split(before); before > 0 && bk == k {
				sub.Set("before", strconv.FormatUint(before, 10))
			}
			page, err := e.RemoteList(r, k, sub)
			if err != nil {
				writeError(w, http.StatusServiceUnavailable, "partition.unavailable", "the list of the stream "+l.StreamAt(k)+" did not come from its owner: "+err.Error()+": ask again")
				return
			}
			out.Deliberations = append(out.Deliberations, page.Deliberations...)
			out.NextBefore = page.NextBefore
		}
		if out.NextBefore == 0 && len(out.Deliberations) >= limit {
			// Full: whether more follow is the next page's to say.
			out.Deliberations = out.Deliberations[:limit]
			out.NextBefore = out.Deliberations[limit-1].OpenedAt
		}
	default:
		e.r.DeliberationsBefore(before, collect)
	}
	if err := ctx.Err(); err != nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the list took too long: "+err.Error())
		return
	}
	// The time of each one's last message, from the stream, outside the
	// deliberations' locks.
	for i := range out.Deliberations {
		row := &out.Deliberations[i]
		if row.LastActivity != nil {
			continue // from the engine that gave the row
		}
		gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if m, err := e.getMsg(gctx, row.Position); err == nil {
			t := m.Time.UTC()
			row.LastActivity = &t
		}
		cancel()
	}
	writeJSON(w, http.StatusOK, out)
}

// matches reports whether every word is in d's title or begins its id.
func matches(d *projector.Deliberation, words []string) bool {
	if len(words) == 0 {
		return true
	}
	title := strings.ToLower(d.Title)
	for _, w := range words {
		if !strings.Contains(title, w) && !strings.HasPrefix(d.ID, w) {
			return false
		}
	}
	return true
}

func row(d *projector.Deliberation) Row {
	s := d.Summary()
	out := Row{ID: s.ID, Title: s.Title, Status: s.Status, OpenedAt: s.OpenedAt, Position: s.Position,
		Artifacts: s.Artifacts, Rejections: s.Rejections, Counts: map[events.Type]int{}, Participants: []Participant{},
		OpenBlocking: d.OpenBlockingCount()}
	for t, n := range d.Counts() {
		if n > 0 {
			out.Counts[t] = n
		}
	}
	for p, n := range d.ParticipantCounts() {
		if n > 0 {
			out.Participants = append(out.Participants, Participant{p, n})
		}
	}
	slices.SortFunc(out.Participants, func(a, b Participant) int {
		if c := cmp.Compare(b.Artifacts, a.Artifacts); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}
