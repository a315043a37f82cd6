package web

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/archive"
	"github.com/parley-engine/parley/audit"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/wire"
)

// Forks. A fork (relay fork) opens a new deliberation with the
// participants' artifacts of a recorded one up to a message, published
// again byte for byte, then carries on: its first artifacts are the same
// artifacts, with the same ids, as its parent's. The explorer recognises
// a fork by that: its parent is the deliberation opened before it that
// holds the longest run of its first participants' artifacts (the
// supervisor's are not copied, and are left out on both sides); a tie goes
// to the one opened last. A replay, or a scripted run repeated word for
// word, shares every artifact and is recognised the same way.
//
//	GET /api/v1/explorer/deliberations/{id}/lineage  its parent and its forks
//	GET /api/v1/explorer/deliberations/{id}/compare  it beside its parent from the fork point
//	GET /api/v1/explorer/deliberations/{id}/recording  its stream recording (engine export)
//	GET /api/v1/explorer/deliberations/{id}/audit     the audit of that recording (engine audit)

// Relative is a deliberation related to another by a fork.
type Relative struct {
	ID     string     `json:"id"`
	Title  string     `json:"title"`
	Status api.Status `json:"status"`
	// Shared is the number of participants' artifacts the fork copied
	// from its parent.
	Shared int `json:"shared"`
	// ForkAfter is the ordinal, in the parent, of the last artifact the
	// fork copied: the fork carries on after the parent's message
	// ForkAfter (relay fork --at ForkAfter). ForkOrdinal is that
	// artifact's ordinal in the fork.
	ForkAfter   uint64 `json:"fork_after"`
	ForkOrdinal uint64 `json:"fork_ordinal"`
}

// Lineage is a deliberation's parent (nil: it is no fork) and forks.
type Lineage struct {
	Parent *Relative  `json:"parent"`
	Forks  []Relative `json:"forks"`
}

// maxForks bounds the forks listed, maxCandidates the deliberations
// looked at as forks (each costs a look at every deliberation).
const (
	maxForks      = 50
	maxCandidates = 2 * maxForks
)

// participantArtifacts returns d's artifacts but the supervisor's, in
// stream order, with their positions.
func participantArtifacts(d *projector.Deliberation) (ids []canon.Digest, pos []uint64) {
	d.ArtifactsAfter(0, func(_ int, e api.ArtifactEntry) bool {
		if e.Participant != wire.SupervisorToken {
			ids, pos = append(ids, e.ArtifactID), append(pos, e.Position)
		}
		return true
	})
	return ids, pos
}

// parentOf returns deliberation id's parent, or nil; found is false when
// there is no such deliberation.
func (e *Explorer) parentOf(id string) (parent *Relative, found bool) {
	var ids []canon.Digest
	var pos []uint64
	var opened uint64
	if !e.r.ReadDeliberation(id, func(d *projector.Deliberation) {
		ids, pos = participantArtifacts(d)
		opened = d.OpenedAt
	}) {
		return nil, false
	}
	if len(ids) == 0 {
		return nil, true
	}
	var best Relative
	var bestOpened uint64
	e.r.EachDeliberation(func(x *projector.Deliberation) {
		if x.ID == id || x.OpenedAt >= opened || !x.Has(ids[0]) {
			return
		}
		k := 0
		var after uint64
		for k < len(ids) && x.Has(ids[k]) {
			after = max(after, x.Ordinal(x.PositionOf(ids[k])))
			k++
		}
		if k > best.Shared || k == best.Shared && x.OpenedAt > bestOpened {
			best = Relative{ID: x.ID, Title: x.Title, Status: x.Status, Shared: k, ForkAfter: after}
			bestOpened = x.OpenedAt
		}
	})
	if best.Shared == 0 {
		return nil, true
	}
	e.r.ReadDeliberation(id, func(d *projector.Deliberation) { best.ForkOrdinal = d.Ordinal(pos[best.Shared-1]) })
	return &best, true
}

// lineage returns deliberation id's parent and forks.
func (e *Explorer) lineage(id string) (Lineage, bool) {
	parent, found := e.parentOf(id)
	if !found {
		return Lineage{}, false
	}
	l := Lineage{Parent: parent, Forks: []Relative{}}
	set := map[canon.Digest]bool{}
	var opened uint64
	e.r.ReadDeliberation(id, func(d *projector.Deliberation) {
		ids, _ := participantArtifacts(d)
		for _, a := range ids {
			set[a] = true
		}
		opened = d.OpenedAt
	})
	if len(set) == 0 {
		return l, true
	}
	// Candidates: opened after it, their first participant's artifact one
	// of its; a fork of it if it is their parent.
	var candidates []string
	e.r.EachDeliberation(func(x *projector.Deliberation) {
		if x.ID == id || x.OpenedAt <= opened || len(candidates) == maxCandidates {
			return
		}
		first := true
		x.ArtifactsAfter(0, func(_ int, a api.ArtifactEntry) bool {
			if a.Participant == wire.SupervisorToken {
				return true
			}
			if first && set[a.ArtifactID] {
				candidates = append(candidates, x.ID)
			}
			first = false
			return false
		})
	})
	for _, c := range candidates {
		if len(l.Forks) == maxForks {
			break
		}
		p, _ := e.parentOf(c)
		if p == nil || p.ID != id {
			continue
		}
		e.r.ReadDeliberation(c, func(d *projector.Deliberation) {
			l.Forks = append(l.Forks, Relative{ID: c, Title: d.Title, Status: d.Status, Shared: p.Shared, ForkAfter: p.ForkAfter, ForkOrdinal: p.ForkOrdinal})
		})
	}
	return l, true
}

// admitScan admits a read of every message of a deliberation (the
// list's budget: the engine's read budget for readers not signed in);
// done ends it.
func (e *Explorer) admitScan(w http.ResponseWriter, r *http.Request) (done func(), ok bool) {
	if e.Admit == nil {
		return func() {}, true
	}
	done, err := e.Admit(r)
	if err != nil {
		refuse(w, err)
		return nil, false
	}
	return done, true
}

func (e *Explorer) serveLineage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	l, found := e.lineage(id)
	if !found {
		writeError(w, http.StatusNotFound, "not_found", "deliberation "+id+" not found")
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// Side is one deliberation of a comparison.
type Side struct {
	ID        string     `json:"id"`
	Title     string     `json:"title"`
	Status    api.Status `json:"status"`
	ForkAfter uint64     `json:"fork_after"` // its ordinal of the last shared artifact
}

// CompareItem is an artifact after the fork point, and whether the other
// deliberation holds it too.
type CompareItem struct {
	ArtifactEvent
	InOther bool `json:"in_other"`
}

// Comparison is a fork beside its parent, from the fork point: each one's
// artifacts after it (at most maxCompare each; More says how many more).
type Comparison struct {
	Shared      int           `json:"shared"`
	Parent      Side          `json:"parent"`
	Fork        Side          `json:"fork"`
	ParentAfter []CompareItem `json:"parent_after"`
	ParentMore  int           `json:"parent_more,omitempty"`
	ForkAfter   []CompareItem `json:"fork_after"`
	ForkMore    int           `json:"fork_more,omitempty"`
}

const maxCompare = 300

// CodeNotAFork is the code of a comparison asked of a deliberation that
// is no fork (404).
const CodeNotAFork = "lineage.not_a_fork"

// after returns deliberation id's side and its artifacts after its
// ordinal from (at most maxCompare, and how many more).
func (e *Explorer) after(id string, from uint64) (side Side, list []CompareItem, more int) {
	e.r.ReadDeliberation(id, func(d *projector.Deliberation) {
		side = Side{ID: id, Title: d.Title, Status: d.Status, ForkAfter: from}
		d.ArtifactsAfter(0, func(_ int, a api.ArtifactEntry) bool {
			o := d.Ordinal(a.Position)
			if o <= from {
				return true
			}
			if len(list) == maxCompare {
				more++
				return true
			}
			list = append(list, CompareItem{ArtifactEvent: ArtifactEvent{Position: a.Position, Ordinal: o, ArtifactID: a.ArtifactID, Participant: a.Participant, Type: a.Type}})
			return true
		})
	})
	return side, list, more
}

func (e *Explorer) serveCompare(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p, found := e.parentOf(id)
	if !found {
		writeError(w, http.StatusNotFound, "not_found", "deliberation "+id+" not found")
		return
	}
	if p == nil {
		writeError(w, http.StatusNotFound, CodeNotAFork, "deliberation "+id+" is not a fork: no deliberation opened before it holds its first artifacts")
		return
	}
	c := Comparison{Shared: p.Shared}
	c.Parent, c.ParentAfter, c.ParentMore = e.after(p.ID, p.ForkAfter)
	c.Fork, c.ForkAfter, c.ForkMore = e.after(id, p.ForkOrdinal)
	mark := func(other string, list []CompareItem) {
		e.r.ReadDeliberation(other, func(d *projector.Deliberation) {
			for i := range list {
				list[i].InOther = d.Has(list[i].ArtifactID)
			}
		})
	}
	mark(id, c.ParentAfter)
	mark(p.ID, c.ForkAfter)
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	for _, list := range [][]CompareItem{c.ParentAfter, c.ForkAfter} {
		for i := range list {
			if !e.body(ctx, &list[i].ArtifactEvent) {
				list[i].Error = "the stream did not give its bytes"
			}
		}
	}
	if c.ParentAfter == nil {
		c.ParentAfter = []CompareItem{}
	}
	if c.ForkAfter == nil {
		c.ForkAfter = []CompareItem{}
	}
	writeJSON(w, http.StatusOK, c)
}

// counting counts the bytes written through it.
type counting struct {
	w io.Writer
	n int64
}

func (c *counting) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// MaxAuditBytes bounds the recording the explorer audits in memory; a
// larger one is refused (413 audit.too_large): export it and run engine
// audit.
const MaxAuditBytes = 64 << 20

// errTooLarge: the recording passed MaxAuditBytes.
var errTooLarge = errors.New("the recording is larger than the explorer audits")

type capped struct {
	bytes.Buffer
}

func (c *capped) Write(b []byte) (int, error) {
	if c.Len()+len(b) > MaxAuditBytes {
		return 0, errTooLarge
	}
	return c.Buffer.Write(b)
}

// exportable checks that the recording can be read, and admits the read
// (an export reads every message of the deliberation); done ends it.
func (e *Explorer) exportable(w http.ResponseWriter, r *http.Request) (done func(), ok bool) {
	id := r.PathValue("id")
	if e.JetStream == nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "this engine's explorer does not export recordings")
		return nil, false
	}
	if !e.r.ReadDeliberation(id, func(*projector.Deliberation) {}) {
		writeError(w, http.StatusNotFound, "not_found", "deliberation "+id+" not found")
		return nil, false
	}
	return e.admitScan(w, r)
}

// serveRecording writes the deliberation's stream recording, as engine
// export writes it (docs/RECORDINGS.md), for download. A recording cut
// short by an error lacks its trailer: an audit says so.
func (e *Explorer) serveRecording(w http.ResponseWriter, r *http.Request) {
	done, ok := e.exportable(w, r)
	if !ok {
		return
	}
	defer done()
	id := r.PathValue("id")
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Content-Disposition", `attachment; filename="parley-`+id+`.jsonl"`)
	h.Set("Cache-Control", "no-store")
	cw := &counting{w: w}
	if _, err := archive.Export(r.Context(), e.JetStream, id, recording.Stream, cw); err != nil && cw.n == 0 {
		h.Del("Content-Disposition")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the recording could not be exported: "+err.Error())
	}
}

// serveAudit exports the deliberation's stream recording and audits it,
// as engine audit does (docs/RECORDINGS.md): the audit's report, whose ok
// is the verdict.
func (e *Explorer) serveAudit(w http.ResponseWriter, r *http.Request) {
	done, ok := e.exportable(w, r)
	if !ok {
		return
	}
	defer done()
	var buf capped
	if _, err := archive.Export(r.Context(), e.JetStream, r.PathValue("id"), recording.Stream, &buf); err != nil {
		if errors.Is(err, errTooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, "audit.too_large", "the recording is larger than 64 MiB: export it (engine export) and run engine audit")
			return
		}
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the recording could not be exported: "+err.Error())
		return
	}
	rd, err := recording.NewReader(&buf.Buffer)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "the exported recording does not read: "+err.Error())
		return
	}
	rep, err := audit.Run(rd)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "the audit could not run: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, rep)
}
