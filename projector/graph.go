package projector

import (
	"sync"

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
//
// The result is kept until the next artifact is admitted: what closure
// reads (nodes, references, objections, admissibility) changes only when a
// node is appended, so the DAG's state is its number of nodes. The
// supervisor's verification of a final decision, the fold's check of the
// TERMINATION it justifies and the API's reads at that state verify once.
// The result is shared: callers must not modify it.
func (d *Deliberation) Verify(decision canon.Digest, at uint64, lim closure.Limits) closure.Result {
	k := closureKey{decision: decision, at: at, lim: lim, nodes: len(d.nodes)}
	c := &d.closures
	c.mu.Lock()
	r, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return r
	}
	r = closure.Verify(d, decision, at, lim)
	c.mu.Lock()
	if c.nodes != k.nodes || c.m == nil {
		c.m, c.nodes = map[closureKey]closure.Result{}, k.nodes
	}
	if len(c.m) < maxCachedClosures {
		c.m[k] = r
	}
	c.mu.Unlock()
	return r
}

// maxCachedClosures bounds the results kept for one state of a DAG.
const maxCachedClosures = 16

type closureKey struct {
	decision canon.Digest
	at       uint64
	lim      closure.Limits
	nodes    int
}

// closureCache holds verifications of one state of the DAG. Readers (who
// hold the deliberation's read lock, so that the DAG cannot change) fill
// it as the fold does: it has a lock of its own.
type closureCache struct {
	mu    sync.Mutex
	nodes int
	m     map[closureKey]closure.Result
}
