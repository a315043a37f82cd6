package projector

import (
	"cmp"
	"crypto/sha256"
	"slices"
	"strconv"

	"github.com/parley-engine/parley/canon"
)

// referenceDigest is the state digest as it was first written, line by
// line through the hash, kept to check computeDigest against.
func (d *Deliberation) referenceDigest() canon.Digest {
	h := sha256.New()
	line := func(parts ...string) {
		for i, p := range parts {
			if i > 0 {
				h.Write([]byte{' '})
			}
			h.Write([]byte(p))
		}
		h.Write([]byte{'\n'})
	}
	u := func(seq uint64) string { return strconv.FormatUint(d.Ordinal(seq), 10) }
	q := strconv.Quote
	line("parley-state-v2")
	line("deliberation", q(d.Title), string(d.Status), u(d.OpenedAt), u(d.Position), strconv.Itoa(d.Round))
	if d.Charter != nil {
		line("participants", q(string(mustJSON(d.Charter.Participants))))
		line("limits", q(string(d.Charter.Limits)), "policy", q(string(d.Charter.Policy)))
		if len(d.Charter.Terminators) > 0 {
			line("terminators", q(string(mustJSON(d.Charter.Terminators))))
		}
		if d.Charter.Principal != "" {
			line("principal", q(d.Charter.Principal))
		}
		if len(d.Charter.Keys) > 0 {
			line("keys", q(string(mustJSON(d.Charter.Keys))), strconv.FormatBool(d.Charter.RequireSignatures))
		}
	}
	ids := d.ids()
	order := make([]int32, len(d.nodes))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return cmp.Compare(d.nodes[a].seq, d.nodes[b].seq) })
	for _, i := range order {
		n := &d.nodes[i]
		line("artifact", ids[i].String(), u(n.seq), d.parts[n.part], string(typeOf[n.typ]))
	}
	for _, id := range d.OpenBlockingObjections() {
		line("open", id.String())
	}
	for _, r := range d.rejects.list() {
		line("rejection", u(r.Position), r.Code, r.ArtifactID, r.Participant)
	}
	codes := make([]string, 0, len(d.rejCodes))
	for c := range d.rejCodes {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	for _, c := range codes {
		line("rejected", c, strconv.Itoa(d.rejCodes[c]))
	}
	for _, l := range d.late.list() {
		line("late", u(l.Position), l.ArtifactID, l.Participant)
	}
	line("totals", strconv.Itoa(d.rejTotal), strconv.Itoa(d.lateN))
	var out canon.Digest
	h.Sum(out[:0])
	return out
}
