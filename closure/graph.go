package closure

import (
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
)

// MemGraph is a Graph held in memory: a recording read back, or a test's.
// Add artifacts in stream order.
type MemGraph struct {
	nodes      map[canon.Digest]*memNode
	objections map[canon.Digest][]canon.Digest
}

type memNode struct {
	info Info
	refs []events.Reference
}

// NewMemGraph returns an empty graph.
func NewMemGraph() *MemGraph {
	return &MemGraph{nodes: map[canon.Digest]*memNode{}, objections: map[canon.Digest][]canon.Digest{}}
}

// Add adds an artifact at a position. A second artifact with the same id
// is ignored (the first stays, as in the projection).
func (g *MemGraph) Add(a *events.Artifact, position uint64) {
	g.AddNode(a.ID, Info{Position: position, Type: a.Type, Blocking: a.Blocking(), Decision: a.DecisionPayload()}, a.References)
}

// AddNode adds an artifact by its parts.
func (g *MemGraph) AddNode(id canon.Digest, info Info, refs []events.Reference) {
	if _, dup := g.nodes[id]; dup {
		return
	}
	info.Refs = len(refs)
	g.nodes[id] = &memNode{info: info, refs: refs}
	if info.Type == events.TypeObjection && info.Blocking {
		for _, r := range refs {
			if r.Relation == events.ObjectsTo {
				g.objections[r.Target] = append(g.objections[r.Target], id)
			}
		}
	}
}

// Len returns the number of artifacts.
func (g *MemGraph) Len() int { return len(g.nodes) }

// Lookup implements Graph.
func (g *MemGraph) Lookup(id canon.Digest) (Info, bool) {
	n, ok := g.nodes[id]
	if !ok {
		return Info{}, false
	}
	return n.info, true
}

// References implements Graph.
func (g *MemGraph) References(id canon.Digest, fn func(canon.Digest, events.Relation)) {
	if n, ok := g.nodes[id]; ok {
		for _, r := range n.refs {
			fn(r.Target, r.Relation)
		}
	}
}

// Objections implements Graph.
func (g *MemGraph) Objections(id canon.Digest, fn func(canon.Digest)) {
	for _, o := range g.objections[id] {
		fn(o)
	}
}

var _ Graph = (*MemGraph)(nil)
