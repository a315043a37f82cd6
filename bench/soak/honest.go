package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
)

// honest is what the honest relays did in a phase.
type honest struct {
	deliberations, completed, verified int
	latencies                          []time.Duration
	errs                               []string
}

// runHonest runs relays scripted honest relays, each with its own
// connection, deliberations back to back until ctx ends (the one under way
// then is finished, within finish): alice claims, bob objects (blocking),
// alice revises, bob brings evidence for the revision, alice decides
// (final), disposing of the objection; the engine's supervisor completes
// the deliberation, and the relay verifies the decision's closure
// (client.Closure at the decision's position). Each publish's ingest
// latency runs from the publish to the engine's projection having applied
// it (client.WaitPosition).
func runHonest(ctx context.Context, e *engine, relays int, finish time.Duration) honest {
	var mu sync.Mutex
	var out honest
	var wg sync.WaitGroup
	for r := range relays {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := e.participant(nats.Timeout(10 * time.Second))
			if err != nil {
				mu.Lock()
				out.errs = append(out.errs, fmt.Sprintf("relay %d: connect: %v", r, err))
				mu.Unlock()
				return
			}
			defer nc.Close()
			alice, _ := client.New(nc, "alice")
			bob, _ := client.New(nc, "bob")
			for n := 0; ctx.Err() == nil; n++ {
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finish)
				lat, done, verified, err := deliberate(dctx, alice, bob, fmt.Sprintf("relay %d, deliberation %d", r, n))
				cancel()
				mu.Lock()
				out.deliberations++
				out.latencies = append(out.latencies, lat...)
				if done {
					out.completed++
				}
				if verified {
					out.verified++
				}
				if err != nil {
					out.errs = append(out.errs, err.Error())
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}

// deliberate runs one deliberation to its end.
func deliberate(ctx context.Context, alice, bob *client.Client, title string) (lat []time.Duration, completed, verified bool, err error) {
	id := uuid.NewString()
	ack, err := alice.Control(ctx, id, client.Control{Op: "open", Charter: &client.Charter{Title: title, Participants: []string{"alice", "bob"}}})
	if err != nil {
		return nil, false, false, fmt.Errorf("%s: open: %w", title, err)
	}
	// The open's verdict: an engine at its bound refuses it.
	if o, err := alice.WaitOutcome(ctx, id, ack.Sequence, ""); err != nil || !o.Took() {
		return nil, false, false, fmt.Errorf("%s: open: %s %s %v", title, o.Code, o.Message, err)
	}
	publish := func(c *client.Client, d events.Draft) (*events.Artifact, error) {
		t0 := time.Now()
		a, ack, err := c.Publish(ctx, id, d)
		if err != nil {
			return nil, err
		}
		if _, err := c.WaitPosition(ctx, id, ack.Sequence); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
		return a, nil
	}
	claim, err := publish(alice, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The read-through cache halves p99 on the mixed workload."}})
	if err != nil {
		return lat, false, false, fmt.Errorf("%s: claim: %w", title, err)
	}
	obj, err := publish(bob, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "Only one workload was measured.", Blocking: true},
		References: []events.Reference{{Target: claim.ID, Relation: events.ObjectsTo}}})
	if err != nil {
		return lat, false, false, fmt.Errorf("%s: objection: %w", title, err)
	}
	rev, err := publish(alice, events.Draft{Type: events.TypeRevision, Payload: events.RevisionPayload{Statement: "The cache halves p99 on the mixed and the write-heavy workloads."},
		References: []events.Reference{{Target: claim.ID, Relation: events.Revises}}})
	if err != nil {
		return lat, false, false, fmt.Errorf("%s: revision: %w", title, err)
	}
	if _, err := publish(bob, events.Draft{Type: events.TypeEvidence,
		Payload:    events.Evidence{Content: "Staging runs of both workloads: p99 44 ms and 51 ms (were 80 ms and 97 ms).", ProvenanceClass: "TRACE_VERIFIED_OBSERVATION"},
		References: []events.Reference{{Target: rev.ID, Relation: events.Supports}, {Target: obj.ID, Relation: events.Considers}}}); err != nil {
		return lat, false, false, fmt.Errorf("%s: evidence: %w", title, err)
	}
	dec, err := publish(alice, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "Adopt the cache as revised.", Status: events.Final,
		ObjectionDispositions: []events.Disposition{{Objection: obj.ID, Disposition: events.Addressed, Rationale: "both workloads measured"}}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: rev.ID, Relation: events.Decides}}})
	if err != nil {
		return lat, false, false, fmt.Errorf("%s: decision: %w", title, err)
	}
	for {
		v, err := alice.State(ctx, id)
		if err != nil {
			return lat, false, false, fmt.Errorf("%s: state: %w", title, err)
		}
		if v.Status == api.StatusCompleted {
			break
		}
		if v.Status.Terminal() {
			return lat, false, false, fmt.Errorf("%s: ended %s", title, v.Status)
		}
		select {
		case <-ctx.Done():
			return lat, false, false, fmt.Errorf("%s: not completed: %w", title, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	res, err := alice.Closure(ctx, id, dec.ID.String(), 0)
	if err != nil {
		return lat, true, false, fmt.Errorf("%s: closure: %w", title, err)
	}
	if !res.OK {
		return lat, true, false, fmt.Errorf("%s: the closure does not verify: %+v", title, res.Findings)
	}
	return lat, true, true, nil
}
