package events_test

import (
	"fmt"
	"testing"

	"github.com/parley-engine/parley/events"
)

// BenchmarkValidateObjection validates the objection bench/engine replays
// (about 380 bytes, one reference), as the runner does, without keeping
// its bytes.
func BenchmarkValidateObjection(b *testing.B) {
	prev := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "root x"}})
	a := events.MustSeal(events.Draft{Type: events.TypeObjection,
		Payload:    events.Objection{Statement: fmt.Sprintf("objection %d: the previous point does not hold for mixed workloads", 12345), Blocking: false},
		References: []events.Reference{{Target: prev.ID, Relation: events.ObjectsTo}}})
	v := events.NewValidator()
	b.SetBytes(int64(len(a.Canonical)))
	b.ReportAllocs()
	for b.Loop() {
		_, inv := v.ValidateTransient(a.Canonical)
		if inv != nil {
			b.Fatal(inv)
		}
	}
}
