package projector

import (
	"sort"

	"github.com/parley-engine/parley/canon"
)

// Summary is one deliberation in the query API's list.
type Summary struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Status   Status `json:"status"`
	Position uint64 `json:"position"`
	// OpenedAt is the position of the open control message: the list's
	// order (newest first) and its cursor.
	OpenedAt   uint64 `json:"opened_at"`
	Artifacts  int    `json:"artifacts"`
	Rejections int    `json:"rejections"`
}

// Summary summarizes d for the list.
func (d *Deliberation) Summary() Summary {
	return Summary{ID: d.ID, Title: d.Title, Status: d.Status, Position: d.Position, OpenedAt: d.OpenedAt,
		Artifacts: len(d.nodes), Rejections: d.rejTotal}
}

// ArtifactEntry is one artifact of a deliberation's DAG in the query
// API's list of its artifacts.
type ArtifactEntry struct {
	ArtifactID canon.Digest `json:"artifact_id"`
	Position   uint64       `json:"position"`
	// Ordinal is the artifact's message's rank among the deliberation's
	// messages (Deliberation.Ordinal): where a person reads positions.
	Ordinal     uint64 `json:"ordinal,omitempty"`
	Participant string `json:"participant"`
	Type        string `json:"artifact_type"`
}

// RejectionList is a page of rejections (of a deliberation, or of the
// messages of no opened deliberation) in stream order, with the counts
// of all of them.
type RejectionList struct {
	Deliberation string `json:"deliberation"`
	// Total counts every rejection ever recorded, ByCode the recorded ones
	// by code (of a deliberation: all of them; unrouted: the kept ones),
	// Kept those kept in detail (the most recent MaxKept).
	Total  int            `json:"total"`
	ByCode map[string]int `json:"by_code"`
	Kept   int            `json:"kept"`
	// NextCursor asks for the page after this one (empty: this is the
	// last).
	NextCursor string      `json:"next_cursor,omitempty"`
	Rejections []Rejection `json:"rejections"`
}

// ArtifactsAfter calls fn for the artifacts of the DAG at stream
// positions after position after, in stream order, until fn returns false.
// admitted is the artifact's ordinal in order of admission (Nodes' order,
// which is stream order): an artifact admitted after a moment when
// Artifacts() was n has admitted >= n, so a caller reading in several
// steps can keep to what was there at its first. Finding the first costs
// O(log n), and the walk allocates nothing.
func (d *Deliberation) ArtifactsAfter(after uint64, fn func(admitted int, e ArtifactEntry) bool) {
	n := len(d.nodes)
	for i := sort.Search(n, func(i int) bool { return d.nodes[i].seq > after }); i < n; i++ {
		nd := &d.nodes[i]
		if !fn(i, ArtifactEntry{ArtifactID: d.nodeIDs[i], Position: nd.seq, Participant: d.parts[nd.part], Type: string(typeOf[nd.typ])}) {
			return
		}
	}
}
