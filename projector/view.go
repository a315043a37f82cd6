package projector

import (
	"encoding/json"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
)

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain values are marshalled here
	}
	return b
}

// View is the JSON summary of a deliberation served by the query API
// (the HTTP API in the README).
type View struct {
	ID                     string              `json:"id"`
	Title                  string              `json:"title"`
	Status                 Status              `json:"status"`
	Position               uint64              `json:"position"`
	OpenedAt               uint64              `json:"opened_at"`
	Round                  int                 `json:"round"`
	Artifacts              int                 `json:"artifacts"`
	Counts                 map[events.Type]int `json:"counts"`
	Participants           map[string]int      `json:"participants"`
	Rejections             int                 `json:"rejections"`
	RejectionsByCode       map[string]int      `json:"rejections_by_code"`
	Late                   int                 `json:"late"`
	Tips                   []canon.Digest      `json:"tips"`
	OpenBlockingObjections []canon.Digest      `json:"open_blocking_objections"`
	Decisions              []canon.Digest      `json:"decisions"`
	Terminations           []canon.Digest      `json:"terminations"`
	Charter                *Charter            `json:"charter,omitempty"`
	// InadmissibleEvidence is the EVIDENCE the charter's provenance
	// policy holds inadmissible (absent without a policy).
	InadmissibleEvidence []canon.Digest `json:"inadmissible_evidence,omitempty"`
	StateDigest          canon.Digest   `json:"state_digest"`
}

// View summarizes d.
func (d *Deliberation) View() View {
	_, total, codes := d.Rejections()
	_, late := d.Late()
	byCode := make(map[string]int, len(codes))
	for k, v := range codes {
		byCode[k] = v
	}
	return View{
		ID: d.ID, Title: d.Title, Status: d.Status, Position: d.Position, OpenedAt: d.OpenedAt, Round: d.Round,
		Artifacts: len(d.nodes), Counts: d.Counts(), Participants: d.ParticipantCounts(),
		Rejections: total, RejectionsByCode: byCode, Late: late,
		Tips: d.Tips(), OpenBlockingObjections: d.OpenBlockingObjections(),
		Decisions: append([]canon.Digest{}, d.decs...), Terminations: append([]canon.Digest{}, d.terms...),
		Charter: d.Charter, InadmissibleEvidence: d.Inadmissible(), StateDigest: d.StateDigest(),
	}
}
