package runner_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/jstest"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/partition"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

// The runner reads the partitioned record: the fold sees each message
// under the subject it was published on (ledger.Layout.Original), so a
// deliberation folds as it does unpartitioned. A message stored under a
// mapped subject whose partition is not its deliberation's (a server that
// lacks the mapping let it be published straight there) names no
// deliberation: it is a rejection (subject.invalid), and the runner goes
// on.
func TestRunner_PartitionedRecord(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A server without the mapping: the test stores the mapped subjects
	// itself, a misplaced one among them.
	_, nc := jstest.Start(t)
	js, _ := jetstream.New(nc)
	stream, err := ledger.Partitioned.Ensure(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var rejected []projector.Outcome
	r, err := runner.New(ctx, js, stream, runner.Config{Projector: projector.Options{Rules: termination.Rules{}},
		Observe: func(out projector.Outcome, _, _ uint64) {
			if out.Rejection != nil {
				mu.Lock()
				rejected = append(rejected, out)
				mu.Unlock()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Layout() != ledger.Partitioned {
		t.Fatalf("the runner reads the %s record", r.Layout())
	}
	publish := func(subject string, data []byte) uint64 {
		t.Helper()
		ack, err := js.Publish(ctx, subject, data)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	const id = "0195b3c1-7c2a-7d4e-8f10-2a3b4c5d6e7f" // partition 19
	publish(ledger.Partitioned.Stored(wire.ControlSubject(id)), []byte(`{"op":"open","charter":{"title":"t"}}`))
	claim := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "stored mapped"}})
	publish(ledger.Partitioned.Stored(wire.ArtifactSubject(id, "alice")), claim.Canonical)
	other := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "misplaced"}})
	misplaced := partition.Prefix + "20." + id + ".art.alice"
	if _, _, err := partition.Original(misplaced); err == nil {
		t.Fatalf("%s is not misplaced", misplaced)
	}
	bad := publish(misplaced, other.Canonical)
	last := publish(ledger.Partitioned.Stored(wire.ArtifactSubject(id, "bob")), events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "after it"}}).Canonical)

	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	if err := r.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var artifacts int
	var participants map[string]int
	if !r.ReadDeliberation(id, func(d *projector.Deliberation) {
		artifacts = d.Artifacts()
		participants = d.ParticipantCounts()
	}) {
		t.Fatal("the deliberation was not opened: the fold did not see the control subject as published")
	}
	if artifacts != 2 || participants["alice"] != 1 || participants["bob"] != 1 {
		t.Errorf("%d artifacts by %v: want alice's and bob's, not the misplaced one", artifacts, participants)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(rejected) != 1 || rejected[0].Rejection.Position != bad || rejected[0].Rejection.Code != projector.CodeSubjectInvalid {
		t.Errorf("rejections %+v: want the misplaced message's, subject.invalid at %d", rejected, bad)
	}
}
