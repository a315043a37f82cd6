package termination_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

// BenchmarkDecide: the supervisor's decision on a deliberation of n
// accepted artifacts with every clock and budget limit set and nothing to
// do, which is what the runner pays when an artifact is accepted. A tenth
// of the artifacts are blocking objections left open.
func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		w := &world{t: nil, p: projector.New(projector.Options{Rules: termination.Rules{}}), now: base}
		w.apply(wire.ControlSubject(delib), []byte(`{"op":"open","charter":{"title":"bench","limits":{"idle_timeout":"1h","stall_window":1000000,"budget_tokens":1000000000,"max_artifacts":10000000,"deadline":"2030-01-01T00:00:00Z"},"policy":{"required_participants":["p0"]}}}`))
		root := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "root"}})
		w.apply(wire.ArtifactSubject(delib, "p0"), root.Canonical)
		for i := 1; i < n; i++ {
			var a *events.Artifact
			if i%10 == 0 {
				a = events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: fmt.Sprint("objection ", i), Blocking: true},
					References: []events.Reference{{Target: root.ID, Relation: events.ObjectsTo}}})
			} else {
				a = events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprint("claim ", i)}})
			}
			w.apply(wire.ArtifactSubject(delib, fmt.Sprintf("p%d", i%8)), a.Canonical)
		}
		d := w.p.Deliberation(delib)
		if d.Artifacts() != n {
			b.Fatalf("%d artifacts", d.Artifacts())
		}
		b.Run(fmt.Sprintf("artifacts=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			now := base.Add(time.Minute)
			for b.Loop() {
				if ems := termination.Decide(d, now); len(ems) != 0 {
					b.Fatalf("emissions %v", describe(ems))
				}
			}
		})
	}
}
