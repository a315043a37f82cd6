package projector

import (
	"encoding/json"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
)

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain values are marshalled here
	}
	return b
}

// View summarizes d.
func (d *Deliberation) View() api.View {
	_, total, codes := d.Rejections()
	_, late := d.Late()
	byCode := make(map[string]int, len(codes))
	for k, v := range codes {
		byCode[k] = v
	}
	return api.View{
		ID: d.ID, Title: d.Title, Status: d.Status, Position: d.Position, OpenedAt: d.OpenedAt, Round: d.Round,
		Artifacts: len(d.nodes), Counts: d.Counts(), Participants: d.ParticipantCounts(),
		Rejections: total, RejectionsByCode: byCode, Late: late,
		Tips: d.Tips(), OpenBlockingObjections: d.OpenBlockingObjections(),
		Decisions: append([]canon.Digest{}, d.decs...), Terminations: append([]canon.Digest{}, d.terms...),
		Charter: d.Charter, InadmissibleEvidence: d.Inadmissible(), StateDigest: d.StateDigest(),
		Log: d.LogState(),
	}
}
