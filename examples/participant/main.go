// Command participant is a runnable example of the Go client: it opens a
// deliberation, publishes a claim, evidence, a blocking objection and a
// final decision that addresses it, waits for the engine's supervisor to
// complete the deliberation, and prints the state the engine projects.
//
// Start the engine first (go run ./cmd/engine serve), then:
//
//	go run ./examples/participant
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
)

func main() {
	url := flag.String("nats", "nats://127.0.0.1:4222", "the engine's NATS URL")
	data := flag.String("data", "./parley-data", "the engine's data directory, whose credentials.json holds the participant user")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// On the embedded default a client without credentials may only read:
	// a participant connects as the engine's participant user.
	creds, err := client.LocalCredentials(*data)
	if err != nil {
		log.Fatal(err)
	}
	if err := run(ctx, *url, os.Stdout, creds); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, url string, out io.Writer, opts ...nats.Option) error {
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return fmt.Errorf("connect to the engine at %s: %w", url, err)
	}
	defer nc.Close()
	alice, err := client.New(nc, "alice")
	if err != nil {
		return err
	}
	bob, err := client.New(nc, "bob")
	if err != nil {
		return err
	}

	id, err := alice.Open(ctx, client.Charter{Title: "Adopt the cache?", Participants: []string{"alice", "bob"}})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "deliberation", id)

	claim, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim,
		Payload: events.Claim{Statement: "The cache halves p99 latency."}})
	if err != nil {
		return err
	}
	evidence, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeEvidence,
		Payload:    events.Evidence{Content: "p99 fell from 80 ms to 41 ms over 10,000 requests.", ProvenanceClass: events.TraceVerifiedObservation},
		References: []events.Reference{{Target: claim.ID, Relation: events.Supports}}})
	if err != nil {
		return err
	}
	objection, _, err := bob.Publish(ctx, id, events.Draft{Type: events.TypeObjection,
		Payload:    events.Objection{Statement: "Only one workload was measured.", Blocking: true},
		References: []events.Reference{{Target: claim.ID, Relation: events.ObjectsTo}}})
	if err != nil {
		return err
	}
	decision, ack, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeDecision,
		Payload: events.Decision{Outcome: "Adopt the cache.", Status: events.Final,
			ObjectionDispositions: []events.Disposition{{Objection: objection.ID, Disposition: events.Addressed,
				Rationale: "A second workload was measured.", By: []canon.Digest{evidence.ID}}}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}, {Target: objection.ID, Relation: events.Considers}}})
	if err != nil {
		return err
	}
	v, err := alice.WaitPosition(ctx, id, ack.Sequence)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "decision", decision.ID)
	// The decision is final and its closure verifies: the engine's
	// supervisor completes the deliberation with a TERMINATION.
	for v.Status == "open" {
		select {
		case <-ctx.Done():
			return fmt.Errorf("the deliberation was not completed: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		if v, err = alice.State(ctx, id); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "status %s, %d artifacts, %d open blocking objections, %d rejections\n",
		v.Status, v.Artifacts, len(v.OpenBlockingObjections), v.Rejections)
	fmt.Fprintln(out, "state_digest", v.StateDigest)
	return nil
}
