package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/service"
)

// The engine's signed checkpoints of a deliberation's log are statements
// about its record, not messages of it: engine watch shows each as the
// engine's, without an ordinal, with the messages it covers (every one
// before it), never as a rejection.
//
// On both layouts of the record (docs/SCALING.md): engine watch finds the
// record's stream by asking.
func TestWatch_Checkpoint(t *testing.T) {
	for _, partitioned := range []bool{false, true} {
		t.Run(map[bool]string{false: "unpartitioned", true: "partitioned"}[partitioned], func(t *testing.T) { watchCheckpoint(t, partitioned) })
	}
}

func watchCheckpoint(t *testing.T, partitioned bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", Partitioned: partitioned})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	alice, _ := client.New(nc, "alice")
	id, err := alice.Open(ctx, client.Charter{Title: "Adopt the cache?", Participants: []string{"alice"}})
	if err != nil {
		t.Fatal(err)
	}
	claim, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The cache halves p99 latency."}})
	if err != nil {
		t.Fatal(err)
	}
	alice.Publish(ctx, id, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "One workload only.", Blocking: true},
		References: []events.Reference{{Target: claim.ID, Relation: events.ObjectsTo}}})
	// A final decision that hides the objection: the supervisor's FAILURE
	// is a judgment, and a checkpoint follows it.
	alice.Publish(ctx, id, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "Adopt it.", Status: events.Final,
		ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}}})
	if !eventually.Within(30*time.Second, func() bool {
		v, err := alice.State(ctx, id)
		return err == nil && v.Log.Checkpoints > 0 && !v.Log.CheckpointDue
	}) {
		t.Fatal("no checkpoint of the log")
	}
	if err := alice.Cancel(ctx, id, "enough"); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, "", "watch", "--nats", s.NATSURL(), "--data", s.DataDir(), id)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	m := regexp.MustCompile(`(?m)^ {6}engine +checkpoint  signed checkpoint of the log: messages #1 to #(\d+)$`).FindStringSubmatchIndex(out)
	if m == nil || strings.Contains(out, "REJECTED : ") {
		t.Fatalf("no checkpoint line:\n%s", out)
	}
	covered, _ := strconv.Atoi(out[m[2]:m[3]])
	if before := strings.Count(out[:m[0]], "\n#"); before+1 != covered && strings.HasPrefix(out, "#") && before+1 != covered {
		t.Errorf("the checkpoint covers #1 to #%d, and %d messages come before it:\n%s", covered, before+1, out)
	}
}
