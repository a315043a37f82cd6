package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/wire"
)

// engine audit is a verdict: a recording in which alice ends the
// deliberation over bob's open blocking objection with her own completed
// TERMINATION exits 1 naming the finding; the same recording without it
// exits 0 with audit OK.
func TestRun_AuditVerdict(t *testing.T) {
	const id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	c := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The cache halves p99."}})
	ob := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "One workload only.", Blocking: true},
		References: []events.Reference{{Target: c.ID, Relation: events.ObjectsTo}}})
	dec := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "adopt", Status: events.Final},
		References: []events.Reference{{Target: c.ID, Relation: events.Decides}}})
	tm := events.MustSeal(events.Draft{Type: events.TypeTermination, Payload: events.Termination{State: events.Completed, Reason: "done"},
		References: []events.Reference{{Target: dec.ID, Relation: events.Decides}}})
	record := func(attack bool) string {
		var b bytes.Buffer
		w, _ := recording.NewWriter(&b, recording.Stream, id)
		t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		msgs := []recording.Message{{Subject: wire.ControlSubject(id), Data: []byte(`{"op":"open","charter":{"title":"Adopt the cache?","policy":{"auto_complete":false}}}`)},
			{Subject: wire.ArtifactSubject(id, "alice"), Data: c.Canonical}, {Subject: wire.ArtifactSubject(id, "bob"), Data: ob.Canonical}}
		if attack {
			msgs = append(msgs, recording.Message{Subject: wire.ArtifactSubject(id, "alice"), Data: dec.Canonical},
				recording.Message{Subject: wire.ArtifactSubject(id, "alice"), Data: tm.Canonical})
		}
		for i, m := range msgs {
			m.Position, m.Time = uint64(i+1), t0.Add(time.Duration(i)*time.Second)
			w.Write(m)
		}
		w.Close()
		return b.String()
	}
	code, out, errs := run(t, record(true), "audit", "-")
	if code != 1 || !strings.HasPrefix(out, "audit        FINDINGS") || !strings.Contains(out, "audit.unjustified_end") || !strings.Contains(out, "status       open") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = run(t, record(false), "audit", "-")
	if code != 0 || !strings.HasPrefix(out, "audit        OK") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
}
