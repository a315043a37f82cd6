package projector

import (
	"sort"

	"github.com/parley-engine/parley/api"
)

// Summary summarizes d for the list.
func (d *Deliberation) Summary() api.Summary {
	return api.Summary{ID: d.ID, Title: d.Title, Status: d.Status, Position: d.Position, OpenedAt: d.OpenedAt,
		Artifacts: len(d.nodes), Rejections: d.rejTotal}
}

// ArtifactsAfter calls fn for the artifacts of the DAG at stream
// positions after position after, in stream order, until fn returns false.
// admitted is the artifact's ordinal in order of admission (Nodes' order,
// which is stream order): an artifact admitted after a moment when
// Artifacts() was n has admitted >= n, so a caller reading in several
// steps can keep to what was there at its first. Finding the first costs
// O(log n), and the walk allocates nothing.
func (d *Deliberation) ArtifactsAfter(after uint64, fn func(admitted int, e api.ArtifactEntry) bool) {
	n := len(d.nodes)
	for i := sort.Search(n, func(i int) bool { return d.nodes[i].seq > after }); i < n; i++ {
		nd := &d.nodes[i]
		if !fn(i, api.ArtifactEntry{ArtifactID: d.nodeIDs[i], Position: nd.seq, Participant: d.parts[nd.part], Type: string(typeOf[nd.typ])}) {
			return
		}
	}
}
