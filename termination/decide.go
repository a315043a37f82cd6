// Package termination is the termination supervisor's decision function
// (docs/AUTHORITY.md, docs/ARCHITECTURE.md): given a deliberation's projection and the time, the
// FAILURE and TERMINATION artifacts the engine must publish, as participant
// _supervisor.
//
// Decide is pure. Every emitted artifact is a function of the projection at
// its position, with no clock in its body, so a restarted or duplicated
// supervisor emits the same ids and the stream (Msg-Id) and the projector
// (permanent idempotency) keep one. The runner publishes each emission with
// an expected last sequence for parley.<deliberation>.>: if anything
// arrived after the position judged, the publish is refused and the
// deliberation is judged again, so a TERMINATION never races a resolving
// artifact. A FAILURE already published stays: a retry never erases one.
//
// The triggers, in order:
//
//   - a control message ended or suspended the deliberation: a TERMINATION
//     (cancelled, suspended) records it;
//   - a participant's artifact broke a per-artifact limit of the charter
//     (the projector rejected it): a FAILURE naming its message and the
//     limit;
//   - a final DECISION whose closure does not verify: a FAILURE naming the
//     finding, and the deliberation goes on; the first one that verifies
//     completes the deliberation (TERMINATION completed, deciding it), unless
//     the charter's policy says auto_complete false;
//   - exhaustion (max_artifacts, max_rounds, the token or cost budget, the
//     deadline): a FAILURE and a TERMINATION exhausted;
//   - deadlock (idle_timeout with a blocking objection unresolved or no
//     final decision, a stall_window of artifacts that add no claim,
//     revision or evidence and dispose of nothing, or a required
//     participant silent for idle_timeout): a FAILURE and a TERMINATION
//     deadlock.
//
// An exhausted or deadlock TERMINATION considers, and lists in
// unresolved_objections, every blocking objection left unresolved.
package termination

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
)

// Emission is an artifact the supervisor must publish, in order.
type Emission struct {
	Artifact *events.Artifact
	Reason   string // the dotted code that caused it
}

// Codes of the supervisor's FAILUREs (beside closure finding codes and the
// projector's limit.* codes).
const (
	CodeExhaustedArtifacts = "exhausted.artifacts"
	CodeExhaustedRounds    = "exhausted.rounds"
	CodeExhaustedBudget    = "exhausted.budget"
	CodeExhaustedDeadline  = "exhausted.deadline"
	CodeDeadlockIdle       = "deadlock.idle"
	CodeDeadlockStall      = "deadlock.stall"
	CodeDeadlockSilent     = "deadlock.silent_participant"
)

// Codes lists the supervisor's own FAILURE codes (docs/ERRORS.md).
var Codes = []string{CodeExhaustedArtifacts, CodeExhaustedRounds, CodeExhaustedBudget, CodeExhaustedDeadline,
	CodeDeadlockIdle, CodeDeadlockStall, CodeDeadlockSilent}

// Decide returns what the supervisor must publish for d at time now, in
// order; nothing when all is said.
func Decide(d *projector.Deliberation, now time.Time) []Emission {
	var out []Emission
	// Messages are named by their ordinal among the deliberation's, never
	// by stream position, so that an emission's id is the same wherever
	// the deliberation is replayed or imported.
	msg := func(seq uint64) string { return "message " + u(d.Ordinal(seq)) }
	switch {
	case d.Status == api.StatusCancelled && d.CancelledAt > 0:
		if !d.Recorded(events.Cancelled) {
			reason := "cancelled by the control " + msg(d.CancelledAt)
			if d.CancelReason != "" {
				reason += ": " + d.CancelReason
			}
			out = append(out, emit(d, "control.cancel", events.Draft{Type: events.TypeTermination,
				Payload: events.Termination{State: events.Cancelled, Reason: reason}}))
		}
		return out
	case d.Status == api.StatusSuspended:
		if d.SuspendedAt > 0 {
			t := termDraft(events.Suspended, "suspended by the control "+msg(d.SuspendedAt), nil)
			if a := seal(t); !d.Has(a.ID) {
				out = append(out, Emission{a, "control.suspend"})
			}
		}
		return out
	case d.Status != api.StatusOpen:
		return nil
	}
	pol := d.Policy()

	// Per-artifact limit breaches, every one kept and not yet answered
	// (however many rejections came after it; the fold keeps the oldest
	// projector.MaxBreaches unanswered).
	for _, r := range d.Breaches() {
		if d.Answered(r.Position) {
			continue
		}
		f := failure(r.Code, fmt.Sprintf("the artifact in %s from %s broke a limit of the charter: %s", msg(r.Position), r.Participant, r.Message),
			map[string]any{projector.MessageExtension: d.Ordinal(r.Position)}, nil)
		if e := emitNew(d, r.Code, f); e != nil {
			out = append(out, *e)
		}
	}

	// Final decisions, in stream order: failures, or completion.
	for _, id := range d.Decisions() {
		n, _ := d.Node(id)
		if n.Decision.Status != events.Final || d.Judged(id) {
			continue
		}
		res := d.Verify(id, 0, d.ClosureLimits())
		if res.OK {
			if pol.Complete() {
				out = append(out, emit(d, "completed", termDraft(events.Completed, "the final decision in "+msg(n.Seq)+" verifies",
					[]events.Reference{{Target: id, Relation: events.Decides}})))
				return out
			}
			continue
		}
		code, desc := summarize(res)
		f := failure(code, "the final decision "+id.String()+" in "+msg(n.Seq)+" does not verify: "+desc, nil,
			[]events.Reference{{Target: id, Relation: events.Considers}})
		if e := emitNew(d, code, f); e != nil {
			out = append(out, *e)
		}
	}

	// Exhaustion, then deadlock.
	ends := dueEnds(d, now)
	if len(ends) == 0 {
		return out
	}
	return append(out, ending(d, ends[0])...)
}

// end is a breach or stall that ends a deliberation.
type end struct {
	state events.TerminationState
	code  string
	why   string
}

// ending returns the FAILURE (unless the deliberation has it) and the
// TERMINATION that answer e.
func ending(d *projector.Deliberation, e end) []Emission {
	var out []Emission
	open := d.OpenBlockingObjections()
	// The FAILURE's body depends only on the condition (never on the
	// position judged, which its own publication moves), so a supervisor
	// that restarts between the FAILURE and the TERMINATION finds it.
	f := failure(e.code, e.why, nil, nil)
	if ex := emitNew(d, e.code, f); ex != nil {
		out = append(out, *ex)
	}
	fa := seal(f)
	refs := []events.Reference{{Target: fa.ID, Relation: events.Considers}}
	for _, o := range open {
		refs = append(refs, events.Reference{Target: o, Relation: events.Considers})
	}
	t := termDraft(e.state, e.code+": "+e.why, refs)
	t.Payload = events.Termination{State: e.state, Reason: e.code + ": " + e.why, UnresolvedObjections: open}
	return append(out, emit(d, e.code, t))
}

// dueEnds returns, in order of precedence, every exhaustion and deadlock
// condition that holds for an open deliberation d at time now.
func dueEnds(d *projector.Deliberation, now time.Time) []end {
	lim, pol := d.Limits(), d.Policy()
	msg := func(seq uint64) string { return "message " + u(d.Ordinal(seq)) }
	var ends []end
	if lim.MaxArtifacts > 0 && d.ParticipantArtifacts() >= lim.MaxArtifacts {
		ends = append(ends, end{events.Exhausted, CodeExhaustedArtifacts, "max_artifacts " + strconv.Itoa(lim.MaxArtifacts) + " reached"})
	}
	if lim.MaxRounds > 0 && d.Round > lim.MaxRounds {
		ends = append(ends, end{events.Exhausted, CodeExhaustedRounds, "round " + strconv.Itoa(d.Round) + " announced beyond max_rounds " + strconv.Itoa(lim.MaxRounds)})
	}
	if lim.BudgetTokens > 0 && d.Tokens >= lim.BudgetTokens {
		ends = append(ends, end{events.Exhausted, CodeExhaustedBudget, "budget_tokens " + i64(lim.BudgetTokens) + " used up at " + msg(d.LastActivityAt)})
	}
	if lim.BudgetCostUSDMicros > 0 && d.CostUSDMicros >= lim.BudgetCostUSDMicros {
		ends = append(ends, end{events.Exhausted, CodeExhaustedBudget, "budget_cost_usd_micros " + i64(lim.BudgetCostUSDMicros) + " used up at " + msg(d.LastActivityAt)})
	}
	if dl := lim.DeadlineTime(); !dl.IsZero() && !now.Before(dl) {
		ends = append(ends, end{events.Exhausted, CodeExhaustedDeadline, "the deadline " + lim.Deadline + " passed"})
	}
	openN := d.OpenBlockingCount()
	if idle := lim.Idle(); idle > 0 && now.Sub(d.LastActivity) >= idle && (openN > 0 || !d.HasFinalDecision()) {
		why := "no accepted artifact after " + msg(d.LastActivityAt) + " for idle_timeout " + lim.IdleTimeout
		if openN > 0 {
			why += ", with blocking objections unresolved"
		} else {
			why += ", and no final decision"
		}
		ends = append(ends, end{events.Deadlock, CodeDeadlockIdle, why})
	}
	if lim.StallWindow > 0 && d.Stall >= lim.StallWindow {
		ends = append(ends, end{events.Deadlock, CodeDeadlockStall, "the accepted artifacts up to " + msg(d.LastActivityAt) + " added no claim, revision or evidence and disposed of nothing for stall_window " + strconv.Itoa(lim.StallWindow)})
	}
	if idle := lim.Idle(); idle > 0 && now.Sub(d.OpenedTime) >= idle && len(pol.RequiredParticipants) > 0 {
		counts := d.ParticipantCounts()
		var silent []string
		for _, p := range pol.RequiredParticipants {
			if counts[p] == 0 {
				silent = append(silent, p)
			}
		}
		if len(silent) > 0 {
			ends = append(ends, end{events.Deadlock, CodeDeadlockSilent, "required participants silent for idle_timeout " + lim.IdleTimeout + ": " + strings.Join(silent, ", ")})
		}
	}
	return ends
}

// summarize names the first error finding and counts the rest.
func summarize(r closure.Result) (string, string) {
	code := ""
	var parts []string
	for _, f := range r.Findings {
		if f.Severity != closure.Error {
			continue
		}
		if code == "" {
			code = f.Code
		}
		parts = append(parts, f.Code+" "+f.ArtifactID)
	}
	return code, strconv.Itoa(len(parts)) + " findings: " + strings.Join(parts, "; ")
}

func failure(code, desc string, ext map[string]any, refs []events.Reference) events.Draft {
	return events.Draft{Type: events.TypeFailure, Payload: events.Failure{Code: code, Description: desc, Retryable: false},
		References: refs, Extensions: ext}
}

func termDraft(state events.TerminationState, reason string, refs []events.Reference) events.Draft {
	return events.Draft{Type: events.TypeTermination, Payload: events.Termination{State: state, Reason: reason}, References: refs}
}

func seal(d events.Draft) *events.Artifact {
	a, err := events.Seal(d)
	if err != nil {
		// The supervisor's drafts are built here; one that does not seal
		// is a bug in this package.
		panic(fmt.Sprintf("termination: sealing a %s: %v", d.Type, err))
	}
	return a
}

func emit(d *projector.Deliberation, reason string, dr events.Draft) Emission {
	return Emission{seal(dr), reason}
}

// emitNew seals dr and returns it unless the deliberation already has it.
func emitNew(d *projector.Deliberation, reason string, dr events.Draft) *Emission {
	a := seal(dr)
	if d.Has(a.ID) {
		return nil
	}
	return &Emission{a, reason}
}

func u(n uint64) string  { return strconv.FormatUint(n, 10) }
func i64(n int64) string { return strconv.FormatInt(n, 10) }
