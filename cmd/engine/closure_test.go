package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
)

func TestRun_Closure(t *testing.T) {
	claim := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The cache halves p99."}})
	obj := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "One workload.", Blocking: true},
		References: []events.Reference{{Target: claim.ID, Relation: events.ObjectsTo}}})
	hiding := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "adopt", Status: events.Final},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}}})
	honest := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "adopt", Status: events.Final,
		ObjectionDispositions: []events.Disposition{{Objection: obj.ID, Disposition: events.Addressed, Rationale: "measured again"}}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}}})
	late := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "Cost?", Blocking: true},
		References: []events.Reference{{Target: claim.ID, Relation: events.ObjectsTo}}})
	rec := strings.Join([]string{string(claim.Canonical), "not an artifact", string(obj.Canonical), string(hiding.Canonical), string(honest.Canonical), string(late.Canonical)}, "\n") + "\n"

	var res closure.Result
	code, out, errs := run(t, rec, "closure", "--decision", hiding.ID.String(), "-")
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	if code != 1 || res.OK || res.Position != 4 || res.ClosureSize != 3 || len(res.Findings) != 1 || res.Findings[0].Code != closure.CodeHidden || res.Findings[0].ArtifactID != obj.ID.String() {
		t.Errorf("hiding decision: exit %d %+v", code, res)
	}
	if !strings.Contains(errs, "skipped 1 messages") {
		t.Errorf("stderr %q", errs)
	}
	code, out, _ = run(t, rec, "closure", "--decision", honest.ID.String(), "-")
	json.Unmarshal([]byte(out), &res)
	if code != 0 || !res.OK || res.Status != "final" || len(res.Findings) != 0 {
		t.Errorf("honest decision: exit %d %s", code, out)
	}
	code, out, _ = run(t, rec, "closure", "--decision", honest.ID.String(), "--at", "6", "-")
	json.Unmarshal([]byte(out), &res)
	if code != 0 || !res.OK || res.Position != 6 || len(res.Findings) != 1 || res.Findings[0].Code != closure.CodeChallenged {
		t.Errorf("challenged: exit %d %s", code, out)
	}
	if code, _, _ := run(t, rec, "closure", "--decision", late.ID.String(), "-"); code != 2 {
		t.Errorf("not a decision: exit %d", code)
	}
	if code, _, _ := run(t, rec, "closure", "--decision", "sha256:"+strings.Repeat("0", 64), "-"); code != 2 {
		t.Errorf("unknown decision: exit %d", code)
	}
	if code, _, _ := run(t, rec, "closure", "--decision", "nope", "-"); code != 2 {
		t.Errorf("bad id: exit %d", code)
	}
}
