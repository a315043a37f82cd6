package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/projector"
)

// The live feed of a deliberation, GET /api/v1/deliberations/{id}/events:
// server-sent events, each with an id the browser sends back as
// Last-Event-ID when it reconnects, so that the feed resumes where it was.
//
//	event: artifacts   artifacts admitted into the DAG, in stream order ([]ArtifactEvent)
//	event: rejections  messages refused ([]api.Rejection)
//	event: state      the deliberation's status and counts, when they change
//	event: ready      everything there was when the feed started has been sent
//	event: end        the deliberation has ended and everything is sent; the feed closes
//
// An id is P.N.R: the stream position up to which the deliberation's
// artifacts have been sent (P), the number of artifacts admitted that were
// sent (N: artifacts are admitted in stream order, at their own position),
// and the number of rejections recorded that were sent (R). ?after=P
// starts after stream position P.
//
// The feed reads the projection at most batch artifacts at a time and
// their bodies from the stream one at a time, so that its memory is
// bounded whatever the deliberation's size; it polls the projection every
// Poll, writes a comment every Heartbeat when idle, ends when the client
// goes away, and lasts at most MaxLife (the browser then reconnects).

// ArtifactEvent is one artifact of an artifacts event.
type ArtifactEvent struct {
	Position uint64 `json:"position"`
	// Ordinal is the artifact's rank among its deliberation's messages
	// (1 for the first), whatever else the stream holds.
	Ordinal     uint64       `json:"ordinal"`
	ArtifactID  canon.Digest `json:"artifact_id"`
	Participant string       `json:"participant"`
	Type        string       `json:"artifact_type"`
	// Canonical is the artifact's canonical JSON, as a string so that the
	// bytes arrive as they are.
	Canonical string `json:"canonical,omitempty"`
	// Error says why the body is not there (Canonical is then absent): the
	// stored bytes no longer canonicalize.
	Error string `json:"error,omitempty"`
}

// StateEvent is the data of a state event.
type StateEvent struct {
	Status       api.Status     `json:"status"`
	Position     uint64         `json:"position"`
	Artifacts    int            `json:"artifacts"`
	Rejections   int            `json:"rejections"`
	OpenBlocking []canon.Digest `json:"open_blocking_objections"`
	Decisions    int            `json:"decisions"`
	Terminations []canon.Digest `json:"terminations"`
	// RejectionsMissed counts rejections recorded while the feed was
	// away that are no longer kept in detail.
	RejectionsMissed int `json:"rejections_missed,omitempty"`
}

const (
	batch = 256
	// maxEventBytes bounds the bodies of one artifacts event (a body is
	// at most the engine's artifact size limit, so an event holds at most
	// that much more).
	maxEventBytes = 512 << 10
)

// cursor is where a feed is: see the comment above.
type cursor struct {
	P    uint64
	N, R int
	// derive: N and R are to be derived from P (a plain ?after=).
	derive bool
}

func (c cursor) String() string {
	return strconv.FormatUint(c.P, 10) + "." + strconv.Itoa(c.N) + "." + strconv.Itoa(c.R)
}

func parseCursor(lastEventID, after string) (cursor, error) {
	if lastEventID != "" {
		parts := strings.Split(lastEventID, ".")
		if len(parts) == 3 {
			p, err1 := strconv.ParseUint(parts[0], 10, 64)
			n, err2 := strconv.Atoi(parts[1])
			r, err3 := strconv.Atoi(parts[2])
			if err1 == nil && err2 == nil && err3 == nil && n >= 0 && r >= 0 {
				return cursor{P: p, N: n, R: r}, nil
			}
		}
		return cursor{}, errors.New("Last-Event-ID is not an id of this feed (P.N.R)")
	}
	if after == "" {
		return cursor{}, nil
	}
	p, err := strconv.ParseUint(after, 10, 64)
	if err != nil {
		return cursor{}, errors.New("after must be a stream position")
	}
	return cursor{P: p, derive: true}, nil
}

// read is what one look at the projection gives.
type read struct {
	next       []ArtifactEvent
	rejections []api.Rejection
	missed     int
	state      StateEvent
	admitted   int // d.Artifacts() when read
	rejTotal   int
}

// look reads, under the deliberation's read lock, what is new after c.
func (e *Explorer) look(id string, c *cursor) (read, bool) {
	var out read
	found := e.r.ReadDeliberation(id, func(d *projector.Deliberation) {
		n := d.Artifacts()
		kept, total, _ := d.Rejections()
		if c.derive {
			after := 0
			d.ArtifactsAfter(c.P, func(int, api.ArtifactEntry) bool { after++; return true })
			c.N = n - after
			keptAfter := 0
			for _, r := range kept {
				if r.Position > c.P {
					keptAfter++
				}
			}
			c.R = total - keptAfter
			c.derive = false
		}
		entry := func(e api.ArtifactEntry) ArtifactEvent {
			return ArtifactEvent{Position: e.Position, Ordinal: d.Ordinal(e.Position), ArtifactID: e.ArtifactID, Participant: e.Participant, Type: e.Type}
		}
		d.ArtifactsAfter(c.P, func(_ int, a api.ArtifactEntry) bool {
			out.next = append(out.next, entry(a))
			return len(out.next) < batch
		})
		if fresh := total - c.R; fresh > 0 {
			// The kept rejections are the most recent, in the order they
			// were recorded: the fresh ones are at their end.
			avail := min(fresh, len(kept))
			out.missed = fresh - avail
			from := len(kept) - avail
			out.rejections = slices.Clone(kept[from : from+min(avail, batch)])
			for i := range out.rejections {
				out.rejections[i].Ordinal = d.Ordinal(out.rejections[i].Position)
			}
		}
		out.admitted, out.rejTotal = n, total
		out.state = StateEvent{Status: d.Status, Position: d.Position, Artifacts: n, Rejections: total,
			OpenBlocking: d.OpenBlockingObjections(), Decisions: len(d.Decisions()), Terminations: slices.Clone(d.Terminations())}
		if out.state.Terminations == nil {
			out.state.Terminations = []canon.Digest{}
		}
	})
	return out, found
}

// sse writes server-sent events, each flushed.
type sse struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf bytes.Buffer
}

func (s *sse) event(name, id string, data any) error {
	s.buf.Reset()
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	fmt.Fprintf(&s.buf, "event: %s\n", name)
	if id != "" {
		fmt.Fprintf(&s.buf, "id: %s\n", id)
	}
	s.buf.WriteString("data: ")
	s.buf.Write(b) // JSON has no raw newline
	s.buf.WriteString("\n\n")
	return s.write(s.buf.Bytes())
}

func (s *sse) write(b []byte) error {
	s.rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
	_, err := s.w.Write(b)
	return err
}

func (s *sse) flush() error { return s.rc.Flush() }

func (e *Explorer) serveEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	cur, err := parseCursor(r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	if !e.r.ReadDeliberation(id, func(*projector.Deliberation) {}) {
		writeError(w, http.StatusNotFound, "not_found", "deliberation "+id+" not found")
		return
	}
	release, _, msg := e.admitFeed(r)
	if release == nil {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, CodeLiveFeeds, msg)
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), e.MaxLife)
	defer cancel()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w)}
	if s.write([]byte("retry: 2000\n\n")) != nil || s.flush() != nil {
		return
	}
	poll := time.NewTicker(e.Poll)
	defer poll.Stop()
	idle := time.Now()
	ready := false
	var last StateEvent
	var lastJSON []byte
	for {
		// One cycle: everything new, a batch at a time.
		start := -1
		for {
			rd, ok := e.look(id, &cur)
			if !ok {
				return
			}
			if start < 0 {
				start = rd.admitted
			}
			// Artifacts go in events of up to maxEventBytes of bodies.
			arts := rd.next
			size := 0
			from := 0
			for i := range arts {
				if !e.body(ctx, &arts[i]) {
					// The stream did not answer (or the feed's time is up):
					// end here; the browser resumes after the last id.
					return
				}
				size += len(arts[i].Canonical)
				if size >= maxEventBytes || i == len(arts)-1 {
					for _, a := range arts[from : i+1] {
						cur.P = max(cur.P, a.Position)
					}
					if s.event("artifacts", cur.String(), arts[from:i+1]) != nil {
						return
					}
					for j := from; j <= i; j++ {
						arts[j].Canonical = "" // the memory of one event at a time
					}
					from, size = i+1, 0
				}
			}
			cur.R += rd.missed + len(rd.rejections)
			if len(rd.rejections) > 0 {
				if s.event("rejections", cur.String(), rd.rejections) != nil {
					return
				}
			}
			rd.state.RejectionsMissed = rd.missed
			wrote := len(arts) > 0 || len(rd.rejections) > 0
			if b, _ := json.Marshal(rd.state); !bytes.Equal(b, lastJSON) {
				lastJSON, last, wrote = b, rd.state, true
				if s.event("state", "", rd.state) != nil {
					return
				}
			}
			if wrote {
				if s.flush() != nil {
					return
				}
				idle = time.Now()
			}
			if len(rd.next) < batch && rd.rejTotal <= cur.R {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-e.closing:
				return
			default:
			}
		}
		cur.N = max(cur.N, start)
		if !ready {
			ready = true
			if s.event("ready", cur.String(), last) != nil || s.flush() != nil {
				return
			}
		}
		if last.Status.Terminal() {
			s.event("end", cur.String(), last)
			s.flush()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-e.closing:
			return
		case <-poll.C:
		}
		if e.Halted != nil && e.Halted() != nil {
			return
		}
		if time.Since(idle) >= e.Heartbeat {
			if s.write([]byte(": heartbeat\n\n")) != nil || s.flush() != nil {
				return
			}
			idle = time.Now()
		}
	}
}

// body reads the artifact's canonical bytes from the stream. It reports
// false when the stream does not answer: the feed ends there, rather than
// go past an artifact without its body. Bytes that no longer canonicalize
// are sent with the error instead (reading them again changes nothing).
func (e *Explorer) body(ctx context.Context, a *ArtifactEvent) bool {
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msg, err := e.getMsg(gctx, a.Position)
	if err != nil {
		return false
	}
	b, err := canon.Canonicalize(canon.AMD, msg.Data)
	if err != nil {
		a.Error = "the stored bytes no longer canonicalize: " + err.Error()
		return true
	}
	a.Canonical = string(b)
	return true
}
