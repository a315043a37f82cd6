package projector

import (
	"cmp"
	"errors"
	"slices"
	"strconv"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/wire"
)

// Binding moments on the record (docs/BINDING.md). A binding moment is a
// provisional DECISION carrying a well-formed seed 002 envelope in its
// parley.binding extension; every such DECISION of a deliberation that
// carries the same envelope (the same digest) asks the same question, and
// one resolution resolves them all. A provisional DECISION carrying a
// malformed envelope asks all the same, and can be neither resolved nor
// decided. Only the deliberation's principal (the
// charter's "principal", wire.PrincipalToken by default) resolves one: its
// artifact carrying a parley.binding_resolution extension, shaped as
// binding.Record shapes its kind. Anything else that would answer for the
// principal is refused here, in the fold, so that the live engine, the
// audit and an export's trailer agree on what was resolved and by whom.
// The rule keeps no state of its own: what it reads (the charter and the
// DAG) is what snapshots restore and state_digest covers.

// Codes of the rejections of what would resolve a binding moment on the
// principal's behalf.
const (
	// CodeBindingNotPrincipal: an artifact carrying a binding resolution,
	// or one that decides a DECISION that asks the principal, from anyone
	// but the deliberation's principal.
	CodeBindingNotPrincipal = "binding.not_principal"
	// CodeBindingInvalid: the principal's artifact does not resolve an
	// open binding moment as its record says (a malformed record, a
	// reference not in the DAG, the wrong artifact for the kind, no
	// binding moment with that envelope among its references, an option
	// out of range or with another action digest), or decides a DECISION
	// that asks without resolving it.
	CodeBindingInvalid = "binding.invalid_resolution"
	// CodeBindingResolved: the principal's resolution of a binding moment
	// already resolved.
	CodeBindingResolved = "binding.already_resolved"
)

// Principal returns the participant whose resolutions of the
// deliberation's binding moments count: the charter's principal, or
// wire.PrincipalToken when the charter names none.
func (d *Deliberation) Principal() string {
	if d.Charter != nil && d.Charter.Principal != "" {
		return d.Charter.Principal
	}
	return wire.PrincipalToken
}

// checkPrincipal checks the principal charter ch names: a participant token,
// and one of the participants when the charter lists them (the fold admits
// no artifact from anyone else).
func checkPrincipal(ch *api.Charter) error {
	switch {
	case ch.Principal == "":
	case !wire.ValidToken(ch.Principal):
		return errors.New("charter: principal token " + strconv.Quote(ch.Principal))
	case len(ch.Participants) > 0 && !slices.Contains(ch.Participants, ch.Principal):
		return errors.New("charter: the principal " + ch.Principal + " is not one of the participants")
	}
	return nil
}

// bindingRule refuses what would resolve a binding moment on its
// principal's behalf (docs/BINDING.md, "Only the principal resolves"):
//
//  1. an artifact carrying a parley.binding_resolution extension from
//     anyone but the principal: CodeBindingNotPrincipal;
//  2. an artifact that decides a DECISION that asks the principal (asks:
//     provisional, carrying a parley.binding envelope, well-formed or
//     not) from anyone but the principal:
//     CodeBindingNotPrincipal; from the principal, unless it is that
//     moment's option resolution: CodeBindingInvalid (so a malformed ask
//     is decided by nobody);
//  3. the principal's artifact carrying a resolution that does not resolve
//     an open binding moment it references, as binding.Record would have
//     built it: CodeBindingInvalid, or CodeBindingResolved when the
//     moment is resolved already.
//
// Nothing pre-empts a moment by answering before the question: the fold
// admits no artifact whose references are not in the DAG yet
// (reference.unavailable), so every artifact is judged here against the
// DECISIONs it decides.
func (d *Deliberation) bindingRule(a *events.Artifact, participant string) (code, msg string) {
	if participant == wire.SupervisorToken {
		return "", "" // authorize admits only what the supervisor's rules call for
	}
	principal := d.Principal()
	_, resolves := a.Extensions[binding.ExtResolution]
	if resolves && participant != principal {
		return CodeBindingNotPrincipal, participant + " may not resolve a binding moment: only the deliberation's principal (" + principal + ") does"
	}
	var rec binding.ResolutionRecord
	if resolves {
		var err error
		if rec, err = binding.ParseRecord(a.Extensions[binding.ExtResolution]); err != nil {
			return CodeBindingInvalid, err.Error()
		}
	}
	for _, r := range a.References {
		if r.Relation != events.Decides {
			continue
		}
		raw, ok := d.askRaw(r.Target)
		if !ok {
			continue
		}
		if participant != principal {
			return CodeBindingNotPrincipal, notPrincipal(participant, principal, r.Target)
		}
		env, err := binding.ParseEnvelope(raw)
		switch {
		case err != nil:
			return CodeBindingInvalid, "the principal decides " + r.Target.String() + ", whose envelope is malformed: an ask that cannot be resolved is decided by nobody (ask again)"
		case !resolves || rec.Resolution != binding.KindOption || rec.EnvelopeDigest != env.Digest.String():
			return CodeBindingInvalid, unresolved(r.Target)
		}
	}
	if resolves {
		return d.checkResolution(a, rec)
	}
	return "", ""
}

func notPrincipal(participant, principal string, decision canon.Digest) string {
	return participant + " may not decide " + decision.String() + ", which asks the deliberation's principal: only the principal (" + principal + ") resolves it"
}

func unresolved(decision canon.Digest) string {
	return "the principal decides " + decision.String() + ", which asks it, without resolving its binding moment: only an option resolution of its envelope decides it"
}

// resolutionShape is the artifact binding.Record publishes for each kind:
// its type, and the relation by which it references the moment's DECISION.
var resolutionShape = map[binding.Kind]struct {
	typ events.Type
	rel events.Relation
}{
	binding.KindOption:   {events.TypeDecision, events.Decides},
	binding.KindAnswer:   {events.TypeClaim, events.Considers},
	binding.KindQuestion: {events.TypeObjection, events.ObjectsTo},
	binding.KindDeclined: {events.TypeClaim, events.Considers},
}

// checkResolution checks the principal's artifact a, carrying the
// well-formed record rec, against the moment it names.
func (d *Deliberation) checkResolution(a *events.Artifact, rec binding.ResolutionRecord) (string, string) {
	shape := resolutionShape[rec.Resolution]
	switch p := a.Payload.(type) {
	case *events.Decision:
		if p.Status != events.Final {
			return CodeBindingInvalid, "an option resolution is a final DECISION, not a provisional one"
		}
	case *events.Objection:
		if !p.Blocking {
			return CodeBindingInvalid, "a question resolution is a blocking OBJECTION"
		}
	}
	if a.Type != shape.typ {
		return CodeBindingInvalid, "a " + string(rec.Resolution) + " resolution is a " + string(shape.typ) + ", not a " + string(a.Type)
	}
	var env *binding.Envelope
	for _, r := range a.References {
		if !d.index.has(d.nodeIDs, r.Target) {
			return CodeBindingInvalid, "a resolution answers a binding moment on the record: " + r.Target.String() + " is not in the deliberation"
		}
		if r.Relation == shape.rel && env == nil {
			if e := d.askOf(r.Target); e != nil && e.Digest.String() == rec.EnvelopeDigest {
				env = e
			}
		}
	}
	if env == nil {
		return CodeBindingInvalid, "the resolution does not " + string(shape.rel) + " a provisional DECISION carrying envelope " + rec.EnvelopeDigest
	}
	if by, ok := d.resolvedIn(rec.EnvelopeDigest); ok {
		return CodeBindingResolved, "envelope " + rec.EnvelopeDigest + " was resolved already, in " + by.String()
	}
	if rec.Resolution == binding.KindOption {
		opts := env.Question.Options
		if *rec.OptionIdx >= len(opts) {
			return CodeBindingInvalid, "option_idx " + strconv.Itoa(*rec.OptionIdx) + " is out of range for " + strconv.Itoa(len(opts)) + " options"
		}
		if opts[*rec.OptionIdx].ActionDigest != rec.ActionDigest {
			return CodeBindingInvalid, "action_digest " + rec.ActionDigest + " is not option " + strconv.Itoa(*rec.OptionIdx) + "'s"
		}
	}
	return "", ""
}

// askRaw returns the parley.binding value of id when it is a DECISION in
// the DAG that asks the principal: provisional, carrying a parley.binding
// extension, well-formed or not (no parse: what refuses a forgery costs a
// lookup, not an envelope's parse).
func (d *Deliberation) askRaw(id canon.Digest) ([]byte, bool) {
	if i, ok := d.index.get(d.nodeIDs, id); ok {
		n := &d.nodes[i]
		if typeOf[n.typ] != events.TypeDecision || n.extra < 0 {
			return nil, false
		}
		ex := &d.extras[n.extra]
		raw, ok := ex.extensions[binding.ExtEnvelope]
		if !ok || ex.decision == nil || ex.decision.Status != events.Provisional {
			return nil, false
		}
		return raw, true
	}
	return nil, false
}

// askOf returns the envelope of id when it is a binding moment's DECISION
// in the DAG (it asks, with a well-formed envelope); nil otherwise.
func (d *Deliberation) askOf(id canon.Digest) *binding.Envelope {
	raw, ok := d.askRaw(id)
	if !ok {
		return nil
	}
	env, err := binding.ParseEnvelope(raw)
	if err != nil {
		return nil
	}
	return env
}

// resolvedIn returns the principal's artifact that resolved the envelope
// whose digest is envelope, if any.
func (d *Deliberation) resolvedIn(envelope string) (canon.Digest, bool) {
	var in canon.Digest
	found := false
	d.resolutions(func(id canon.Digest, rec binding.ResolutionRecord) bool {
		if rec.EnvelopeDigest == envelope {
			in, found = id, true
		}
		return !found
	})
	return in, found
}

// resolutions calls fn, in order of admission, for each of the principal's
// artifacts in the DAG that carries a resolution record, until fn returns
// false. It scans the DAG: only the principal's resolutions and the
// listing ask.
func (d *Deliberation) resolutions(fn func(canon.Digest, binding.ResolutionRecord) bool) {
	part, ok := d.partIdx[d.Principal()]
	if !ok {
		return
	}
	for i := range d.nodes {
		n := &d.nodes[i]
		if n.part != part || n.extra < 0 {
			continue
		}
		if raw, ok := d.extras[n.extra].extensions[binding.ExtResolution]; ok {
			if rec, err := binding.ParseRecord(raw); err == nil && !fn(d.nodeIDs[i], rec) {
				return
			}
		}
	}
}

// BindingMoments returns the deliberation's binding moments in stream
// order: every DECISION carrying a parley.binding extension, open or
// resolved when its envelope is well-formed (one per envelope: a later
// DECISION carrying the same envelope asks the same question), malformed
// with the findings otherwise (a final DECISION cannot ask). A moment is
// resolved only by the principal's artifact the fold admitted.
func (d *Deliberation) BindingMoments() []binding.Moment {
	principal := d.Principal()
	out := []binding.Moment{}
	for _, id := range d.decs {
		i, _ := d.index.get(d.nodeIDs, id)
		n := &d.nodes[i]
		ex := &d.extras[n.extra]
		raw, ok := ex.extensions[binding.ExtEnvelope]
		if !ok {
			continue
		}
		m := binding.Moment{Decision: id, Decider: d.parts[n.part], Principal: principal, Position: n.seq}
		if ex.decision.Status != events.Provisional {
			m.Status = "malformed"
			m.Findings = []binding.Finding{{Code: "binding.not_provisional", Message: "a binding moment asks before deciding: the DECISION must be provisional"}}
			out = append(out, m)
			continue
		}
		var mal *binding.Malformed
		env, err := binding.ParseEnvelope(raw)
		switch {
		case errors.As(err, &mal):
			m.Status, m.Findings = "malformed", mal.Findings
		case err != nil:
			m.Status, m.Findings = "malformed", []binding.Finding{{Code: binding.CodeProfile, Message: err.Error()}}
		default:
			m.Status, m.EnvelopeDigest, m.Envelope, m.Suppressed = "open", env.Digest.String(), env.Canonical, env.Suppressed()
		}
		out = append(out, m)
	}
	slices.SortStableFunc(out, func(x, y binding.Moment) int { return cmp.Compare(x.Position, y.Position) })
	seen := map[string]bool{}
	out = slices.DeleteFunc(out, func(m binding.Moment) bool {
		if m.EnvelopeDigest == "" {
			return false
		}
		dup := seen[m.EnvelopeDigest]
		seen[m.EnvelopeDigest] = true
		return dup
	})
	open := map[string]int{}
	for i, m := range out {
		if m.Status == "open" {
			open[m.EnvelopeDigest] = i
		}
	}
	d.resolutions(func(id canon.Digest, rec binding.ResolutionRecord) bool {
		if i, ok := open[rec.EnvelopeDigest]; ok {
			delete(open, rec.EnvelopeDigest) // the fold admits one resolution a moment
			m := &out[i]
			m.Status, m.Resolution, m.ResolvedBy, m.ResolvedIn = "resolved", &rec, principal, &id
		}
		return len(open) > 0
	})
	return out
}
