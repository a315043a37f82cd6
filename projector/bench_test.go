package projector_test

import (
	"fmt"
	"testing"

	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	supervisor "github.com/parley-engine/parley/termination"
)

// BenchmarkApply folds a chain of objections (one reference each) into one
// deliberation: the fold's cost per artifact, validation included.
func BenchmarkApply(b *testing.B) {
	const n = 20000
	msgs := make([]projector.Msg, 0, n+1)
	msgs = append(msgs, projector.Msg{Subject: projector.ControlSubject(delib), Data: []byte(`{"op":"open","charter":{"title":"bench"}}`)})
	prev := claim("root")
	msgs = append(msgs, projector.Msg{Subject: projector.ArtifactSubject(delib, "p0"), Data: prev.Canonical})
	for i := 1; i < n; i++ {
		a := events.MustSeal(events.Draft{Type: events.TypeObjection,
			Payload:    events.Objection{Statement: fmt.Sprintf("objection %d: the previous point does not hold for mixed workloads", i), Blocking: i%10 == 0},
			References: []events.Reference{{Target: prev.ID, Relation: events.ObjectsTo}}})
		msgs = append(msgs, projector.Msg{Subject: projector.ArtifactSubject(delib, fmt.Sprintf("p%d", i%10)), Data: a.Canonical})
		prev = a
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := projector.New(projector.Options{Rules: supervisor.Rules{}})
		for j := range msgs {
			msgs[j].Seq = uint64(j + 1)
			p.Apply(msgs[j])
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/artifact")
}
