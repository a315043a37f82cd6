package audit

import (
	"testing"
	"time"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/wire"
)

// lying are supervisor rules that call for whatever they are told to: a
// fold with wrong rules (an older engine's, say) admits a false completion,
// and the audit's own check of the status, which does not trust the
// fold's rules, still finds it.
type lying []canon.Digest

func (l lying) Emissions(*projector.Deliberation, time.Time) []canon.Digest { return l }
func (l lying) Ends(*projector.Deliberation, time.Time) []events.TerminationState {
	return nil
}

func TestCheckStatus_FalseCompletion(t *testing.T) {
	const id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	c := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The cache halves p99."}})
	ob := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "One workload only.", Blocking: true},
		References: []events.Reference{{Target: c.ID, Relation: events.ObjectsTo}}})
	dec := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "adopt", Status: events.Final},
		References: []events.Reference{{Target: c.ID, Relation: events.Decides}}})
	tm := events.MustSeal(events.Draft{Type: events.TypeTermination, Payload: events.Termination{State: events.Completed},
		References: []events.Reference{{Target: dec.ID, Relation: events.Decides}}})
	for _, tc := range []struct {
		name  string
		rules projector.Rules
		want  string
	}{
		{"rules that lie", lying{tm.ID}, CodeFalseCompletion},
		{"rules that do not", lying{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := projector.New(projector.Options{Rules: tc.rules})
			p.Apply(projector.Msg{Seq: 1, Subject: wire.ControlSubject(id), Data: []byte(`{"op":"open","charter":{"title":"t"}}`)})
			for i, m := range []struct {
				who string
				a   *events.Artifact
			}{{"alice", c}, {"bob", ob}, {"alice", dec}, {wire.SupervisorToken, tm}} {
				p.Apply(projector.Msg{Seq: uint64(i + 2), Subject: wire.ArtifactSubject(id, m.who), Data: m.a.Canonical})
			}
			rep := &Report{}
			checkStatus(rep, p.Deliberation(id))
			switch {
			case tc.want == "" && len(rep.Findings) != 0:
				t.Fatalf("status %s: %+v", p.Deliberation(id).Status, rep.Findings)
			case tc.want != "" && (len(rep.Findings) != 1 || rep.Findings[0].Code != tc.want):
				t.Fatalf("status %s: %+v", p.Deliberation(id).Status, rep.Findings)
			}
		})
	}
}
