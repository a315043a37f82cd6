package projector

import (
	"cmp"
	"slices"
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

// noteOrder keeps bySeq for the node just appended. Nodes are appended in
// order of admission, which is stream order until a pending artifact is
// released after later ones: from then on bySeq holds the stream order
// (4 bytes a node; an out-of-order node costs an insertion).
func (d *Deliberation) noteOrder() {
	i := int32(len(d.nodes) - 1)
	seq := d.nodes[i].seq
	if d.bySeq == nil {
		if i == 0 || d.nodes[i-1].seq < seq {
			return
		}
		d.bySeq = make([]int32, i, i+1+i/8)
		for j := range d.bySeq {
			d.bySeq[j] = int32(j)
		}
	}
	k := sort.Search(len(d.bySeq), func(k int) bool { return d.nodes[d.bySeq[k]].seq > seq })
	d.bySeq = slices.Insert(d.bySeq, k, i)
}

// buildOrder rebuilds bySeq (after a snapshot is read).
func (d *Deliberation) buildOrder() {
	d.bySeq = nil
	if slices.IsSortedFunc(d.nodes, func(a, b node) int { return cmp.Compare(a.seq, b.seq) }) {
		return
	}
	d.bySeq = make([]int32, len(d.nodes))
	for i := range d.bySeq {
		d.bySeq[i] = int32(i)
	}
	slices.SortFunc(d.bySeq, func(a, b int32) int { return cmp.Compare(d.nodes[a].seq, d.nodes[b].seq) })
}

// ArtifactsAfter calls fn for the artifacts of the DAG at stream
// positions after position after, in stream order, until fn returns false.
// admitted is the artifact's ordinal in order of admission (Nodes' order):
// an artifact admitted after a moment when Artifacts() was n has admitted
// >= n, so a caller reading in several steps can keep to what was there at
// its first (pending artifacts are admitted later than artifacts after
// them). Finding the first costs O(log n), and the walk allocates nothing.
func (d *Deliberation) ArtifactsAfter(after uint64, fn func(admitted int, e ArtifactEntry) bool) {
	at := func(r int) int {
		if d.bySeq == nil {
			return r
		}
		return int(d.bySeq[r])
	}
	n := len(d.nodes)
	for r := sort.Search(n, func(r int) bool { return d.nodes[at(r)].seq > after }); r < n; r++ {
		i := at(r)
		nd := &d.nodes[i]
		if !fn(i, ArtifactEntry{ArtifactID: d.nodeIDs[i], Position: nd.seq, Participant: d.parts[nd.part], Type: string(typeOf[nd.typ])}) {
			return
		}
	}
}
