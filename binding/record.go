package binding

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
)

// Extension names on artifacts (parley's own extensions are
// parley.*).
const (
	// ExtEnvelope on a provisional DECISION carries the envelope of the
	// binding moment the decider asks its principal to resolve.
	ExtEnvelope = "parley.binding"
	// ExtResolution on the principal's artifact records what it resolves:
	// {"envelope_digest", "resolution", "option_idx"?, "action_digest"?}.
	ExtResolution = "parley.binding_resolution"
)

// ErrNotBinding: the artifact is not a provisional DECISION carrying an
// envelope.
var ErrNotBinding = errors.New("binding: not a provisional DECISION carrying a parley.binding envelope")

// EnvelopeOf returns the envelope a provisional DECISION carries in its
// parley.binding extension: ErrNotBinding when it carries none, a
// *Malformed error when the envelope is malformed.
func EnvelopeOf(a *events.Artifact) (*Envelope, error) {
	raw, ok := a.Extensions[ExtEnvelope]
	if !ok || a.Type != events.TypeDecision {
		return nil, ErrNotBinding
	}
	if d, ok := a.Payload.(*events.Decision); !ok || d.Status != events.Provisional {
		return nil, fmt.Errorf("%w (a binding moment asks before deciding: the DECISION must be provisional)", ErrNotBinding)
	}
	return ParseEnvelope(raw)
}

// ResolutionRecord is the value of the parley.binding_resolution extension.
type ResolutionRecord struct {
	EnvelopeDigest string `json:"envelope_digest"`
	Resolution     Kind   `json:"resolution"`
	OptionIdx      *int   `json:"option_idx,omitempty"`
	ActionDigest   string `json:"action_digest,omitempty"`
}

// ResolutionOf returns the resolution record an artifact carries, if any
// and well-formed (ParseRecord).
func ResolutionOf(a *events.Artifact) (ResolutionRecord, bool) {
	raw, ok := a.Extensions[ExtResolution]
	if !ok {
		return ResolutionRecord{}, false
	}
	r, err := ParseRecord(raw)
	return r, err == nil
}

// ParseRecord reads the value of a parley.binding_resolution extension,
// strictly: exactly the members of its kind (envelope_digest and
// resolution always; option_idx and action_digest for an option, and only
// then), an envelope_digest and an action_digest in the form of §6.2, a
// resolution one of the four kinds. The record is what the projector
// checks a principal's artifact against (docs/BINDING.md), so nothing in
// it is repaired or ignored.
func ParseRecord(raw []byte) (ResolutionRecord, error) {
	var r ResolutionRecord
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return r, errors.New("binding: the resolution record is not a JSON object")
	}
	for k := range m {
		switch k {
		case "envelope_digest", "resolution", "option_idx", "action_digest":
		default:
			return r, fmt.Errorf("binding: the resolution record has a member it does not define: %q", clip(k))
		}
	}
	if json.Unmarshal(m["envelope_digest"], &r.EnvelopeDigest) != nil || !validDigest(r.EnvelopeDigest) {
		return r, errors.New("binding: the resolution record's envelope_digest is not \"sha256:\" and 64 lowercase hexadecimal characters")
	}
	if json.Unmarshal(m["resolution"], &r.Resolution) != nil {
		return r, errors.New("binding: the resolution record's resolution is not a string")
	}
	_, hasIdx := m["option_idx"]
	_, hasAction := m["action_digest"]
	switch r.Resolution {
	case KindOption:
		var i int
		if !hasIdx || json.Unmarshal(m["option_idx"], &i) != nil || i < 0 {
			return r, errors.New("binding: an option's resolution record needs option_idx, a non-negative integer")
		}
		if !hasAction || json.Unmarshal(m["action_digest"], &r.ActionDigest) != nil || !validDigest(r.ActionDigest) {
			return r, errors.New("binding: an option's resolution record needs the option's action_digest")
		}
		r.OptionIdx = &i
	case KindAnswer, KindQuestion, KindDeclined:
		if hasIdx || hasAction {
			return r, fmt.Errorf("binding: a %s resolution record has no option_idx nor action_digest", r.Resolution)
		}
	default:
		return r, fmt.Errorf("binding: the resolution record's resolution %q is not option, answer, question or declined", clip(string(r.Resolution)))
	}
	return r, nil
}

// Record maps a resolution of the envelope carried by the provisional
// DECISION decision onto the artifact the principal publishes:
//
//   - option: a final DECISION that decides the provisional one, with the
//     option's label as outcome and the provisional decision's objection
//     dispositions and unresolved issues (the final decision answers for
//     the same record), carrying the envelope digest, option and action
//     digest;
//   - answer: a CLAIM with the answer, which the decider must answer with
//     a new envelope;
//   - question: a blocking OBJECTION to the provisional decision (the
//     question is rejected; deliberation reopens);
//   - declined: a CLAIM that the principal declined, which considers the
//     decision; the deliberation then ends through the control message
//     DeclineControl returns (a participant cannot end a deliberation with
//     a TERMINATION of its own: only the record justifies an end, and a
//     cancelled one records a control message).
//
// r must have been verified against env (Verify or Tracker.Resolve).
func Record(decision *events.Artifact, env *Envelope, r *Resolution) (*events.Artifact, error) {
	if r.EnvelopeDigest != env.Digest {
		return nil, fmt.Errorf("binding: the resolution names %s, the decision carries %s", r.EnvelopeDigest, env.Digest)
	}
	prov, ok := decision.Payload.(*events.Decision)
	if !ok {
		return nil, ErrNotBinding
	}
	rec := ResolutionRecord{EnvelopeDigest: env.Digest.String(), Resolution: r.Kind}
	var d events.Draft
	switch r.Kind {
	case KindOption:
		if r.OptionIdx < 0 || r.OptionIdx >= len(env.Question.Options) {
			return nil, fmt.Errorf("binding: option_idx %d out of range", r.OptionIdx)
		}
		o := env.Question.Options[r.OptionIdx]
		i := r.OptionIdx
		rec.OptionIdx, rec.ActionDigest = &i, o.ActionDigest
		refs := []events.Reference{{Target: decision.ID, Relation: events.Decides}}
		for _, disp := range prov.ObjectionDispositions {
			refs = append(refs, events.Reference{Target: disp.Objection, Relation: events.Considers})
		}
		refs = dedupe(refs)
		d = events.Draft{Type: events.TypeDecision, Payload: events.Decision{
			Outcome: o.Label, Status: events.Final,
			ObjectionDispositions: nonNil(prov.ObjectionDispositions), UnresolvedIssues: nonNilIssues(prov.UnresolvedIssues),
		}, References: refs}
	case KindAnswer:
		d = events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: r.Answer},
			References: []events.Reference{{Target: decision.ID, Relation: events.Considers}}}
	case KindQuestion:
		d = events.Draft{Type: events.TypeObjection, Payload: events.Objection{
			Statement: "The principal rejects the question as put: " + env.Question.Stem, Blocking: true},
			References: []events.Reference{{Target: decision.ID, Relation: events.ObjectsTo}}}
	case KindDeclined:
		d = events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The principal declined: " + env.Question.Stem},
			References: []events.Reference{{Target: decision.ID, Relation: events.Considers}}}
	default:
		return nil, fmt.Errorf("binding: resolution %q", r.Kind)
	}
	d.Extensions = map[string]any{ExtResolution: rec}
	return events.Seal(d)
}

func dedupe(refs []events.Reference) []events.Reference {
	seen := map[canon.Digest]bool{}
	out := refs[:0]
	for _, r := range refs {
		if !seen[r.Target] {
			seen[r.Target] = true
			out = append(out, r)
		}
	}
	return out
}

func nonNil(d []events.Disposition) []events.Disposition {
	if d == nil {
		return []events.Disposition{}
	}
	return d
}

func nonNilIssues(d []events.Issue) []events.Issue {
	if d == nil {
		return []events.Issue{}
	}
	return d
}

// DeclineControl is the control message that ends a deliberation whose
// principal declined the binding moment env (published right after the
// principal's artifact, in the same atomic batch): {"op":"cancel",
// "reason":"the principal declined the binding moment sha256:…"}.
func DeclineControl(env *Envelope) []byte {
	b, _ := json.Marshal(map[string]string{"op": "cancel", "reason": "the principal declined the binding moment " + env.Digest.String()})
	return b
}
