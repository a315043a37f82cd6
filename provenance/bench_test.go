package provenance_test

import (
	"testing"
	"time"

	"github.com/parley-engine/parley/provenance"
)

// BenchmarkAdmit: the discipline alone over an assertion with two
// annotations (no re-verification).
func BenchmarkAdmit(b *testing.B) {
	s := &provenance.Set{Vocabulary: "1.0", Annotations: []provenance.Annotation{
		{Assertion: "a", Class: provenance.CodeRead, ObservationID: "sha256:00", TS: ts(time.Minute)},
		{Assertion: "a", Class: provenance.GitLog, ObservationID: "0123", TS: ts(time.Minute)}}}
	p := provenance.Params{Window: 10 * time.Minute, K: 2, At: at}
	b.ReportAllocs()
	for b.Loop() {
		if !provenance.Admit(s, p, nil)[0].Admitted {
			b.Fatal("not admitted")
		}
	}
}
