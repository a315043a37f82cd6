package projector_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	supervisor "github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

const delib = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"

// feed applies messages with consecutive positions.
type feed struct {
	t   testing.TB
	p   *projector.Projection
	seq uint64
}

func newFeed(t testing.TB) *feed {
	return &feed{t: t, p: projector.New(projector.Options{Rules: supervisor.Rules{}})}
}

func (f *feed) raw(subject string, data []byte) projector.Outcome {
	f.seq++
	return f.p.Apply(projector.Msg{Seq: f.seq, Subject: subject, Data: data})
}

func (f *feed) ctl(json string) projector.Outcome {
	return f.raw(wire.ControlSubject(delib), []byte(json))
}

func (f *feed) art(participant string, a *events.Artifact) projector.Outcome {
	return f.raw(wire.ArtifactSubject(delib, participant), a.Canonical)
}

func (f *feed) d() *projector.Deliberation {
	d := f.p.Deliberation(delib)
	if d == nil {
		f.t.Fatal("no deliberation")
	}
	return d
}

func claim(s string) *events.Artifact {
	return events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: s}})
}

func objection(target canon.Digest, blocking bool) *events.Artifact {
	return events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "no: " + target.String()[:12], Blocking: blocking},
		References: []events.Reference{{Target: target, Relation: events.ObjectsTo}}})
}

func decision(status events.DecisionStatus, decides canon.Digest, disp ...events.Disposition) *events.Artifact {
	refs := []events.Reference{{Target: decides, Relation: events.Decides}}
	for _, d := range disp {
		refs = append(refs, events.Reference{Target: d.Objection, Relation: events.Considers})
	}
	return events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "adopt", Status: status, ObjectionDispositions: disp}, References: refs})
}

func termination(state events.TerminationState, refs ...events.Reference) *events.Artifact {
	return events.MustSeal(events.Draft{Type: events.TypeTermination, Payload: events.Termination{State: state}, References: refs})
}

func wantRejection(t *testing.T, o projector.Outcome, code string) {
	t.Helper()
	if o.Rejection == nil || o.Rejection.Code != code {
		t.Fatalf("outcome %+v, want rejection %s", o, code)
	}
}

func TestApply_Deliberation(t *testing.T) {
	f := newFeed(t)
	if o := f.ctl(`{"op":"open","charter":{"title":"Cache?"}}`); o.Control != "open" {
		t.Fatalf("%+v", o)
	}
	c := claim("The cache halves p99.")
	ev := events.MustSeal(events.Draft{Type: events.TypeEvidence, Payload: events.Evidence{Content: "41 ms", ProvenanceClass: events.TraceVerifiedObservation},
		References: []events.Reference{{Target: c.ID, Relation: events.Supports}}})
	ob := objection(c.ID, true)
	soft := objection(c.ID, false)
	for _, a := range []*events.Artifact{c, ev, ob, soft} {
		if o := f.art("alice", a); len(o.Accepted) != 1 {
			t.Fatalf("%s: %+v", a.Type, o)
		}
	}
	d := f.d()
	if got := d.OpenBlockingObjections(); len(got) != 1 || got[0] != ob.ID {
		t.Errorf("open objections %v", got)
	}
	if d.Artifacts() != 4 || d.Counts()[events.TypeObjection] != 2 || len(d.Tips()) != 3 {
		t.Errorf("artifacts %d counts %v tips %d", d.Artifacts(), d.Counts(), len(d.Tips()))
	}
	dec := decision(events.Final, c.ID, events.Disposition{Objection: ob.ID, Disposition: events.Addressed, Rationale: "measured twice"})
	if o := f.art("bob", dec); len(o.Accepted) != 1 {
		t.Fatalf("%+v", o)
	}
	if len(d.OpenBlockingObjections()) != 0 || len(d.Decisions()) != 1 {
		t.Errorf("after decision: open %v", d.OpenBlockingObjections())
	}
	if got := d.ParticipantCounts(); got["alice"] != 4 || got["bob"] != 1 {
		t.Errorf("participants %v", got)
	}
	// Only the supervisor's own TERMINATION, as its rules make it, ends
	// the deliberation.
	wantRejection(t, f.art("_supervisor", termination(events.Completed, events.Reference{Target: dec.ID, Relation: events.Decides})), projector.CodeSupervisorUnjustified)
	es := supervisor.Decide(d, time.Time{})
	if len(es) != 1 || es[0].Artifact.Type != events.TypeTermination {
		t.Fatalf("the supervisor decides %+v", es)
	}
	if o := f.art("_supervisor", es[0].Artifact); len(o.Accepted) != 1 {
		t.Fatalf("%+v", o.Rejection)
	}
	if d.Status != api.StatusCompleted {
		t.Fatalf("status %s", d.Status)
	}
	if o := f.art("alice", claim("too late")); !o.Late {
		t.Errorf("after completion: %+v", o)
	}
	if _, n := d.Late(); n != 1 || d.Position != f.seq {
		t.Errorf("late %d position %d", n, d.Position)
	}
	wantRejection(t, f.ctl(`{"op":"resume"}`), projector.CodeTerminal)
}

func TestApply_Rejections(t *testing.T) {
	f := newFeed(t)
	o := f.art("alice", claim("before open"))
	wantRejection(t, o, projector.CodeNotOpen)
	if _, n := f.p.Unrouted(); n != 1 {
		t.Errorf("unrouted %d", n)
	}
	wantRejection(t, f.raw("parley."+delib+".other", []byte(`{}`)), projector.CodeSubjectInvalid)
	wantRejection(t, f.raw("parley.not-a-uuid.ctl", []byte(`{"op":"open","charter":{}}`)), projector.CodeDeliberationInvalid)
	wantRejection(t, f.raw("parley."+strings.ToUpper(delib)+".ctl", []byte(`{"op":"open","charter":{}}`)), projector.CodeDeliberationInvalid)
	wantRejection(t, f.ctl(`{"op":"suspend"}`), projector.CodeNotOpen)
	wantRejection(t, f.ctl(`{"op":"open"}`), projector.CodeControlInvalid)
	f.ctl(`{"op":"open","charter":{"title":"t","participants":["alice","bob"],"terminators":["carol"]}}`)
	d := f.d()
	wantRejection(t, f.ctl(`{"op":"open","charter":{"title":"again"}}`), projector.CodeAlreadyOpen)
	wantRejection(t, f.ctl(`{"op":"dance"}`), projector.CodeControlInvalid)
	wantRejection(t, f.ctl(`not json`), projector.CodeControlInvalid)
	wantRejection(t, f.raw(wire.ArtifactSubject(delib, "alice"), []byte("\x00garbage")), "json.syntax")
	wantRejection(t, f.raw(wire.ArtifactSubject(delib, "alice"), []byte(`{"a":1}`)), "id.missing")
	wantRejection(t, f.raw(wire.ArtifactSubject(delib, "-bad"), claim("x").Canonical), projector.CodeParticipantInvalid)
	wantRejection(t, f.art("mallory", claim("not invited")), projector.CodeNotInCharter)
	c := claim("once")
	f.art("alice", c)
	wantRejection(t, f.art("bob", c), projector.CodeDuplicate)
	// An identical redelivery at an old position changes nothing.
	before := d.StateDigest()
	if o := f.p.Apply(projector.Msg{Seq: 1, Subject: wire.ArtifactSubject(delib, "alice"), Data: claim("old").Canonical}); o.Rejection != nil || len(o.Accepted) != 0 {
		t.Errorf("old position applied: %+v", o)
	}
	if d.StateDigest() != before {
		t.Error("digest changed on an old position")
	}
	// Relation applicability: objects-to a TERMINATION is inapplicable.
	// (A suspended TERMINATION is not terminal.)
	susp := termination(events.Suspended)
	wantRejection(t, f.art("alice", susp), projector.CodeTerminationUnauthorized)
	wantRejection(t, f.art("carol", susp), projector.CodeTerminationUnjustified) // no suspend to record
	if d.Status != api.StatusOpen {
		t.Fatalf("status %s", d.Status)
	}
	f.ctl(`{"op":"suspend"}`)
	if o := f.art("carol", susp); len(o.Accepted) != 1 {
		t.Fatalf("the terminator's record of the suspension: %+v", o.Rejection)
	}
	if d.Status != api.StatusSuspended {
		t.Fatalf("status %s", d.Status)
	}
	wantRejection(t, f.art("alice", claim("while suspended")), projector.CodeSuspended)
	f.ctl(`{"op":"resume"}`)
	wantRejection(t, f.art("bob", objection(susp.ID, true)), "relation.inapplicable")
	_, total, codes := d.Rejections()
	if total != 12 || codes[projector.CodeDuplicate] != 1 {
		t.Errorf("rejections %d %v", total, codes)
	}
	f.ctl(`{"op":"cancel","reason":"enough"}`)
	if d.Status != api.StatusCancelled || !d.Status.Terminal() {
		t.Errorf("status %s", d.Status)
	}
}

func TestApply_UnknownReference(t *testing.T) {
	f := newFeed(t)
	f.ctl(`{"op":"open","charter":{"title":"t"}}`)
	d := f.d()
	c := claim("later parent")
	ob := objection(c.ID, true)
	// Nothing is held for what comes later: the objection is refused at
	// its own position, and the claim's arrival does not bring it back.
	wantRejection(t, f.art("bob", ob), projector.CodeUnknownTarget)
	if o := f.art("alice", c); len(o.Accepted) != 1 || o.Accepted[0] != c.ID {
		t.Fatalf("%+v", o)
	}
	if d.Artifacts() != 1 || d.Has(ob.ID) || d.OpenBlockingCount() != 0 {
		t.Fatalf("artifacts %d, objection in the DAG %v, open %d", d.Artifacts(), d.Has(ob.ID), d.OpenBlockingCount())
	}
	// The same objection published again, now that its target is known,
	// is admitted at its new position.
	if o := f.art("bob", ob); len(o.Accepted) != 1 {
		t.Fatalf("%+v", o)
	}
	if d.PositionOf(ob.ID) != f.seq || d.OpenBlockingCount() != 1 {
		t.Errorf("objection at %d (want %d), open %d", d.PositionOf(ob.ID), f.seq, d.OpenBlockingCount())
	}
	// A refused artifact never counts against max_artifacts.
	g := newFeed(t)
	g.ctl(`{"op":"open","charter":{"title":"t","limits":{"max_artifacts":2}}}`)
	for i := range 9 {
		wantRejection(t, g.art("mallory", objection(claim(fmt.Sprint("absent ", i)).ID, true)), projector.CodeUnknownTarget)
	}
	for _, s := range []string{"one", "two"} {
		if o := g.art("alice", claim(s)); len(o.Accepted) != 1 {
			t.Fatalf("claim %s: %+v", s, o)
		}
	}
	if g.d().Status != api.StatusOpen || g.d().ParticipantArtifacts() != 2 {
		t.Errorf("status %s, participant artifacts %d", g.d().Status, g.d().ParticipantArtifacts())
	}
}

// A participant who computes what the supervisor will publish next (its
// emissions are deterministic) cannot make an objection enter the record
// after the end, at the position it was published at.
func TestApply_NoRetroactiveObjection(t *testing.T) {
	f := newFeed(t)
	f.ctl(`{"op":"open","charter":{"title":"t"}}`)
	d := f.d()
	c := claim("ship it")
	f.art("alice", c)
	dec := decision(events.Final, c.ID)
	// mallory computes the supervisor's TERMINATION for alice's coming
	// decision on a copy of the record, and objects to it in advance.
	shadow := newFeed(t)
	shadow.ctl(`{"op":"open","charter":{"title":"t"}}`)
	shadow.art("alice", c)
	shadow.raw(wire.ArtifactSubject(delib, "mallory"), []byte("{}")) // where the objection will land, before the decision
	shadow.art("alice", dec)
	coming := supervisor.Decide(shadow.d(), time.Time{})
	if len(coming) != 1 || coming[0].Artifact.Type != events.TypeTermination {
		t.Fatalf("the supervisor would emit %+v", coming)
	}
	veto := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "no", Blocking: true},
		References: []events.Reference{{Target: c.ID, Relation: events.ObjectsTo}, {Target: coming[0].Artifact.ID, Relation: events.Considers}}})
	wantRejection(t, f.art("mallory", veto), projector.CodeUnknownTarget)
	f.art("alice", dec)
	es := supervisor.Decide(d, time.Time{})
	if len(es) != 1 || es[0].Artifact.ID != coming[0].Artifact.ID {
		t.Fatalf("the supervisor decides %+v", es)
	}
	if o := f.art(wire.SupervisorToken, es[0].Artifact); len(o.Accepted) != 1 {
		t.Fatalf("%+v", o.Rejection)
	}
	// Published again now that its reference exists, the objection is
	// late: nothing enters an ended deliberation.
	if o := f.art("mallory", veto); !o.Late {
		t.Fatalf("after the end: %+v", o)
	}
	r := closure.Verify(d, dec.ID, d.PositionOf(dec.ID), closure.Limits{})
	if d.Status != api.StatusCompleted || !r.OK || d.OpenBlockingCount() != 0 {
		t.Errorf("status %s, decision verifies %v (%+v), open %d", d.Status, r.OK, r.Findings, d.OpenBlockingCount())
	}
}

func TestStateDigest_Deterministic(t *testing.T) {
	build := func(n int) *projector.Deliberation {
		f := newFeed(t)
		f.ctl(`{"op":"open","charter":{"title":"t","limits":{"max_rounds":3}}}`)
		prev := claim("root")
		f.art("a", prev)
		for i := 0; i < n; i++ {
			o := objection(prev.ID, i%2 == 0)
			f.art([]string{"a", "b", "c"}[i%3], o)
			prev = o
		}
		f.raw(wire.ArtifactSubject(delib, "a"), []byte("junk"))
		return f.d()
	}
	a, b := build(50), build(50)
	if a.StateDigest() != b.StateDigest() {
		t.Error("same stream, different digests")
	}
	if build(49).StateDigest() == a.StateDigest() {
		t.Error("different streams, same digest")
	}
	v := a.View()
	if v.StateDigest != a.StateDigest() || v.Artifacts != 51 || v.Rejections != 1 || len(v.OpenBlockingObjections) != 25 {
		t.Errorf("view %+v", v)
	}
}

func TestSnapshot_RoundTrip(t *testing.T) {
	f := newFeed(t)
	f.ctl(`{"op":"open","charter":{"title":"t","participants":["a","b"],"limits":{"max_rounds":3}}}`)
	c := claim("root")
	f.art("a", c)
	ob := objection(c.ID, true)
	f.art("b", ob)
	f.art("b", objection(claim("unknown parent").ID, false)) // rejected: unknown reference
	f.art("z", claim("outsider"))                            // rejected
	f.raw("parley.x.ctl", []byte("{}"))                      // unrouted
	var buf bytes.Buffer
	if err := f.p.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	q, err := projector.ReadSnapshot(&buf, projector.Options{Rules: supervisor.Rules{}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := f.d(), q.Deliberation(delib)
	if a.StateDigest() != b.StateDigest() || q.Position() != f.p.Position() {
		t.Fatal("snapshot changed the state")
	}
	// Both go on identically from there.
	next := projector.Msg{Seq: f.seq + 1, Subject: wire.ArtifactSubject(delib, "a"),
		Data: decision(events.Final, c.ID, events.Disposition{Objection: ob.ID, Disposition: events.Overruled, Rationale: "r"}).Canonical}
	f.p.Apply(next)
	q.Apply(next)
	if a.StateDigest() != b.StateDigest() || len(b.OpenBlockingObjections()) != 0 || b.Artifacts() != 3 {
		t.Fatal("diverged after the snapshot")
	}
	if _, err := projector.ReadSnapshot(strings.NewReader("junk"), projector.Options{Rules: supervisor.Rules{}}); err == nil {
		t.Error("junk snapshot accepted")
	}
}

// The projection is the closure verifier's graph, live and after a
// snapshot.
func TestDeliberation_Verify(t *testing.T) {
	f := newFeed(t)
	f.ctl(`{"op":"open","charter":{"title":"t"}}`)
	c := claim("root")
	f.art("a", c)
	ob := objection(c.ID, true)
	f.art("b", ob)
	dec := decision(events.Final, c.ID) // does not reference the objection
	f.art("a", dec)
	r := f.d().Verify(dec.ID, 0, closure.Limits{})
	if r.OK || len(r.Findings) != 1 || r.Findings[0].Code != closure.CodeHidden || r.Findings[0].ArtifactID != ob.ID.String() || r.ClosureSize != 3 {
		t.Fatalf("%+v", r)
	}
	var buf bytes.Buffer
	f.p.WriteSnapshot(&buf)
	q, _ := projector.ReadSnapshot(&buf, projector.Options{Rules: supervisor.Rules{}})
	if r2 := q.Deliberation(delib).Verify(dec.ID, 0, closure.Limits{}); fmt.Sprint(r2) != fmt.Sprint(r) {
		t.Fatalf("after snapshot %+v", r2)
	}
	// Verified again at the same state: the same result. Then an artifact
	// admitted after it (a blocking objection against the audited set,
	// after the decision) changes the result at a later position: nothing
	// stale is kept.
	if again := f.d().Verify(dec.ID, 0, closure.Limits{}); fmt.Sprint(again) != fmt.Sprint(r) {
		t.Fatalf("verified again: %+v", again)
	}
	if before := f.d().Verify(dec.ID, 100, closure.Limits{}); len(before.Findings) != 1 {
		t.Fatalf("at 100 before the late objection: %+v", before)
	}
	late := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "later: no", Blocking: true},
		References: []events.Reference{{Target: c.ID, Relation: events.ObjectsTo}}})
	if o := f.art("b", late); o.Rejection != nil {
		t.Fatal(o.Rejection)
	}
	r3 := f.d().Verify(dec.ID, 100, closure.Limits{})
	var challenged bool
	for _, fd := range r3.Findings {
		challenged = challenged || (fd.Code == closure.CodeChallenged && fd.ArtifactID == late.ID.String())
	}
	if !challenged || len(r3.Findings) != 2 {
		t.Fatalf("after a late blocking objection: %+v", r3)
	}
	if r4 := f.d().Verify(dec.ID, 100, closure.Limits{MaxSize: 1}); r4.OK || fmt.Sprint(r4) == fmt.Sprint(r3) {
		t.Fatalf("other limits gave the same result: %+v", r4)
	}
}

// The digest does not depend on stream positions nor on the deliberation's
// id: the same messages in the same order give the same digest, wherever
// they stand in the stream.
func TestStateDigest_PositionIndependent(t *testing.T) {
	other := "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c"
	c := claim("root")
	msgs := func(id string) [][2]string {
		return [][2]string{
			{wire.ControlSubject(id), `{"op":"open","charter":{"title":"t"}}`},
			{wire.ArtifactSubject(id, "a"), string(c.Canonical)},
			{wire.ArtifactSubject(id, "b"), string(objection(c.ID, true).Canonical)},
			{wire.ArtifactSubject(id, "b"), "junk"},
		}
	}
	a := projector.New(projector.Options{Rules: supervisor.Rules{}})
	for i, m := range msgs(delib) {
		a.Apply(projector.Msg{Seq: uint64(i + 1), Subject: m[0], Data: []byte(m[1])})
	}
	b := projector.New(projector.Options{Rules: supervisor.Rules{}})
	seq := uint64(100)
	for _, m := range msgs(other) {
		seq += 7 // other deliberations' messages in between
		b.Apply(projector.Msg{Seq: seq, Subject: wire.ControlSubject("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5d"), Data: []byte(`{"op":"open","charter":{"title":"x"}}`)})
		seq++
		b.Apply(projector.Msg{Seq: seq, Subject: m[0], Data: []byte(m[1])})
	}
	da, db := a.Deliberation(delib), b.Deliberation(other)
	if da.StateDigest() != db.StateDigest() || db.Messages() != 4 || db.Ordinal(seq) != 4 {
		t.Fatalf("digests differ: %s %s (%d messages)", da.StateDigest(), db.StateDigest(), db.Messages())
	}
}

// What the fold keeps for someone else's message is bounded in bytes: a
// rejection keeps a summary, never the message quoted whole; a control
// message and a charter's title are bounded; the deliberations held are
// bounded by Options.MaxDeliberations.
func TestApply_BoundedInBytes(t *testing.T) {
	p := projector.New(projector.Options{Rules: supervisor.Rules{}, MaxDeliberations: 2})
	seq := uint64(0)
	apply := func(subject, data string) projector.Outcome {
		seq++
		return p.Apply(projector.Msg{Seq: seq, Subject: subject, Data: []byte(data)})
	}
	other := func(i int) string { return fmt.Sprintf("0190a1b2-c3d4-7e5f-8a9b-%012d", i) }
	huge := strings.Repeat("é", 300<<10) // 600 KiB of two-byte runes
	checks := []struct {
		name    string
		subject string
		data    string
		code    string
	}{
		{"an unknown op quoted whole", wire.ControlSubject(other(1)), `{"op":"` + strings.Repeat("x", 3000) + `"}`, projector.CodeControlInvalid},
		{"a control message over the bound", wire.ControlSubject(other(2)), `{"op":"open","charter":{"title":"` + huge + `"}}`, projector.CodeControlTooLarge},
		{"a title over the bound", wire.ControlSubject(other(3)), `{"op":"open","charter":{"title":"` + strings.Repeat("t", projector.MaxTitleBytes+1) + `"}}`, projector.CodeControlInvalid},
		{"a participant token as long as a subject", wire.ArtifactSubject(other(4), strings.Repeat("p", 4000)), `{}`, projector.CodeParticipantInvalid},
	}
	for _, c := range checks {
		o := apply(c.subject, c.data)
		if o.Rejection == nil || o.Rejection.Code != c.code {
			t.Fatalf("%s: %+v", c.name, o)
		}
		if len(o.Rejection.Message) > projector.MaxRejectionText || len(o.Rejection.Participant) > 80 || !utf8.ValidString(o.Rejection.Message) {
			t.Errorf("%s: keeps %d bytes of message, %d of participant", c.name, len(o.Rejection.Message), len(o.Rejection.Participant))
		}
	}
	// A rejection inside a deliberation keeps a summary too.
	apply(wire.ControlSubject(other(5)), `{"op":"open","charter":{"title":"t"}}`)
	o := apply(wire.ControlSubject(other(5)), `{"op":"`+huge[:3000]+`"}`)
	if o.Rejection == nil || len(o.Rejection.Message) > projector.MaxRejectionText || !utf8.ValidString(o.Rejection.Message) {
		t.Errorf("in a deliberation: %+v", o.Rejection)
	}
	apply(wire.ControlSubject(other(6)), `{"op":"open","charter":{"title":"t"}}`)
	if o := apply(wire.ControlSubject(other(7)), `{"op":"open","charter":{"title":"t"}}`); o.Rejection == nil || o.Rejection.Code != projector.CodeDeliberationLimit {
		t.Errorf("a third deliberation: %+v", o)
	}
	if p.Len() != 2 {
		t.Errorf("%d deliberations held", p.Len())
	}
}
