package events_test

import (
	"testing"

	"github.com/parley-engine/parley/events"
)

func TestArtifact_Text(t *testing.T) {
	c := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "the claim"}})
	for _, tc := range []struct {
		d    events.Draft
		want string
	}{
		{events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "the claim"}}, "the claim"},
		{events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "no", Blocking: true},
			References: []events.Reference{{Target: c.ID, Relation: events.ObjectsTo}}}, "no"},
		{events.Draft{Type: events.TypeFailure, Payload: events.Failure{Code: "x.y", Description: "broke"},
			References: []events.Reference{{Target: c.ID, Relation: events.Considers}}}, "x.y: broke"},
		{events.Draft{Type: events.TypeTermination, Payload: events.Termination{State: events.Cancelled, Reason: "enough"}}, "cancelled: enough"},
		{events.Draft{Type: events.TypeTermination, Payload: events.Termination{State: events.Cancelled}}, "cancelled"},
	} {
		a, err := events.Seal(tc.d)
		if err != nil {
			t.Fatalf("%s: %v", tc.d.Type, err)
		}
		if got := a.Text(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.d.Type, got, tc.want)
		}
	}
}
