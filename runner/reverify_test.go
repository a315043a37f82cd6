package runner_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

// A slow substrate holds no lock: while the re-verification of an
// EVIDENCE's annotations is stuck (a Verifier that blocks until the test
// lets it go, far longer than the 200 ms a slow repository might take),
// its deliberation is read at once, as it was before the EVIDENCE, and
// another deliberation's messages are applied, in the same shard or in
// another; the EVIDENCE's deliberation alone waits, and its messages
// follow in order once the verifier answers, judged by its answers.
func TestRunner_SlowSubstrateHoldsNoLock(t *testing.T) {
	for _, shards := range []int{1, 8} {
		t.Run(fmt.Sprint(shards, " shards"), func(t *testing.T) {
			b := newBed(t)
			started, release := make(chan struct{}), make(chan struct{})
			var once, releaseOnce sync.Once
			defer releaseOnce.Do(func() { close(release) })
			var calls, returned atomic.Int32
			slow := func(a provenance.Annotation) provenance.Verification {
				calls.Add(1)
				once.Do(func() { close(started) })
				select {
				case <-release:
				case <-time.After(20 * time.Second):
				}
				returned.Add(1)
				return provenance.Verification{Attempted: true, Verified: true, Detail: "confirmed by the slow substrate"}
			}
			r, err := runner.New(context.Background(), b.js, b.stream, runner.Config{Shards: shards,
				Projector: projector.Options{Rules: termination.Rules{}}, Verify: slow})
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- r.Run(rctx) }()
			defer func() { releaseOnce.Do(func() { close(release) }); cancel(); <-done }()
			ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
			defer stop()

			b.publish(wire.ControlSubject(delibA), []byte(`{"op":"open","charter":{"title":"t","policy":{"provenance":{"k":2}}}}`))
			b.open(delibB)
			c := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "the changelog has an entry"}})
			if err := r.WaitFor(ctx, b.publish(wire.ArtifactSubject(delibA, "alice"), c.Canonical)); err != nil {
				t.Fatal(err)
			}
			ts := time.Now().Add(-time.Minute)
			const as = "CHANGELOG.md has an entry dated 2026-05-25"
			set := &provenance.Set{Vocabulary: "1.0", Annotations: []provenance.Annotation{
				{Assertion: as, Class: provenance.CodeRead, ObservationID: "sha256:" + strings.Repeat("0", 64), TS: &ts, Locator: &provenance.Locator{Path: "CHANGELOG.md"}},
				{Assertion: as, Class: provenance.GitLog, ObservationID: strings.Repeat("a", 40), TS: &ts, Locator: &provenance.Locator{Ref: "main"}}}}
			e := events.MustSeal(events.Draft{Type: events.TypeEvidence, Payload: events.Evidence{Content: "read and committed", ProvenanceClass: events.TraceVerifiedObservation},
				References: []events.Reference{{Target: c.ID, Relation: events.Supports}}, Extensions: map[string]any{provenance.Extension: set}})
			seqE := b.publish(wire.ArtifactSubject(delibA, "alice"), e.Canonical)
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("the EVIDENCE was never re-verified")
			}
			afterE := b.claims(delibA, 1)

			// A read of the EVIDENCE's deliberation does not wait for the
			// substrate: the message stuck in re-verification does not make
			// the fold want the deliberation's lock (a reader would wait for
			// the held messages first), and the read answers while the
			// substrate is still stuck.
			if runner.ReadWouldWait(r, delibA) {
				t.Error("a read of A would wait for its held messages while its substrate is stuck")
			}
			read := make(chan int, 1)
			go r.ReadDeliberation(delibA, func(d *projector.Deliberation) { read <- d.Artifacts() })
			select {
			case n := <-read:
				if n != 1 {
					t.Errorf("A has %d artifacts while its EVIDENCE is re-verified, want 1", n)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("a read of the deliberation waited for the substrate")
			}
			// Nor does ingest into another deliberation, whose charter has
			// no provenance policy: its EVIDENCE, annotated the same way,
			// is not re-verified at all.
			cB := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "B's claim"}})
			b.publish(wire.ArtifactSubject(delibB, "alice"), cB.Canonical)
			eB := events.MustSeal(events.Draft{Type: events.TypeEvidence, Payload: events.Evidence{Content: "read and committed", ProvenanceClass: events.TraceVerifiedObservation},
				References: []events.Reference{{Target: cB.ID, Relation: events.Supports}}, Extensions: map[string]any{provenance.Extension: set}})
			b.publish(wire.ArtifactSubject(delibB, "alice"), eB.Canonical)
			lastB := b.claims(delibB, 18)
			wctx, wstop := context.WithTimeout(ctx, 5*time.Second)
			if err := r.WaitForIn(wctx, delibB, lastB); err != nil {
				t.Fatalf("B waited for A's substrate: %v", err)
			}
			wstop()
			var artsB int
			r.ReadDeliberation(delibB, func(d *projector.Deliberation) { artsB = d.Artifacts() })
			if artsB != 20 || returned.Load() != 0 {
				t.Fatalf("B has %d artifacts, %d re-verifications returned", artsB, returned.Load())
			}
			// A's messages wait, in order, and the engine's position with them.
			if pos := r.Position(); pos >= seqE {
				t.Fatalf("position %d, the EVIDENCE is at %d and not judged yet", pos, seqE)
			}

			releaseOnce.Do(func() { close(release) })
			if err := r.WaitFor(ctx, lastB); err != nil {
				t.Fatal(err)
			}
			if err := r.WaitForIn(ctx, delibA, afterE); err != nil {
				t.Fatal(err)
			}
			r.ReadDeliberation(delibA, func(d *projector.Deliberation) {
				n, ok := d.Node(e.ID)
				if d.Artifacts() != 3 || !ok || n.Provenance == nil || !n.Provenance.Admissible || len(n.Provenance.Assertions) != 1 {
					t.Fatalf("A: %d artifacts, EVIDENCE %+v", d.Artifacts(), n.Provenance)
				}
				for _, ch := range n.Provenance.Assertions[0].Reverification {
					if ch.Result != provenance.ResultVerified || ch.Detail != "confirmed by the slow substrate" {
						t.Errorf("%+v", ch)
					}
				}
			})
			if n := calls.Load(); n != 2 {
				t.Errorf("%d re-verifications, want one per annotation of A's EVIDENCE", n)
			}
		})
	}
}
