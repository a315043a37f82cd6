package events_test

import (
	"fmt"
	"testing"

	"github.com/parley-engine/parley/events"
)

// BenchmarkValidate validates artifacts of the replay corpus's shape (an
// OBJECTION of about 300 bytes with two references): the engine's cost per
// message ahead of the fold.
func BenchmarkValidate(b *testing.B) {
	root := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "root"}})
	other := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "other"}})
	var raws [][]byte
	for i := range 64 {
		a := events.MustSeal(events.Draft{Type: events.TypeObjection,
			Payload:    events.Objection{Statement: fmt.Sprintf("objection %d: the previous point does not hold for mixed workloads", i), Blocking: i%10 == 0},
			References: []events.Reference{{Target: root.ID, Relation: events.ObjectsTo}, {Target: other.ID, Relation: events.ObjectsTo}}})
		raws = append(raws, a.Canonical)
	}
	v := events.NewValidator()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := v.ValidateTransient(raws[i%len(raws)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
