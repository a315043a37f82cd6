package closure_test

import (
	"fmt"
	"testing"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
)

// layered builds a DAG of n artifacts in layers 1,000 wide: each artifact
// references two of the layer below, so the decision on top (referencing
// the whole top layer) reaches every one; one artifact in a hundred is a
// blocking objection to an artifact below, which the decision does not
// reference but disposes of: the fixpoint must find them all.
func layered(n int) (*closure.MemGraph, canon.Digest) {
	const width = 1000
	g := closure.NewMemGraph()
	ids := make([]canon.Digest, n)
	for i := range ids {
		ids[i] = fakeID(i)
	}
	dec := &events.Decision{Outcome: "o", Status: events.Final}
	for i := 0; i < n; i++ {
		info := closure.Info{Position: uint64(i + 1), Type: events.TypeClaim}
		var refs []events.Reference
		if i >= width {
			below := i - width
			refs = []events.Reference{{Target: ids[below], Relation: events.Supports}, {Target: ids[below-below%width+(below+1)%width], Relation: events.Supports}}
			info.Type = events.TypeEvidence
			if i%100 == 0 {
				info.Type, info.Blocking = events.TypeObjection, true
				refs = []events.Reference{{Target: ids[below], Relation: events.ObjectsTo}}
				dec.ObjectionDispositions = append(dec.ObjectionDispositions, events.Disposition{Objection: ids[i], Disposition: events.Overruled, Rationale: "r"})
			}
		}
		g.AddNode(ids[i], info, refs)
	}
	var refs []events.Reference
	for i := max(0, n-width); i < n; i++ {
		if i%100 != 0 {
			refs = append(refs, events.Reference{Target: ids[i], Relation: events.Decides})
		}
	}
	d := fakeID(-1)
	g.AddNode(d, closure.Info{Position: uint64(n + 1), Type: events.TypeDecision, Decision: dec}, refs)
	return g, d
}

// BenchmarkVerify: closure verification over DAGs of 10k, 100k and 1M
// artifacts; the time should grow linearly.
func BenchmarkVerify(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		g, d := layered(n)
		b.Run(fmt.Sprintf("artifacts=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := closure.Verify(g, d, 0, closure.Limits{})
				if !r.OK || r.ClosureSize != n+1 {
					b.Fatalf("ok=%v size=%d %+v", r.OK, r.ClosureSize, r.Findings)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/artifact")
		})
	}
}
