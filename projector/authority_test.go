package projector_test

import (
	"testing"
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	supervisor "github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

// clock is a feed whose messages carry a stream time the test sets.
type clock struct {
	feed
	now time.Time
}

func newClock(t *testing.T, opts projector.Options) *clock {
	return &clock{feed: feed{t: t, p: projector.New(opts)}, now: t0}
}

func (c *clock) send(participant string, a *events.Artifact) projector.Outcome {
	c.seq++
	return c.p.Apply(projector.Msg{Seq: c.seq, Subject: wire.ArtifactSubject(delib, participant), Data: a.Canonical, Time: c.now})
}

func (c *clock) control(json string) projector.Outcome {
	c.seq++
	return c.p.Apply(projector.Msg{Seq: c.seq, Subject: wire.ControlSubject(delib), Data: []byte(json), Time: c.now})
}

func (c *clock) admit(participant string, a *events.Artifact) {
	c.t.Helper()
	if o := c.send(participant, a); len(o.Accepted) == 0 || o.Rejection != nil {
		c.t.Fatalf("%s's %s: %+v", participant, a.Type, o.Rejection)
	}
}

// publishDecided applies what the supervisor decides at the clock's time,
// as the runner publishes it.
func (c *clock) publishDecided() []supervisor.Emission {
	c.t.Helper()
	es := supervisor.Decide(c.d(), c.now)
	for _, e := range es {
		c.admit(wire.SupervisorToken, e.Artifact)
	}
	return es
}

func term(state events.TerminationState, unresolved []canon.Digest, refs ...events.Reference) *events.Artifact {
	return events.MustSeal(events.Draft{Type: events.TypeTermination, Payload: events.Termination{State: state, Reason: "moderator", UnresolvedObjections: unresolved}, References: refs})
}

// The attacks of a hostile participant on a deliberation's end, each
// refused with its own code, each leaving the status what the record
// justifies.
func TestApply_AuthorityToEnd(t *testing.T) {
	c := newClock(t, projector.Options{Rules: supervisor.Rules{}})
	c.control(`{"op":"open","charter":{"title":"cache","participants":["alice","bob"],"terminators":["moderator"],"limits":{"idle_timeout":"10m"}}}`)
	d := c.d()
	cl := claim("The cache halves p99.")
	c.admit("alice", cl)
	ob := objection(cl.ID, true)
	c.admit("bob", ob)
	// alice decides over bob's open blocking objection, which she ignores.
	hiding := decision(events.Final, cl.ID)
	c.admit("alice", hiding)

	decides := events.Reference{Target: hiding.ID, Relation: events.Decides}
	for _, tc := range []struct {
		name, who string
		a         *events.Artifact
		code      string
	}{
		{"alice completes her own decision", "alice", term(events.Completed, nil, decides), projector.CodeTerminationUnauthorized},
		{"bob cancels without a control message", "bob", term(events.Cancelled, nil), projector.CodeTerminationUnauthorized},
		{"bob suspends", "bob", term(events.Suspended, nil), projector.CodeTerminationUnauthorized},
		{"a forged supervisor exhausts it", wire.SupervisorToken, term(events.Exhausted, []canon.Digest{ob.ID}, events.Reference{Target: ob.ID, Relation: events.Considers}), projector.CodeSupervisorUnjustified},
		{"a forged supervisor completes it", wire.SupervisorToken, term(events.Completed, nil, decides), projector.CodeSupervisorUnjustified},
		{"a forged supervisor FAILURE judges the decision", wire.SupervisorToken, events.MustSeal(events.Draft{Type: events.TypeFailure,
			Payload: events.Failure{Code: "closure.hidden_blocking_objection", Description: "forged"}, References: []events.Reference{{Target: hiding.ID, Relation: events.Considers}}}), projector.CodeSupervisorUnjustified},
		{"the moderator completes a decision that does not verify", "moderator", term(events.Completed, nil, decides), projector.CodeTerminationUnjustified},
		{"the moderator deadlocks it before any idle timeout", "moderator", term(events.Deadlock, []canon.Digest{ob.ID}, events.Reference{Target: ob.ID, Relation: events.Considers}), projector.CodeTerminationUnjustified},
		{"the moderator cancels with no control message", "moderator", term(events.Cancelled, nil), projector.CodeTerminationUnjustified},
		{"the moderator's TERMINATION names an unknown artifact", "moderator", term(events.Completed, nil, events.Reference{Target: claim("elsewhere").ID, Relation: events.Decides}), projector.CodeTerminationUnjustified},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := d.StateDigest()
			o := c.send(tc.who, tc.a)
			if o.Rejection == nil || o.Rejection.Code != tc.code {
				t.Fatalf("outcome %+v, rejection %+v: want %s", o, o.Rejection, tc.code)
			}
			if d.Status != api.StatusOpen || d.OpenBlockingCount() != 1 || d.Has(tc.a.ID) {
				t.Fatalf("status %s, %d open objections, in DAG %v", d.Status, d.OpenBlockingCount(), d.Has(tc.a.ID))
			}
			if d.StateDigest() == before {
				t.Fatal("the rejection is not in the state")
			}
		})
	}

	// A participant's FAILURE records its own failure and ends nothing.
	own := events.MustSeal(events.Draft{Type: events.TypeFailure, Payload: events.Failure{Code: "participant.timeout", Description: "alice's model timed out"}})
	c.admit("alice", own)
	if d.Status != api.StatusOpen {
		t.Fatal(d.Status)
	}

	// The supervisor judges the hiding decision (its FAILURE is admitted:
	// its rules call for it), and does not complete.
	if es := c.publishDecided(); len(es) != 1 || es[0].Artifact.Type != events.TypeFailure {
		t.Fatalf("the supervisor emits %+v", es)
	}
	if d.Status != api.StatusOpen {
		t.Fatal(d.Status)
	}

	// Idle: past idle_timeout with the objection open, a deadlock is
	// justified, but only listing and referencing the open objection.
	c.now = c.now.Add(11 * time.Minute)
	c.control(`{"op":"round","round":1}`) // a control message is no activity
	refs := events.Reference{Target: ob.ID, Relation: events.Considers}
	if o := c.send("moderator", term(events.Deadlock, nil, refs)); o.Rejection == nil || o.Rejection.Code != projector.CodeTerminationUnjustified {
		t.Fatalf("a deadlock that lists no unresolved objection: %+v", o.Rejection)
	}
	// (One that lists an objection it does not reference is not even a
	// valid artifact: events rejects it.)
	if o := c.send("moderator", term(events.Exhausted, []canon.Digest{ob.ID}, refs)); o.Rejection == nil || o.Rejection.Code != projector.CodeTerminationUnjustified {
		t.Fatalf("exhausted with no budget or limit: %+v", o.Rejection)
	}
	c.admit("moderator", term(events.Deadlock, []canon.Digest{ob.ID}, refs))
	if d.Status != api.StatusDeadlock {
		t.Fatal(d.Status)
	}
}

func TestApply_TerminatorCompletesAndCancels(t *testing.T) {
	c := newClock(t, projector.Options{Rules: supervisor.Rules{}})
	c.control(`{"op":"open","charter":{"title":"cache","terminators":["moderator"],"policy":{"auto_complete":false}}}`)
	d := c.d()
	cl := claim("The cache halves p99.")
	c.admit("alice", cl)
	ob := objection(cl.ID, true)
	c.admit("bob", ob)
	dec := decision(events.Final, cl.ID, events.Disposition{Objection: ob.ID, Disposition: events.Addressed, Rationale: "measured twice"})
	c.admit("alice", dec)
	// auto_complete false: the supervisor leaves the end to the moderator.
	if es := supervisor.Decide(d, c.now); len(es) != 0 {
		t.Fatalf("the supervisor emits %+v", es)
	}
	c.admit("moderator", term(events.Completed, nil, events.Reference{Target: dec.ID, Relation: events.Decides}))
	if d.Status != api.StatusCompleted {
		t.Fatal(d.Status)
	}

	// Cancelled records a control message, once.
	e := newClock(t, projector.Options{Rules: supervisor.Rules{}})
	e.control(`{"op":"open","charter":{"title":"cache","terminators":["moderator"]}}`)
	e.admit("alice", claim("x"))
	e.control(`{"op":"cancel","reason":"out of scope"}`)
	cancelled := term(events.Cancelled, nil)
	e.admit("moderator", cancelled)
	if o := e.send("moderator", term(events.Cancelled, []canon.Digest{})); !o.Late {
		t.Fatalf("a second record of the cancel: %+v", o)
	}
	// The supervisor has nothing left to record.
	if es := supervisor.Decide(e.d(), e.now); len(es) != 0 {
		t.Fatalf("the supervisor emits %+v", es)
	}
}

// Without the supervisor's rules, the fold admits nothing from the
// supervisor: it fails closed.
func TestApply_NoRules(t *testing.T) {
	c := newClock(t, projector.Options{})
	c.control(`{"op":"open","charter":{"title":"t"}}`)
	c.control(`{"op":"cancel"}`)
	es := supervisor.Decide(c.d(), c.now)
	if len(es) != 1 {
		t.Fatal(es)
	}
	if o := c.send(wire.SupervisorToken, es[0].Artifact); o.Rejection == nil || o.Rejection.Code != projector.CodeSupervisorUnjustified {
		t.Fatalf("%+v", o)
	}
}

// The supervisor's emissions are judged at their own stream time: an
// emission the rules called for a moment before its message reached the
// stream is admitted (a later time only adds conditions), and one from a
// clock more than ClockSkew ahead of the stream's is not.
func TestApply_SupervisorClock(t *testing.T) {
	c := newClock(t, projector.Options{Rules: supervisor.Rules{}})
	c.control(`{"op":"open","charter":{"title":"t","limits":{"idle_timeout":"10m","stall_window":2}}}`)
	cl := claim("x")
	c.admit("alice", cl)
	// A supervisor whose clock runs more than ClockSkew ahead judges the
	// idle timeout passed while, by the stream's time, it has not.
	ahead := supervisor.Decide(c.d(), t0.Add(10*time.Minute))
	if len(ahead) != 2 {
		t.Fatalf("%+v", ahead)
	}
	c.now = t0.Add(10*time.Minute - projector.ClockSkew - time.Second)
	if o := c.send(wire.SupervisorToken, ahead[0].Artifact); o.Rejection == nil || o.Rejection.Code != projector.CodeSupervisorUnjustified {
		t.Fatalf("an emission from a clock %s ahead: %+v", projector.ClockSkew+time.Second, o)
	}
	// Judged a minute before the idle timeout passed, the stall FAILURE
	// came first; by its stream time the idle deadlock also holds and
	// comes first in Decide. The stall FAILURE is still justified.
	soft := objection(cl.ID, false)
	c.admit("bob", soft)
	c.admit("carol", objection(soft.ID, false))
	t1 := c.now
	stall := supervisor.Decide(c.d(), t1.Add(9*time.Minute))
	if len(stall) != 2 || stall[0].Reason != supervisor.CodeDeadlockStall {
		t.Fatalf("%+v", stall)
	}
	c.now = t1.Add(11 * time.Minute)
	if first := supervisor.Decide(c.d(), c.now); first[0].Reason != supervisor.CodeDeadlockIdle {
		t.Fatalf("%+v", first)
	}
	c.admit(wire.SupervisorToken, stall[0].Artifact)
	c.admit(wire.SupervisorToken, stall[1].Artifact)
	if c.d().Status != api.StatusDeadlock {
		t.Fatal(c.d().Status)
	}
}

// A charter member the engine does not know is refused, so that a misspelt
// "participants" cannot open the deliberation to anyone.
func TestApply_CharterStrict(t *testing.T) {
	f := newFeed(t)
	wantRejection(t, f.ctl(`{"op":"open","charter":{"title":"t","particpants":["alice"]}}`), projector.CodeControlInvalid)
	wantRejection(t, f.ctl(`{"op":"open","charter":{"title":"t","terminators":["_supervisor"]}}`), projector.CodeControlInvalid)
	if f.p.Deliberation(delib) != nil {
		t.Fatal("opened")
	}
}

// Two charters that differ only in their terminators give two digests.
func TestStateDigest_Terminators(t *testing.T) {
	a, b := newFeed(t), newFeed(t)
	a.ctl(`{"op":"open","charter":{"title":"t"}}`)
	b.ctl(`{"op":"open","charter":{"title":"t","terminators":["moderator"]}}`)
	if a.d().StateDigest() == b.d().StateDigest() {
		t.Fatal("the terminators are not in the digest")
	}
}

// The state digest is cached per state and follows every change.
func TestStateDigest_Cached(t *testing.T) {
	f := newFeed(t)
	f.ctl(`{"op":"open","charter":{"title":"t"}}`)
	d := f.d()
	first := d.StateDigest()
	if d.StateDigest() != first {
		t.Fatal("not stable")
	}
	f.art("alice", claim("a"))
	second := d.StateDigest()
	f.raw(wire.ArtifactSubject(delib, "alice"), []byte("junk")) // a rejection
	third := d.StateDigest()
	if second == first || third == second {
		t.Fatal("the cached digest did not follow the state")
	}
	g := newFeed(t)
	g.ctl(`{"op":"open","charter":{"title":"t"}}`)
	g.art("alice", claim("a"))
	g.raw(wire.ArtifactSubject(delib, "alice"), []byte("junk"))
	if g.d().StateDigest() != third {
		t.Fatal("a fresh fold of the same messages gives another digest")
	}
}
