package projector_test

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	supervisor "github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

// BenchmarkApply folds a chain of objections (one reference each) into one
// deliberation: the fold's cost per artifact, validation included.
func BenchmarkApply(b *testing.B) {
	const n = 20000
	msgs := make([]projector.Msg, 0, n+1)
	msgs = append(msgs, projector.Msg{Subject: wire.ControlSubject(delib), Data: []byte(`{"op":"open","charter":{"title":"bench"}}`)})
	prev := claim("root")
	msgs = append(msgs, projector.Msg{Subject: wire.ArtifactSubject(delib, "p0"), Data: prev.Canonical})
	for i := 1; i < n; i++ {
		a := events.MustSeal(events.Draft{Type: events.TypeObjection,
			Payload:    events.Objection{Statement: fmt.Sprintf("objection %d: the previous point does not hold for mixed workloads", i), Blocking: i%10 == 0},
			References: []events.Reference{{Target: prev.ID, Relation: events.ObjectsTo}}})
		msgs = append(msgs, projector.Msg{Subject: wire.ArtifactSubject(delib, fmt.Sprintf("p%d", i%10)), Data: a.Canonical})
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

// snapshotBench folds n artifacts (the chain of BenchmarkApply, in 8
// deliberations) for the snapshot benchmarks.
func snapshotBench(b *testing.B, n int) *projector.Projection {
	b.Helper()
	p := projector.New(projector.Options{Rules: supervisor.Rules{}})
	seq := uint64(0)
	next := func() uint64 { seq++; return seq }
	const k = 8
	prev := make([]*events.Artifact, k)
	for d := range k {
		id := fmt.Sprintf("%s%d", delib[:len(delib)-1], d)
		p.Apply(projector.Msg{Seq: next(), Subject: wire.ControlSubject(id), Data: []byte(`{"op":"open","charter":{"title":"bench"}}`)})
		prev[d] = claim("root")
		p.Apply(projector.Msg{Seq: next(), Subject: wire.ArtifactSubject(id, "p0"), Data: prev[d].Canonical})
	}
	for i := 1; i < n/k; i++ {
		for d := range k {
			a := events.MustSeal(events.Draft{Type: events.TypeObjection,
				Payload:    events.Objection{Statement: fmt.Sprintf("objection %d: the previous point does not hold", i), Blocking: i%10 == 0},
				References: []events.Reference{{Target: prev[d].ID, Relation: events.ObjectsTo}}})
			p.Apply(projector.Msg{Seq: next(), Subject: wire.ArtifactSubject(fmt.Sprintf("%s%d", delib[:len(delib)-1], d), fmt.Sprintf("p%d", i%10)), Data: a.Canonical})
			prev[d] = a
		}
	}
	return p
}

// BenchmarkSnapshot writes and reads the snapshot of 200,000 artifacts:
// the cost per artifact of a shard's snapshot and of a restart from it.
func BenchmarkSnapshot(b *testing.B) {
	const n = 200000
	p := snapshotBench(b, n)
	var buf bytes.Buffer
	if err := p.WriteSnapshot(&buf); err != nil {
		b.Fatal(err)
	}
	b.Run("freeze", func(b *testing.B) {
		for b.Loop() {
			p.Freeze()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/artifact")
	})
	b.Run("write", func(b *testing.B) {
		var w bytes.Buffer
		for b.Loop() {
			w.Reset()
			if err := p.WriteSnapshot(&w); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/artifact")
		b.ReportMetric(float64(w.Len())/n, "bytes/artifact")
	})
	b.Run("read", func(b *testing.B) {
		for b.Loop() {
			if _, err := projector.ReadSnapshot(bytes.NewReader(buf.Bytes()), projector.Options{Rules: supervisor.Rules{}}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/artifact")
	})
}

// BenchmarkProjectionMemory reports the heap a projection of 200,000
// artifacts holds (the chain of BenchmarkSnapshot), per artifact.
func BenchmarkProjectionMemory(b *testing.B) {
	const n = 200000
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		p := snapshotBench(b, n)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "heap-bytes/artifact")
		runtime.KeepAlive(p)
	}
}

// BenchmarkStateDigest computes the state digest of a deliberation of
// 1,000 artifacts (a GET during ingest computes one per read), beside the
// digest as first written.
func BenchmarkStateDigest(b *testing.B) {
	p := snapshotBench(b, 8000)
	var d *projector.Deliberation
	p.Deliberations(func(x *projector.Deliberation) { d = x })
	b.Run("now", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d.ComputeDigest()
		}
	})
	b.Run("first", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d.ReferenceDigest()
		}
	})
}

// BenchmarkHeldPerOpen: the heap the projection keeps for an open that is
// all a hostile client sends, with a small charter and with the largest
// one a control message may carry (MaxControlBytes).
func BenchmarkHeldPerOpen(b *testing.B) {
	for _, size := range []int{0, projector.MaxControlBytes} {
		b.Run(fmt.Sprint("charter_", size), func(b *testing.B) {
			const n = 5000
			msgs := make([]projector.Msg, n)
			for i := range msgs {
				open := fmt.Sprintf(`{"op":"open","charter":{"title":"t%d"}}`, i)
				if size > 0 {
					pad := size - len(open) - len(`,"limits":{}`) - 40
					open = fmt.Sprintf(`{"op":"open","charter":{"title":"t%d","participants":[%s]}}`, i, tokens(pad))
				}
				msgs[i] = projector.Msg{Seq: uint64(i + 1), Subject: wire.ControlSubject(fmt.Sprintf("0190a1b2-c3d4-7e5f-8a9b-%012d", i)), Data: []byte(open)}
			}
			var held float64
			for b.Loop() {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				p := projector.New(projector.Options{})
				for _, m := range msgs {
					if o := p.Apply(m); o.Control != "open" {
						b.Fatalf("%+v", o.Rejection)
					}
				}
				runtime.GC()
				runtime.GC()
				runtime.ReadMemStats(&after)
				held = float64(after.HeapAlloc-before.HeapAlloc) / n
				runtime.KeepAlive(p)
			}
			b.ReportMetric(held, "B/deliberation")
			b.ReportMetric(float64(len(msgs[0].Data)), "B/open")
		})
	}
}

// tokens is a JSON list of distinct participant tokens about size bytes long.
func tokens(size int) string {
	var s strings.Builder
	for i := 0; s.Len() < size-70; i++ {
		if i > 0 {
			s.WriteByte(',')
		}
		fmt.Fprintf(&s, `"p%062d"`, i)
	}
	return s.String()
}

// BenchmarkRejectionPastKept: a rejected message once a deliberation's
// kept rejections are full (MaxKept, 10,000): what junk costs the fold.
func BenchmarkRejectionPastKept(b *testing.B) {
	p := projector.New(projector.Options{})
	p.Apply(projector.Msg{Seq: 1, Subject: wire.ControlSubject(delib), Data: []byte(`{"op":"open","charter":{"title":"junk","participants":["alice"]}}`)})
	junk := claim("junk").Canonical
	seq := uint64(1)
	for range p.MaxKept() {
		seq++
		p.Apply(projector.Msg{Seq: seq, Subject: wire.ArtifactSubject(delib, "mallory"), Data: junk})
	}
	for b.Loop() {
		seq++
		if o := p.Apply(projector.Msg{Seq: seq, Subject: wire.ArtifactSubject(delib, "mallory"), Data: junk}); o.Rejection == nil {
			b.Fatal("admitted")
		}
	}
}

// BenchmarkHeldPerHostileMessage: the heap the projection keeps, after a
// collection, for hostile messages of about 900 KB (a control message with
// an op that size on a deliberation never opened, an artifact referencing
// one never published, an open with a title that size) and for small junk
// claims from a token the charter does not name.
func BenchmarkHeldPerHostileMessage(b *testing.B) {
	pad := strings.Repeat("x", 900<<10)
	kinds := map[string]func(i int) projector.Msg{
		"control_900KB": func(i int) projector.Msg {
			return projector.Msg{Subject: wire.ControlSubject(fmt.Sprintf("0190a1b2-c3d4-7e5f-8a9b-%012d", i)), Data: []byte(`{"op":"` + pad + `"}`)}
		},
		"artifact_900KB_unknown_reference": func(i int) projector.Msg {
			a := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: pad, Blocking: true},
				References: []events.Reference{{Target: claim(fmt.Sprint("never ", i)).ID, Relation: events.ObjectsTo}}})
			return projector.Msg{Subject: wire.ArtifactSubject(delib, "mallory"), Data: a.Canonical}
		},
		"open_900KB_title": func(i int) projector.Msg {
			return projector.Msg{Subject: wire.ControlSubject(fmt.Sprintf("0190a1b2-c3d4-7e5f-8a9b-%012d", i)), Data: []byte(`{"op":"open","charter":{"title":"` + pad + `"}}`)}
		},
		"junk_claim": func(i int) projector.Msg {
			return projector.Msg{Subject: wire.ArtifactSubject(delib, "mallory"), Data: claim(fmt.Sprint("junk ", i)).Canonical}
		},
	}
	for _, name := range []string{"control_900KB", "artifact_900KB_unknown_reference", "open_900KB_title", "junk_claim"} {
		b.Run(name, func(b *testing.B) {
			n := 300
			if name == "junk_claim" {
				n = 20000
			}
			var held, size float64
			for b.Loop() {
				p := projector.New(projector.Options{})
				p.Apply(projector.Msg{Seq: 1, Subject: wire.ControlSubject(delib), Data: []byte(`{"op":"open","charter":{"title":"t","participants":["alice"]}}`)})
				// Warm what the validator and canon keep between messages
				// (their buffers) on a projection of its own, then two
				// collections: the second empties what sync.Pools kept.
				warm := projector.New(projector.Options{})
				wm := kinds[name](n)
				wm.Seq = 1
				warm.Apply(wm)
				runtime.GC()
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				sent := 0
				for i := range n {
					m := kinds[name](i)
					m.Seq = uint64(i + 2)
					sent += len(m.Data)
					if o := p.Apply(m); o.Rejection == nil {
						b.Fatalf("not refused: %+v", o)
					}
				}
				runtime.GC()
				runtime.GC()
				runtime.ReadMemStats(&after)
				held, size = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(n), float64(sent)/float64(n)
				runtime.KeepAlive(p)
			}
			b.ReportMetric(held, "B-held/msg")
			b.ReportMetric(size, "B-sent/msg")
		})
	}
}

// BenchmarkHeldPastBounds: what the projection keeps for each further
// hostile message once its bounds are full: 100,000 junk claims into one
// deliberation after its 10,000 kept rejections (the margin between
// 20,000 and 120,000), and 100,000 messages of deliberations never opened
// after the shard's 10,000 kept. What remains per message is its position
// in its deliberation's record (a byte or so) or nothing.
func BenchmarkHeldPastBounds(b *testing.B) {
	for _, name := range []string{"junk_claim", "never_opened"} {
		b.Run(name, func(b *testing.B) {
			var held float64
			for b.Loop() {
				p := projector.New(projector.Options{})
				p.Apply(projector.Msg{Seq: 1, Subject: wire.ControlSubject(delib), Data: []byte(`{"op":"open","charter":{"title":"t","participants":["alice"]}}`)})
				msg := func(i int) projector.Msg {
					if name == "junk_claim" {
						return projector.Msg{Seq: uint64(i + 2), Subject: wire.ArtifactSubject(delib, "mallory"), Data: claim(fmt.Sprint("junk ", i)).Canonical}
					}
					return projector.Msg{Seq: uint64(i + 2), Subject: wire.ControlSubject(fmt.Sprintf("0190a1b2-c3d4-7e5f-8a9b-%012d", i)), Data: []byte(`{"op":"x"}`)}
				}
				heap := func() int64 {
					runtime.GC()
					runtime.GC()
					var m runtime.MemStats
					runtime.ReadMemStats(&m)
					return int64(m.HeapAlloc)
				}
				const from, to = 20000, 120000
				var at int64
				for i := range to {
					if i == from {
						at = heap()
					}
					if o := p.Apply(msg(i)); o.Rejection == nil {
						b.Fatalf("not refused: %+v", o)
					}
				}
				held = float64(heap()-at) / (to - from)
				runtime.KeepAlive(p)
			}
			b.ReportMetric(held, "B-held/msg")
		})
	}
}
