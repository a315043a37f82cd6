package projector

import (
	"encoding/gob"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/provenance"
)

// snapshotVersion changes whenever the snapshot layout does; a snapshot of
// another version is refused and the runner rebuilds from the stream.
const snapshotVersion = 6

type snapshot struct {
	Version       int
	Position      uint64
	Unrouted      []Rejection
	UnroutedTotal int
	Delibs        []delibSnap
}

type nodeSnap struct {
	ID       canon.Digest
	Seq      uint64
	Depth    uint32
	RefStart uint32
	RefLen   uint32
	Part     int32
	Extra    int32
	Typ      uint8
	Blocking bool
}

type refSnap struct {
	Target canon.Digest
	Rel    uint8
}

type extraSnap struct {
	Decision    *events.Decision
	Termination *events.Termination
	Extensions  map[string][]byte
	Provenance  *Admissibility
}

type pendingSnap struct {
	Canonical   []byte
	Seq         uint64
	Participant string
	Time        time.Time
	// Reverified is the message's re-verification, judged on admission.
	Reverified []provenance.Verification
}

type delibSnap struct {
	ID, Title          string
	Status             Status
	Charter            *Charter
	OpenedAt, Position uint64
	Round              int
	Nodes              []nodeSnap
	Refs               []refSnap
	Extras             []extraSnap
	Pending            []pendingSnap
	Tips, Open         []canon.Digest
	Decs, Terms        []canon.Digest
	Parts              []string
	PerPart            []int
	Allowed            []string
	Rejects            []Rejection
	RejCodes           map[string]int
	RejTotal           int
	Late               []Late
	LateN              int
	OpenedTime         time.Time
	LastActivity       time.Time
	Tokens, Cost       int64
	Stall              int
	SuspendedAt        uint64
	Seqs               []uint64
	LastActivityAt     uint64
	CancelledAt        uint64
	CancelReason       string
	LastTime           time.Time
	Breaches           []Rejection
	Now                time.Time
}

// WriteSnapshot writes the projection to w. ReadSnapshot of it gives a
// projection with the same state and digests.
func (p *Projection) WriteSnapshot(w io.Writer) error {
	s := snapshot{Version: snapshotVersion, Position: p.position, Unrouted: p.unrouted, UnroutedTotal: p.unroutedTotal}
	for _, d := range p.delibs {
		ds := delibSnap{ID: d.ID, Title: d.Title, Status: d.Status, Charter: d.Charter, OpenedAt: d.OpenedAt,
			Position: d.Position, Round: d.Round, Tips: sortedKeys(d.tips), Open: sortedKeys(d.open),
			Decs: d.decs, Terms: d.terms, Parts: d.parts, PerPart: d.perPart, Rejects: d.rejects,
			RejCodes: d.rejCodes, RejTotal: d.rejTotal, Late: d.late, LateN: d.lateN,
			OpenedTime: d.OpenedTime, LastActivity: d.LastActivity, Tokens: d.Tokens, Cost: d.CostUSDMicros, Stall: d.Stall,
			SuspendedAt: d.SuspendedAt, Seqs: d.seqs, LastActivityAt: d.LastActivityAt, CancelledAt: d.CancelledAt, CancelReason: d.CancelReason, LastTime: d.lastTime, Breaches: d.breaches, Now: d.now}
		for t := range d.allowed {
			ds.Allowed = append(ds.Allowed, t)
		}
		ids := d.ids()
		ds.Nodes = make([]nodeSnap, len(d.nodes))
		for i, n := range d.nodes {
			ds.Nodes[i] = nodeSnap{ID: ids[i], Seq: n.seq, Depth: n.depth, RefStart: n.refStart, RefLen: n.refLen, Part: n.part,
				Extra: n.extra, Typ: n.typ, Blocking: n.blocking}
		}
		ds.Refs = make([]refSnap, len(d.refs))
		for i, r := range d.refs {
			ds.Refs[i] = refSnap{r.target, r.rel}
		}
		for _, e := range d.extras {
			ds.Extras = append(ds.Extras, extraSnap{e.decision, e.termination, e.extensions, e.provenance})
		}
		// In stream order: the waiting lists are rebuilt from it, and the
		// order they release artifacts in is part of the state.
		for _, pe := range d.pend {
			ds.Pending = append(ds.Pending, pendingSnap{pe.art.Canonical, pe.seq, pe.participant, pe.time, pe.reverified})
		}
		slices.SortFunc(ds.Pending, func(a, b pendingSnap) int { return cmpU64(a.Seq, b.Seq) })
		s.Delibs = append(s.Delibs, ds)
	}
	if err := gob.NewEncoder(w).Encode(&s); err != nil {
		return fmt.Errorf("projector: write snapshot: %w", err)
	}
	return nil
}

// ReadSnapshot reads a projection written by WriteSnapshot.
func ReadSnapshot(r io.Reader, opts Options) (*Projection, error) {
	var s snapshot
	if err := gob.NewDecoder(r).Decode(&s); err != nil {
		return nil, fmt.Errorf("projector: read snapshot: %w", err)
	}
	if s.Version != snapshotVersion {
		return nil, fmt.Errorf("projector: snapshot version %d, want %d", s.Version, snapshotVersion)
	}
	p := New(opts)
	p.position, p.unrouted, p.unroutedTotal = s.Position, s.Unrouted, s.UnroutedTotal
	for _, ds := range s.Delibs {
		d := newDeliberation(ds.ID, p.opts)
		d.Title, d.Status, d.Charter, d.OpenedAt, d.Position, d.Round = ds.Title, ds.Status, ds.Charter, ds.OpenedAt, ds.Position, ds.Round
		d.decs, d.terms, d.parts, d.perPart = ds.Decs, ds.Terms, ds.Parts, ds.PerPart
		d.rejects, d.rejTotal, d.late, d.lateN = ds.Rejects, ds.RejTotal, ds.Late, ds.LateN
		d.OpenedTime, d.LastActivity, d.Tokens, d.CostUSDMicros, d.Stall = ds.OpenedTime, ds.LastActivity, ds.Tokens, ds.Cost, ds.Stall
		d.SuspendedAt, d.CancelledAt, d.CancelReason, d.LastActivityAt = ds.SuspendedAt, ds.CancelledAt, ds.CancelReason, ds.LastActivityAt
		d.seqs, d.lastTime, d.breaches, d.now = ds.Seqs, ds.LastTime, ds.Breaches, ds.Now
		if d.Charter != nil {
			l, pol, err := effective(d.Charter, p.opts.Defaults)
			if err != nil {
				return nil, fmt.Errorf("projector: snapshot charter of %s: %w", d.ID, err)
			}
			d.limits, d.policy = l, pol
		}
		if ds.RejCodes != nil {
			d.rejCodes = ds.RejCodes
		}
		if d.perPart == nil {
			d.perPart = []int{}
		}
		for i, t := range d.parts {
			d.partIdx[t] = int32(i)
		}
		if len(ds.Allowed) > 0 {
			d.allowed = map[string]bool{}
			for _, t := range ds.Allowed {
				d.allowed[t] = true
			}
		}
		d.nodes = make([]node, len(ds.Nodes))
		for i, ns := range ds.Nodes {
			d.nodes[i] = node{seq: ns.Seq, depth: ns.Depth, refStart: ns.RefStart, refLen: ns.RefLen, part: ns.Part, extra: ns.Extra, typ: ns.Typ, blocking: ns.Blocking}
			d.index[ns.ID] = int32(i)
			if ds.Parts[ns.Part] == SupervisorToken {
				d.superN++
			}
			d.nodeIDs = append(d.nodeIDs, ns.ID)
			d.counts[ns.Typ]++
		}
		d.buildOrder()
		d.refs = make([]ref, len(ds.Refs))
		for i, r := range ds.Refs {
			d.refs[i] = ref{r.Target, r.Rel}
		}
		for _, e := range ds.Extras {
			d.extras = append(d.extras, extra{e.Decision, e.Termination, e.Extensions, e.Provenance})
		}
		for i, n := range d.nodes {
			if n.extra >= 0 {
				d.noteAdmissibility(int32(i), d.extras[n.extra].provenance)
			}
			if d.parts[n.part] == SupervisorToken && typeOf[n.typ] == events.TypeFailure {
				a := &events.Artifact{Type: events.TypeFailure}
				for _, r := range d.refs[n.refStart : n.refStart+n.refLen] {
					a.References = append(a.References, events.Reference{Target: r.target, Relation: relOf[r.rel]})
				}
				if n.extra >= 0 {
					a.Extensions = d.extras[n.extra].extensions
				}
				d.noteSupervisor(a)
			}
			if n.blocking {
				for _, r := range d.refs[n.refStart : n.refStart+n.refLen] {
					if relOf[r.rel] == events.ObjectsTo {
						d.objTo[r.target] = append(d.objTo[r.target], int32(i))
					}
				}
			}
		}
		for _, id := range ds.Tips {
			d.tips[id] = struct{}{}
		}
		for _, id := range ds.Open {
			d.open[id] = struct{}{}
		}
		for _, ps := range ds.Pending {
			a, err := p.opts.Validator.Validate(ps.Canonical)
			if err != nil {
				return nil, fmt.Errorf("projector: snapshot pending artifact at %d: %w", ps.Seq, err)
			}
			pe := &pending{art: a, seq: ps.Seq, participant: ps.Participant, time: ps.Time, reverified: ps.Reverified}
			seen := map[canon.Digest]bool{}
			for _, r := range a.References {
				if _, ok := d.index[r.Target]; !ok && !seen[r.Target] {
					seen[r.Target] = true
					d.waiting[r.Target] = append(d.waiting[r.Target], a.ID)
				}
			}
			pe.missing = len(seen)
			d.pend[a.ID] = pe
		}
		p.delibs[d.ID] = d
	}
	return p, nil
}
