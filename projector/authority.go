package projector

import (
	"slices"
	"strings"
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/wire"
)

// Rules are the termination supervisor's rules, as the fold applies them
// (termination.Rules is the engine's). The fold cannot import the
// supervisor, which reads the fold's state, so the rules are an input, as
// the validator and the time are.
type Rules interface {
	// Emissions returns the ids of the artifacts the supervisor may
	// publish for d at time now.
	Emissions(d *Deliberation, now time.Time) []canon.Digest
	// Ends returns the terminal states (exhausted, deadlock) that a
	// breach or a stall holding for d at time now justifies.
	Ends(d *Deliberation, now time.Time) []events.TerminationState
}

// ClockSkew is how far the supervisor's clock may run ahead of the stream's:
// time-triggered conditions (deadline, idle_timeout) are judged at a
// message's stream time plus ClockSkew. It is part of the fold (the same
// stream always gives the same state), not a setting.
const ClockSkew = 5 * time.Second

// Codes of the rejections of artifacts that claim an authority the record
// does not give them.
const (
	// CodeSupervisorUnjustified: an artifact on _supervisor that the
	// supervisor's rules do not call for at its position.
	CodeSupervisorUnjustified = "supervisor.unjustified"
	// CodeTerminationUnauthorized: a TERMINATION from a participant that is
	// neither the supervisor nor one of the charter's terminators.
	CodeTerminationUnauthorized = "termination.unauthorized"
	// CodeTerminationUnjustified: a terminator's TERMINATION that the
	// record at its position does not justify.
	CodeTerminationUnjustified = "termination.unjustified"
)

// terminator reports whether the charter names participant as one who may
// end the deliberation.
func (d *Deliberation) terminator(participant string) bool {
	return d.Charter != nil && slices.Contains(d.Charter.Terminators, participant)
}

// authorize checks the authority of a: an artifact from the supervisor must
// be one its rules call for at this position, and a TERMINATION must come
// from the supervisor or a terminator and be justified by the record at its
// position. Both are judged at their own position, so every reference must
// already be in the DAG. It returns the rejection code and message, or "".
func (d *Deliberation) authorize(m Msg, a *events.Artifact, participant string) (string, string) {
	super := participant == wire.SupervisorToken
	if !super && a.Type != events.TypeTermination {
		return "", ""
	}
	if !super && !d.terminator(participant) {
		return CodeTerminationUnauthorized, participant + " may not end the deliberation: only the supervisor and the terminators the charter names publish a TERMINATION"
	}
	code := CodeTerminationUnjustified
	if super {
		code = CodeSupervisorUnjustified
	}
	for _, r := range a.References {
		if !d.index.has(d.nodeIDs, r.Target) {
			return code, "it references " + r.Target.String() + ", which is not in the deliberation: a " + string(a.Type) + " is judged at its own position"
		}
	}
	at := m.Time.Add(ClockSkew)
	if super {
		if d.opts.Rules == nil {
			return code, "the fold has no supervisor rules to judge it by"
		}
		if slices.Contains(d.opts.Rules.Emissions(d, at), a.ID) {
			return "", ""
		}
		return code, "the supervisor's rules do not call for this " + string(a.Type) + " at this position"
	}
	if msg := d.justify(a.TerminationPayload(), a, at); msg != "" {
		return code, msg
	}
	return "", ""
}

// justify checks a terminator's TERMINATION against the record; it returns
// why it is not justified, or "".
func (d *Deliberation) justify(t *events.Termination, a *events.Artifact, at time.Time) string {
	state := string(t.State)
	if t.State != events.Cancelled && t.State != events.Suspended && d.Status != api.StatusOpen {
		return "a " + state + " TERMINATION of a deliberation that is " + string(d.Status)
	}
	switch t.State {
	case events.Completed:
		var why []string
		for _, r := range a.References {
			if r.Relation != events.Decides {
				continue
			}
			n := d.nodes[d.node(r.Target)]
			if typeOf[n.typ] != events.TypeDecision || d.extras[n.extra].decision.Status != events.Final {
				why = append(why, r.Target.String()+" is not a final DECISION")
				continue
			}
			res := d.Verify(r.Target, 0, d.ClosureLimits())
			if res.OK {
				return ""
			}
			for _, f := range res.Findings {
				if f.Severity == closure.Error {
					why = append(why, r.Target.String()+": "+f.Code+" "+f.ArtifactID)
				}
			}
		}
		if len(why) == 0 {
			why = append(why, "it decides no final DECISION")
		}
		return "a completed TERMINATION must decide a final DECISION whose closure verifies: " + strings.Join(why, "; ")
	case events.Deadlock, events.Exhausted:
		if d.opts.Rules == nil || !slices.Contains(d.opts.Rules.Ends(d, at), t.State) {
			return "no breach or stall justifies " + state + " at this position"
		}
		open := d.OpenBlockingObjections()
		listed := slices.Clone(t.UnresolvedObjections)
		slices.SortFunc(listed, compareDigest)
		listed = slices.Compact(listed)
		if !slices.Equal(listed, open) {
			return "unresolved_objections must list exactly the blocking objections left unresolved (" + digests(open) + ")"
		}
		for _, o := range open {
			if !slices.ContainsFunc(a.References, func(r events.Reference) bool { return r.Target == o }) {
				return "it must reference every unresolved blocking objection; " + o.String() + " is not referenced"
			}
		}
		return ""
	case events.Cancelled:
		if d.Status != api.StatusCancelled || d.CancelledAt == 0 || d.Recorded(events.Cancelled) {
			return "no cancel control message is left to record"
		}
		return ""
	case events.Suspended:
		if d.Status != api.StatusSuspended || d.SuspendedAt == 0 {
			return "no suspend control message is left to record"
		}
		for _, id := range d.terms {
			n := d.nodes[d.node(id)]
			if n.seq > d.SuspendedAt && d.extras[n.extra].termination.State == events.Suspended {
				return "the suspension is already recorded"
			}
		}
		return ""
	}
	return "unknown state " + state
}

func digests(ids []canon.Digest) string {
	if len(ids) == 0 {
		return "none"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = id.String()
	}
	return strings.Join(s, ", ")
}
