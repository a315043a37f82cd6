package projector

import (
	"strconv"
	"time"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/provenance"
)

// Admissibility is the provenance judgement of one EVIDENCE whose class its
// deliberation's policy requires to be admissible (seed 003 §6, with the
// charter's floor and window, at the time the EVIDENCE reached the
// stream).
type Admissibility struct {
	Admissible bool                   `json:"admissible"`
	Class      events.ProvenanceClass `json:"provenance_class"`
	JudgedAt   time.Time              `json:"judged_at"`
	K          int                    `json:"k"`
	Window     string                 `json:"window"`
	// Problem says, in one line, why the EVIDENCE is inadmissible.
	Problem string `json:"problem,omitempty"`
	// Assertions are the per-assertion verdicts.
	Assertions []provenance.Verdict `json:"assertions"`
}

// judge applies the deliberation's provenance policy to an EVIDENCE, with
// the re-verification of its annotations made ahead of the fold
// (Msg.Reverified; nil: none re-queried); nil when the policy does not
// concern it. It reads no substrate.
func (d *Deliberation) judge(a *events.Artifact, at time.Time, reverified []provenance.Verification) *Admissibility {
	if !d.Judges(a) {
		return nil
	}
	pp := d.policy.Provenance
	ev := a.Payload.(*events.Evidence)
	params := pp.Params(at)
	adm := &Admissibility{Class: ev.ProvenanceClass, JudgedAt: at.UTC(), K: params.K, Window: params.Window.String(), Assertions: []provenance.Verdict{}}
	raw, ok := a.Extensions[provenance.Extension]
	if !ok {
		adm.Problem = "no " + provenance.Extension + " extension: " + string(ev.ProvenanceClass) + " evidence must say which substrates grounded it"
		return adm
	}
	set, err := provenance.ParseSet(raw)
	if err != nil {
		adm.Problem = err.Error()
		return adm
	}
	if len(set.Annotations) == 0 {
		adm.Problem = "the " + provenance.Extension + " extension annotates no assertion"
		return adm
	}
	adm.Assertions = provenance.AdmitReverified(set, params, reverified)
	adm.Admissible = true
	for _, v := range adm.Assertions {
		if v.Admitted {
			continue
		}
		adm.Admissible = false
		why := "not admitted"
		if n := len(v.Reasons); n > 0 {
			why = v.Reasons[n-1].Message + " (" + v.Reasons[n-1].Code + ")"
		}
		adm.Problem = "assertion " + strconv.Quote(v.Assertion) + ": " + why
		break
	}
	return adm
}

// Judges reports whether the deliberation's provenance policy concerns
// artifact a: an EVIDENCE of a class it requires, which the fold judges
// when it admits it, with the re-verification its message carries
// (Msg.Reverified). The policy is fixed when the deliberation opens, so a
// runner that applied the open may ask before the fold, to re-verify only
// what will be judged.
func (d *Deliberation) Judges(a *events.Artifact) bool {
	ev, ok := a.Payload.(*events.Evidence)
	return ok && d.policy.Provenance.Requires(ev.ProvenanceClass)
}

// noteAdmissibility records an EVIDENCE's judgement: an inadmissible one is
// indexed by the artifacts it supports, for the closure verifier.
func (d *Deliberation) noteAdmissibility(i int32, adm *Admissibility) {
	if adm == nil {
		return
	}
	d.judgedEv = append(d.judgedEv, i)
	if adm.Admissible {
		return
	}
	if d.inadm == nil {
		d.inadm = map[canon.Digest][]int32{}
	}
	n := &d.nodes[i]
	for _, r := range d.refs[n.refStart : n.refStart+n.refLen] {
		if relOf[r.rel] == events.Supports {
			d.inadm[r.target] = append(d.inadm[r.target], i)
		}
	}
}

// InadmissibleSupport implements closure.EvidenceGraph: it calls fn for
// each inadmissible EVIDENCE that supports id.
func (d *Deliberation) InadmissibleSupport(id canon.Digest, fn func(evidence canon.Digest, problem string)) {
	for _, i := range d.inadm[id] {
		n := &d.nodes[i]
		fn(d.nodeIDs[i], d.extras[n.extra].provenance.Problem)
	}
}

// Judgements calls fn for each EVIDENCE the provenance policy judged, in
// stream order; its Node's Provenance is the judgement.
func (d *Deliberation) Judgements(fn func(id canon.Digest, n Node)) {
	for _, i := range d.judgedEv {
		fn(d.nodeIDs[i], d.view(&d.nodes[i]))
	}
}

// Inadmissible returns the EVIDENCE the provenance policy holds
// inadmissible, in stream order.
func (d *Deliberation) Inadmissible() []canon.Digest {
	var out []canon.Digest
	for _, i := range d.judgedEv {
		if !d.extras[d.nodes[i].extra].provenance.Admissible {
			out = append(out, d.nodeIDs[i])
		}
	}
	return out
}
