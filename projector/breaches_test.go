package projector_test

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/projector"
	supervisor "github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

// Without a supervisor, the limit breaches waiting for their FAILURE are
// bounded in count and bytes however many a participant sends: the oldest
// are kept, the rest counted as dropped. A supervisor that starts
// afterwards answers every kept one, oldest first, once each, and a breach
// after that is kept and answered again.
func TestDeliberation_BreachesBounded(t *testing.T) {
	p := projector.New(projector.Options{Rules: supervisor.Rules{}})
	seq, now := uint64(0), time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	apply := func(subject string, data []byte) projector.Outcome {
		seq++
		now = now.Add(time.Millisecond)
		return p.Apply(projector.Msg{Seq: seq, Subject: subject, Data: data, Time: now})
	}
	apply(wire.ControlSubject(delib), []byte(`{"op":"open","charter":{"title":"t","limits":{"max_artifact_bytes":300}}}`))
	big := func(i int) []byte {
		return claim(fmt.Sprintf("%d %s", i, strings.Repeat("x", 400))).Canonical
	}
	// Participant tokens as long as a token may be, so that the byte
	// bound, not only the count, is reached.
	long := strings.Repeat("p", 64)
	const flood = 5000
	var breachSeqs []uint64
	for i := range flood {
		who := "alice"
		if i%2 == 1 {
			who = long[:54] + strconv.Itoa(1000000000+i)
		}
		o := apply(wire.ArtifactSubject(delib, who), big(i))
		wantRejection(t, o, projector.CodeLimitArtifactSize)
		breachSeqs = append(breachSeqs, seq)
	}
	d := p.Deliberation(delib)
	held, dropped := d.BreachBytes()
	kept := d.Breaches()
	switch {
	case held <= 0 || held > projector.MaxBreachBytes:
		t.Fatalf("%d bytes held for the breaches, bound %d", held, projector.MaxBreachBytes)
	case len(kept) == 0 || len(kept) > projector.MaxBreaches || cap(kept) > 2*projector.MaxBreaches:
		t.Fatalf("%d breaches kept (capacity %d), bound %d", len(kept), cap(kept), projector.MaxBreaches)
	case len(kept)+dropped != flood:
		t.Fatalf("%d kept + %d dropped, %d sent", len(kept), dropped, flood)
	}
	if ph, pd := p.Breaches(); ph != held || pd != uint64(dropped) {
		t.Fatalf("the projection counts %d bytes and %d dropped, the deliberation %d and %d", ph, pd, held, dropped)
	}
	// A snapshot restores the bound's bookkeeping.
	var buf bytes.Buffer
	if err := p.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	restored, err := projector.ReadSnapshot(&buf, projector.Options{Rules: supervisor.Rules{}})
	if err != nil {
		t.Fatal(err)
	}
	if rh, rd := restored.Breaches(); rh != held || rd != uint64(dropped) {
		t.Fatalf("restored: %d bytes and %d dropped, want %d and %d", rh, rd, held, dropped)
	}
	if got, want := projector.DumpState(restored), projector.DumpState(p); got != want {
		t.Fatalf("restored state differs:\n%s", firstDifference(got, want))
	}
	for i, r := range kept {
		if r.Position != breachSeqs[i] {
			t.Fatalf("breach %d kept is at %d, want the oldest (%d)", i, r.Position, breachSeqs[i])
		}
	}
	// Every rejection is still counted by code.
	if _, total, codes := d.Rejections(); total != flood || codes[projector.CodeLimitArtifactSize] != flood {
		t.Fatalf("%d rejections, %v", total, codes)
	}

	// The supervisor starts: it answers the kept breaches, oldest first.
	answer := func() []string {
		var names []string
		for round := 0; ; round++ {
			es := supervisor.Decide(d, now)
			if len(es) == 0 {
				return names
			}
			if round > 2 {
				t.Fatalf("still deciding %d emissions", len(es))
			}
			for _, e := range es {
				names = append(names, string(e.Artifact.Extensions[projector.MessageExtension]))
				if o := apply(wire.ArtifactSubject(delib, wire.SupervisorToken), e.Artifact.Canonical); o.Rejection != nil {
					t.Fatalf("the supervisor's FAILURE: %+v", o.Rejection)
				}
			}
		}
	}
	names := answer()
	if len(names) != len(kept) {
		t.Fatalf("%d FAILUREs for %d kept breaches", len(names), len(kept))
	}
	for i, n := range names {
		if want := strconv.FormatUint(d.Ordinal(breachSeqs[i]), 10); n != want {
			t.Fatalf("FAILURE %d names message %s, want %s (the oldest breaches first)", i, n, want)
		}
	}
	if ph, _ := p.Breaches(); ph != 0 {
		t.Fatalf("after the answers the projection counts %d bytes of breaches", ph)
	}
	if held, _ := d.BreachBytes(); len(d.Breaches()) != 0 || held != 0 {
		t.Fatalf("after the answers: %d breaches, %d bytes", len(d.Breaches()), held)
	}

	// A breach after the answers is kept and answered.
	apply(wire.ArtifactSubject(delib, "alice"), big(flood))
	last := strconv.FormatUint(d.Ordinal(seq), 10)
	if names := answer(); len(names) != 1 || names[0] != last {
		t.Fatalf("the breach after the answers: FAILUREs %v", names)
	}
	if _, dropped2 := d.BreachBytes(); dropped2 != dropped {
		t.Fatalf("dropped %d, then %d", dropped, dropped2)
	}
}
