package audit_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/audit"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

const delib = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// script writes a stream recording message by message, folding it as the
// live engine would so that the supervisor's emissions can be taken from
// its rules.
type script struct {
	t   *testing.T
	w   *recording.Writer
	buf bytes.Buffer
	p   *projector.Projection
	seq uint64
	now time.Time
}

func newScript(t *testing.T) *script {
	s := &script{t: t, p: projector.New(projector.Options{Rules: termination.Rules{}}), now: t0}
	s.w, _ = recording.NewWriter(&s.buf, recording.Stream, delib)
	return s
}

func (s *script) msg(subject string, data []byte) projector.Outcome {
	s.seq++
	s.now = s.now.Add(time.Second)
	if err := s.w.Write(recording.Message{Position: s.seq, Subject: subject, Time: s.now, Data: data}); err != nil {
		s.t.Fatal(err)
	}
	return s.p.Apply(projector.Msg{Seq: s.seq, Subject: subject, Data: data, Time: s.now})
}

func (s *script) art(who string, a *events.Artifact) projector.Outcome {
	return s.msg(wire.ArtifactSubject(delib, who), a.Canonical)
}

func (s *script) supervise() {
	for _, e := range termination.Decide(s.p.Deliberation(delib), s.now.Add(time.Second)) {
		if o := s.art(wire.SupervisorToken, e.Artifact); o.Rejection != nil {
			s.t.Fatalf("the supervisor's %s: %+v", e.Artifact.Type, o.Rejection)
		}
	}
}

func (s *script) audit() *audit.Report {
	s.t.Helper()
	s.w.StateDigest = s.p.Deliberation(delib).StateDigest().String()
	if err := s.w.Close(); err != nil {
		s.t.Fatal(err)
	}
	r, err := recording.NewReader(bytes.NewReader(s.buf.Bytes()))
	if err != nil {
		s.t.Fatal(err)
	}
	rep, err := audit.Run(r)
	if err != nil {
		s.t.Fatal(err)
	}
	return rep
}

func findings(rep *audit.Report) []string {
	var out []string
	for _, f := range rep.Findings {
		out = append(out, f.Code)
	}
	return out
}

// hiding opens a deliberation in which alice decides, finally, over bob's
// open blocking objection, and the supervisor answers with a FAILURE.
func hiding(t *testing.T) (*script, *events.Artifact) {
	s := newScript(t)
	s.msg(wire.ControlSubject(delib), []byte(`{"op":"open","charter":{"title":"Adopt the cache?","participants":["alice","bob"]}}`))
	c := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The cache halves p99."}})
	s.art("alice", c)
	s.art("bob", events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "One workload only.", Blocking: true},
		References: []events.Reference{{Target: c.ID, Relation: events.ObjectsTo}}}))
	dec := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "adopt", Status: events.Final},
		References: []events.Reference{{Target: c.ID, Relation: events.Decides}}})
	s.art("alice", dec)
	s.supervise()
	return s, dec
}

// Attack 1 and 2 of a hostile participant: alice ends the deliberation
// over bob's open blocking objection with her own completed TERMINATION,
// and bob cancels it with his. The record stays open, and the audit is
// not OK: it names both claims of an end.
func TestAudit_SelfTerminationIsAFinding(t *testing.T) {
	s, dec := hiding(t)
	for who, tm := range map[string]events.Termination{
		"alice": {State: events.Completed, Reason: "done"},
		"bob":   {State: events.Cancelled, Reason: "bored"},
	} {
		var refs []events.Reference
		if tm.State == events.Completed {
			refs = []events.Reference{{Target: dec.ID, Relation: events.Decides}}
		}
		o := s.art(who, events.MustSeal(events.Draft{Type: events.TypeTermination, Payload: tm, References: refs}))
		if o.Rejection == nil || o.Rejection.Code != projector.CodeTerminationUnauthorized {
			t.Fatalf("%s's TERMINATION: %+v", who, o)
		}
	}
	rep := s.audit()
	got := findings(rep)
	if rep.OK || rep.Status != "open" || len(got) != 2 || got[0] != audit.CodeUnjustifiedEnd || got[1] != audit.CodeUnjustifiedEnd {
		t.Fatalf("%v\n%s", got, rep.Text())
	}
	if text := rep.Text(); !strings.HasPrefix(text, "audit        FINDINGS") || !strings.Contains(text, "does not verify") {
		t.Fatalf("%s", text)
	}
}

// Attack 4: a forged supervisor TERMINATION exhausted on a healthy
// deliberation is refused by the fold, and the audit reports it.
func TestAudit_ForgedSupervisorIsAFinding(t *testing.T) {
	s := newScript(t)
	s.msg(wire.ControlSubject(delib), []byte(`{"op":"open","charter":{"title":"Adopt the cache?"}}`))
	s.art("alice", events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The cache halves p99."}}))
	forged := events.MustSeal(events.Draft{Type: events.TypeTermination, Payload: events.Termination{State: events.Exhausted, Reason: "exhausted.budget: forged"}})
	if o := s.art(wire.SupervisorToken, forged); o.Rejection == nil || o.Rejection.Code != projector.CodeSupervisorUnjustified {
		t.Fatalf("%+v", o)
	}
	rep := s.audit()
	if got := findings(rep); rep.OK || rep.Status != "open" || len(got) != 1 || got[0] != audit.CodeUnjustified || rep.Findings[0].ArtifactID != forged.ID.String() {
		t.Fatalf("%v\n%s", got, rep.Text())
	}
}

// A sound record audits OK: the supervisor judged the hiding decision, and
// a later decision that disposes of the objection completes it.
func TestAudit_SoundRecordIsOK(t *testing.T) {
	s, dec := hiding(t)
	obj := s.p.Deliberation(delib).OpenBlockingObjections()[0]
	fixed := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "adopt after a second workload", Status: events.Final,
		ObjectionDispositions: []events.Disposition{{Objection: obj, Disposition: events.Addressed, Rationale: "measured on two"}}},
		References: []events.Reference{{Target: dec.ID, Relation: events.Supersedes}, {Target: obj, Relation: events.Considers}}})
	if o := s.art("alice", fixed); o.Rejection != nil {
		t.Fatal(o.Rejection)
	}
	s.supervise()
	rep := s.audit()
	if !rep.OK || rep.Status != "completed" || rep.Supervisor != 2 {
		t.Fatalf("%s", rep.Text())
	}
}

// An artifact log whose completed TERMINATION decides a decision that does
// not verify (written by hand, or by an engine that admitted it) is a
// false completion.
func TestAudit_LogFalseCompletion(t *testing.T) {
	var buf bytes.Buffer
	w, _ := recording.NewWriter(&buf, recording.Log, "")
	c := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The cache halves p99."}})
	ob := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "One workload only.", Blocking: true},
		References: []events.Reference{{Target: c.ID, Relation: events.ObjectsTo}}})
	dec := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "adopt", Status: events.Final},
		References: []events.Reference{{Target: c.ID, Relation: events.Decides}}})
	tm := events.MustSeal(events.Draft{Type: events.TypeTermination, Payload: events.Termination{State: events.Completed},
		References: []events.Reference{{Target: dec.ID, Relation: events.Decides}}})
	for _, a := range []*events.Artifact{c, ob, dec, tm} {
		w.Write(recording.Message{Data: a.Canonical})
	}
	w.Close()
	r, err := recording.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Run(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := findings(rep); rep.OK || len(got) != 1 || got[0] != audit.CodeFalseCompletion || rep.Findings[0].ArtifactID != tm.ID.String() {
		t.Fatalf("%v\n%s", got, rep.Text())
	}
}
