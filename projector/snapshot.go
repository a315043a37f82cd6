package projector

import (
	"cmp"
	"encoding/gob"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/tlog"
	"github.com/parley-engine/parley/wire"
)

// snapshotVersion changes whenever the snapshot layout does; a snapshot of
// another version is refused and the runner rebuilds from the stream.
const snapshotVersion = 12

type snapshot struct {
	Version       int
	Position      uint64
	Unrouted      []api.Rejection
	UnroutedTotal int
	Delibs        []delibSnap
}

// nodeCols are a deliberation's nodes and references by column: gob
// encodes a slice of a basic type, and a []byte of concatenated digests,
// in one piece, where a slice of structs or of arrays costs a reflective
// call per field or per byte.
type nodeCols struct {
	IDs      []byte // 32 bytes a node
	Seq      []uint64
	Depth    []uint32
	RefStart []uint32
	RefLen   []uint32
	Part     []int32
	Extra    []int32
	Typ      []byte
	Blocking []bool
	Targets  []byte // 32 bytes a reference
	Rels     []byte
}

type extraSnap struct {
	Decision    *events.Decision
	Termination *events.Termination
	Extensions  map[string][]byte
	Provenance  *Admissibility
}

type delibSnap struct {
	ID, Title          string
	Status             api.Status
	Charter            *api.Charter
	OpenedAt, Position uint64
	Round              int
	Nodes              nodeCols
	Extras             []extraSnap
	Tips, Open         []byte // 32 bytes a digest
	Decs, Terms        []byte
	Parts              []string
	PerPart            []int
	Allowed            []string
	Rejects            []api.Rejection
	RejCodes           map[string]int
	RejTotal           int
	Late               []Late
	LateN              int
	RejChain           canon.Digest
	LateChain          canon.Digest
	OpenedTime         time.Time
	LastActivity       time.Time
	Tokens, Cost       int64
	Stall              int
	SuspendedAt        uint64
	Seqs               seqsSnap
	LastActivityAt     uint64
	CancelledAt        uint64
	CancelReason       string
	LastTime           time.Time
	Imported           bool
	Importing          bool
	ForeignAt          uint64
	Foreign            []api.Rejection
	ForeignN           int
	Breaches           []api.Rejection
	BreachesDropped    int
	Now                time.Time
	// The log (log.go): its size and frontier (32 bytes a hash), and the
	// checkpoint bookkeeping.
	LogSize    uint64
	LogHashes  []byte
	JudgedSize uint64
	CkptSize   uint64
	CkptN      int
	CkptBad    int
	CkptAt     uint64
	Ended      bool
}

// WriteSnapshot writes the projection to w. ReadSnapshot of it gives a
// projection with the same state and digests.
func (p *Projection) WriteSnapshot(w io.Writer) error { return p.Freeze().Write(w) }

// Frozen is a projection's state at one position, captured by Freeze
// without copying what the fold only appends to (nodes, references,
// extras, ids, positions): those are shared, cut at their length, and
// what the fold changes in place (bounded lists, maps, counters) is
// copied. Writing it costs the whole serialization and may run while the
// fold goes on: nothing the fold does afterwards changes what it holds.
type Frozen struct {
	s      snapshot
	delibs []frozenDelib
}

type frozenDelib struct {
	ds          delibSnap // all but Nodes, Extras, Tips, Open, Decs, Terms
	decs, terms []canon.Digest
	nodes       []node
	ids         []canon.Digest
	refs        []ref
	extras      []extra
	tips, open  map[canon.Digest]struct{}
}

// cut returns s shared up to its length, with no room to append into.
func cut[T any](s []T) []T { return s[:len(s):len(s)] }

// Freeze captures the projection's state for Write. Its cost is the
// number of deliberations and of what the fold changes in place (tips,
// open objections, pending artifacts, bounded lists), not the size of the
// DAGs. The caller holds whatever keeps the fold from running meanwhile.
func (p *Projection) Freeze() *Frozen {
	f := &Frozen{s: snapshot{Version: snapshotVersion, Position: p.Position(), Unrouted: slices.Clone(p.unrouted.list()), UnroutedTotal: p.unroutedTotal},
		delibs: make([]frozenDelib, 0, len(p.delibs))}
	for _, d := range p.delibs {
		ds := delibSnap{ID: d.ID, Title: d.Title, Status: d.Status, Charter: d.Charter, OpenedAt: d.OpenedAt,
			Position: d.Position, Round: d.Round,
			Parts: cut(d.parts), PerPart: slices.Clone(d.perPart), Rejects: slices.Clone(d.rejects.list()),
			RejCodes: maps.Clone(d.rejCodes), RejTotal: d.rejTotal, Late: slices.Clone(d.late.list()), LateN: d.lateN,
			RejChain: d.rejChain, LateChain: d.lateChain,
			OpenedTime: d.OpenedTime, LastActivity: d.LastActivity, Tokens: d.Tokens, Cost: d.CostUSDMicros, Stall: d.Stall,
			SuspendedAt: d.SuspendedAt, Seqs: d.seqs.snap(), LastActivityAt: d.LastActivityAt, CancelledAt: d.CancelledAt, CancelReason: d.CancelReason,
			LastTime: d.lastTime, Breaches: slices.Clone(d.breaches), BreachesDropped: d.breachesDropped, Now: d.now,
			Imported: d.imported, Importing: d.importing, ForeignAt: d.foreignAt, Foreign: slices.Clone(d.foreign.list()), ForeignN: d.foreignN,
			LogSize: d.LogSize(), JudgedSize: d.judgedSize, CkptSize: d.ckptSize, CkptN: d.ckptN, CkptBad: d.ckptBad, CkptAt: d.ckptAt, Ended: d.ended}
		if d.log != nil {
			for _, h := range d.log.Hashes() {
				ds.LogHashes = append(ds.LogHashes, h[:]...)
			}
		}
		for t := range d.allowed {
			ds.Allowed = append(ds.Allowed, t)
		}
		f.delibs = append(f.delibs, frozenDelib{ds: ds, decs: cut(d.decs), terms: cut(d.terms), nodes: cut(d.nodes), ids: cut(d.ids()), refs: cut(d.refs), extras: cut(d.extras),
			tips: maps.Clone(d.tips), open: maps.Clone(d.open)})
	}
	return f
}

// Position is the position the frozen state is at.
func (f *Frozen) Position() uint64 { return f.s.Position }

// Write writes the frozen state as WriteSnapshot does.
func (f *Frozen) Write(w io.Writer) error {
	s := f.s
	s.Delibs = make([]delibSnap, 0, len(f.delibs))
	for _, fd := range f.delibs {
		ds := fd.ds
		ds.Tips, ds.Open = digestBytes(sortedKeys(fd.tips)), digestBytes(sortedKeys(fd.open))
		ds.Decs, ds.Terms = digestBytes(fd.decs), digestBytes(fd.terms)
		n := len(fd.nodes)
		c := nodeCols{IDs: digestBytes(fd.ids), Seq: make([]uint64, n), Depth: make([]uint32, n), RefStart: make([]uint32, n), RefLen: make([]uint32, n),
			Part: make([]int32, n), Extra: make([]int32, n), Typ: make([]byte, n), Blocking: make([]bool, n),
			Targets: make([]byte, 0, 32*len(fd.refs)), Rels: make([]byte, len(fd.refs))}
		for i, nd := range fd.nodes {
			c.Seq[i], c.Depth[i], c.RefStart[i], c.RefLen[i] = nd.seq, nd.depth, nd.refStart, nd.refLen
			c.Part[i], c.Extra[i], c.Typ[i], c.Blocking[i] = nd.part, nd.extra, nd.typ, nd.blocking
		}
		for i, r := range fd.refs {
			c.Targets = append(c.Targets, r.target[:]...)
			c.Rels[i] = r.rel
		}
		ds.Nodes = c
		for _, e := range fd.extras {
			ds.Extras = append(ds.Extras, extraSnap{e.decision, e.termination, e.extensions, e.provenance})
		}
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
	p.position.Store(s.Position)
	p.unrouted.set(s.Unrouted)
	p.unroutedTotal = s.UnroutedTotal
	for _, ds := range s.Delibs {
		d := newDeliberation(ds.ID, p.opts)
		d.Title, d.Status, d.Charter, d.OpenedAt, d.Position, d.Round = ds.Title, ds.Status, ds.Charter, ds.OpenedAt, ds.Position, ds.Round
		d.parts, d.perPart = ds.Parts, ds.PerPart
		var err error
		if d.decs, err = bytesDigests(ds.Decs); err == nil {
			d.terms, err = bytesDigests(ds.Terms)
		}
		if err != nil {
			return nil, fmt.Errorf("projector: snapshot of %s: %w", ds.ID, err)
		}
		d.rejects.set(ds.Rejects)
		d.late.set(ds.Late)
		d.rejTotal, d.lateN = ds.RejTotal, ds.LateN
		d.rejChain, d.lateChain = ds.RejChain, ds.LateChain
		d.kl = p.kl
		d.OpenedTime, d.LastActivity, d.Tokens, d.CostUSDMicros, d.Stall = ds.OpenedTime, ds.LastActivity, ds.Tokens, ds.Cost, ds.Stall
		d.SuspendedAt, d.CancelledAt, d.CancelReason, d.LastActivityAt = ds.SuspendedAt, ds.CancelledAt, ds.CancelReason, ds.LastActivityAt
		if d.seqs, err = ds.Seqs.restore(); err != nil {
			return nil, fmt.Errorf("projector: snapshot of %s: %w", ds.ID, err)
		}
		d.lastTime, d.breaches, d.breachesDropped, d.now = ds.LastTime, ds.Breaches, ds.BreachesDropped, ds.Now
		for i := range d.breaches {
			_, size := keptOf(&d.breaches[i])
			d.breachBytes += size
		}
		p.kl.breachBytes.Add(d.breachBytes)
		p.kl.breachesDropped.Add(uint64(d.breachesDropped))
		d.imported, d.importing, d.foreignAt, d.foreignN = ds.Imported, ds.Importing, ds.ForeignAt, ds.ForeignN
		d.foreign.set(ds.Foreign)
		d.judgedSize, d.ckptSize, d.ckptN, d.ckptBad, d.ckptAt, d.ended = ds.JudgedSize, ds.CkptSize, ds.CkptN, ds.CkptBad, ds.CkptAt, ds.Ended
		if ds.LogSize > 0 {
			if len(ds.LogHashes)%32 != 0 {
				return nil, fmt.Errorf("projector: snapshot of %s: log hashes of %d bytes", ds.ID, len(ds.LogHashes))
			}
			hs := make([]tlog.Hash, len(ds.LogHashes)/32)
			for i := range hs {
				copy(hs[i][:], ds.LogHashes[32*i:])
			}
			if d.log, err = tlog.FrontierOf(ds.LogSize, hs); err != nil {
				return nil, fmt.Errorf("projector: snapshot of %s: log: %w", ds.ID, err)
			}
		}
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
		c := &ds.Nodes
		n, nr := len(c.Seq), len(c.Rels)
		if len(c.IDs) != 32*n || len(c.Depth) != n || len(c.RefStart) != n || len(c.RefLen) != n || len(c.Part) != n ||
			len(c.Extra) != n || len(c.Typ) != n || len(c.Blocking) != n || len(c.Targets) != 32*nr {
			return nil, fmt.Errorf("projector: snapshot of %s: node columns of different lengths", ds.ID)
		}
		d.nodes = make([]node, n)
		d.nodeIDs = make([]canon.Digest, n)
		for i := range n {
			nd := node{seq: c.Seq[i], depth: c.Depth[i], refStart: c.RefStart[i], refLen: c.RefLen[i], part: c.Part[i], extra: c.Extra[i], typ: c.Typ[i], blocking: c.Blocking[i]}
			if int(nd.part) < 0 || int(nd.part) >= len(d.parts) || int(nd.typ) >= len(d.counts) || uint64(nd.refStart)+uint64(nd.refLen) > uint64(nr) ||
				int(nd.extra) >= len(ds.Extras) {
				return nil, fmt.Errorf("projector: snapshot of %s: node %d out of range", ds.ID, i)
			}
			d.nodes[i] = nd
			id := canon.Digest(c.IDs[32*i : 32*i+32])
			if d.parts[nd.part] == wire.SupervisorToken {
				d.superN++
			}
			d.nodeIDs[i] = id
			d.counts[nd.typ]++
		}
		if !slices.IsSortedFunc(d.nodes, func(a, b node) int { return cmp.Compare(a.seq, b.seq) }) {
			return nil, fmt.Errorf("projector: snapshot of %s: nodes out of stream order", ds.ID)
		}
		d.index.build(d.nodeIDs)
		d.refs = make([]ref, nr)
		for i := range nr {
			d.refs[i] = ref{canon.Digest(c.Targets[32*i : 32*i+32]), c.Rels[i]}
		}
		for _, e := range ds.Extras {
			d.extras = append(d.extras, extra{e.Decision, e.Termination, e.Extensions, e.Provenance})
		}
		for i, n := range d.nodes {
			if n.extra >= 0 {
				d.noteAdmissibility(int32(i), d.extras[n.extra].provenance)
			}
			if d.parts[n.part] == wire.SupervisorToken && typeOf[n.typ] == events.TypeFailure {
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
		tips, err := bytesDigests(ds.Tips)
		if err != nil {
			return nil, fmt.Errorf("projector: snapshot of %s: %w", ds.ID, err)
		}
		for _, id := range tips {
			d.tips[id] = struct{}{}
		}
		open, err := bytesDigests(ds.Open)
		if err != nil {
			return nil, fmt.Errorf("projector: snapshot of %s: %w", ds.ID, err)
		}
		for _, id := range open {
			d.open[id] = struct{}{}
		}
		p.delibs[d.ID] = d
	}
	p.rebuildLedger()
	return p, nil
}

func digestBytes(ds []canon.Digest) []byte {
	b := make([]byte, 0, 32*len(ds))
	for _, d := range ds {
		b = append(b, d[:]...)
	}
	return b
}

func bytesDigests(b []byte) ([]canon.Digest, error) {
	if len(b)%32 != 0 {
		return nil, fmt.Errorf("digests of %d bytes", len(b))
	}
	if len(b) == 0 {
		return nil, nil
	}
	ds := make([]canon.Digest, len(b)/32)
	for i := range ds {
		ds[i] = canon.Digest(b[32*i : 32*i+32])
	}
	return ds, nil
}
