package projector

import (
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
)

// A Deliberation is the closure verifier's graph over its DAG.
var _ closure.Graph = (*Deliberation)(nil)

// Lookup implements closure.Graph.
func (d *Deliberation) Lookup(id canon.Digest) (closure.Info, bool) {
	i, ok := d.index.get(d.nodeIDs, id)
	if !ok {
		return closure.Info{}, false
	}
	n := &d.nodes[i]
	info := closure.Info{Position: n.seq, Type: typeOf[n.typ], Blocking: n.blocking, Refs: int(n.refLen)}
	if n.extra >= 0 {
		info.Decision = d.extras[n.extra].decision
	}
	return info, true
}

// References implements closure.Graph.
func (d *Deliberation) References(id canon.Digest, fn func(canon.Digest, events.Relation)) {
	i, ok := d.index.get(d.nodeIDs, id)
	if !ok {
		return
	}
	n := &d.nodes[i]
	for _, r := range d.refs[n.refStart : n.refStart+n.refLen] {
		fn(r.target, relOf[r.rel])
	}
}

// Objections implements closure.Graph.
func (d *Deliberation) Objections(id canon.Digest, fn func(canon.Digest)) {
	for _, i := range d.objTo[id] {
		fn(d.nodeIDs[i])
	}
}

// Verify verifies a decision of the deliberation (closure.Verify over its
// DAG) at position at (0: the decision's own). Limits come from the
// charter where it sets them.
func (d *Deliberation) Verify(decision canon.Digest, at uint64, lim closure.Limits) closure.Result {
	return closure.Verify(d, decision, at, lim)
}
