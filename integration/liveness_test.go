package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/wire"
)

// judgmentBound is the bound docs/AUTHORITY.md states for a due judgment:
// the supervisor's MaxWait and tick, with room for the publish.
const judgmentBound = 2 * time.Second

// Junk under a deliberation every 100 ms, from a token the charter does
// not name, cannot postpone a due judgment: a limit breach's FAILURE, a
// verified decision's completion and the checkpoint that follows the end
// are published within the bound, measured in stream time from the
// message that made them due.
func TestHostile_JunkCannotPostponeJudgment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, nc := engineWith(t, false)
	js, _ := jetstream.New(nc)
	alice, _ := client.New(nc, "alice")
	id, err := alice.Open(ctx, client.Charter{Title: "under junk", Participants: []string{"alice"}, Limits: map[string]any{"max_artifact_bytes": 600}})
	if err != nil {
		t.Fatal(err)
	}
	jctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	junk := 0
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-jctx.Done():
				return
			case <-tick.C:
				if _, err := js.Publish(jctx, wire.ArtifactSubject(id, "junk"), []byte(`{"junk":true}`)); err == nil {
					junk++
				}
			}
		}
	}()
	defer func() { stop(); wg.Wait() }()

	streamTime := func(seq uint64) time.Time {
		t.Helper()
		m, err := s.Stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		return m.Time
	}
	// The supervisor artifact of type typ that answers, found in the DAG.
	answered := func(typ events.Type, after uint64) uint64 {
		t.Helper()
		for ctx.Err() == nil {
			var at uint64
			s.Runner.ReadDeliberation(id, func(d *projector.Deliberation) {
				d.Nodes(func(_ canon.Digest, n projector.Node) {
					if at == 0 && n.Participant == wire.SupervisorToken && n.Type == typ && n.Seq > after {
						at = n.Seq
					}
				})
			})
			if at > 0 {
				return at
			}
			// Until something new is applied (the junk keeps coming).
			info, err := s.Stream.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s.Runner.WaitFor(ctx, info.State.LastSeq+1)
		}
		t.Fatalf("no %s", typ)
		return 0
	}
	check := func(what string, due, done uint64) {
		t.Helper()
		took := streamTime(done).Sub(streamTime(due))
		t.Logf("%s published %v after the message that made it due (junk every 100 ms)", what, took)
		if took > judgmentBound && !underRace {
			t.Errorf("%s took %v, more than %v", what, took, judgmentBound)
		}
	}
	// A breach: a claim over max_artifact_bytes.
	big := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: string(make([]byte, 700))}})
	breach, err := alice.PublishArtifact(ctx, id, big)
	if err != nil {
		t.Fatal(err)
	}
	check("the breach's FAILURE", breach.Sequence, answered(events.TypeFailure, breach.Sequence))
	// A verified decision.
	c, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "ship it"}})
	if err != nil {
		t.Fatal(err)
	}
	_, dec, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "ship", Status: events.Final,
		ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: c.ID, Relation: events.Decides}}})
	if err != nil {
		t.Fatal(err)
	}
	term := answered(events.TypeTermination, dec.Sequence)
	check("the completion", dec.Sequence, term)
	// The checkpoint the end makes due, whatever junk lands after the
	// TERMINATION (each junk message moves the position it must follow;
	// junk is no judgment, so the checkpoint covers the end and the junk
	// before it).
	for ctx.Err() == nil {
		due := true
		s.Runner.ReadDeliberation(id, func(d *projector.Deliberation) { due = d.CheckpointDue() })
		if !due {
			break
		}
		info, err := s.Stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.Runner.WaitFor(ctx, info.State.LastSeq+1)
	}
	ckpt, err := s.Stream.GetLastMsgForSubject(ctx, wire.CheckpointSubject(id))
	if err != nil {
		t.Fatal(err)
	}
	check("the end's checkpoint", term, ckpt.Sequence)
	if v, _ := s.Queries.Get(id); v.Status != api.StatusCompleted || junk < 3 {
		t.Errorf("status %s after %d junk messages", v.Status, junk)
	}
}
