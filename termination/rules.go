package termination

import (
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
)

// Rules are the supervisor's rules as the projector applies them to what
// it admits (projector.Rules): an artifact published as _supervisor enters
// the record only if the rules call for it at its position, and a
// terminator's exhausted or deadlock TERMINATION only if a condition that
// justifies it holds. The engine, the audit and every other fold of the
// stream use the same Rules, so that they agree on the state.
type Rules struct{}

var _ projector.Rules = Rules{}

// Emissions returns the ids of every artifact the supervisor may publish
// for d at time now: what Decide returns, and the FAILURE and TERMINATION
// answering each exhaustion or deadlock condition that holds. (Decide
// answers the first condition only; a supervisor that judged a moment
// before the message's stream time may have seen another one first, which
// holds as well.)
func (Rules) Emissions(d *projector.Deliberation, now time.Time) []canon.Digest {
	var ids []canon.Digest
	for _, e := range Decide(d, now) {
		ids = append(ids, e.Artifact.ID)
	}
	if d.Status == api.StatusOpen {
		for _, e := range dueEnds(d, now) {
			for _, em := range ending(d, e) {
				ids = append(ids, em.Artifact.ID)
			}
		}
	}
	return ids
}

// Ends returns the terminal states (exhausted, deadlock) that a condition
// holding for d at time now justifies.
func (Rules) Ends(d *projector.Deliberation, now time.Time) []events.TerminationState {
	if d.Status != api.StatusOpen {
		return nil
	}
	var out []events.TerminationState
	for _, e := range dueEnds(d, now) {
		out = append(out, e.state)
	}
	return out
}
