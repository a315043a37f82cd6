package runner_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

// The bytes between the consumer and the fold are bounded: messages many
// times the in-flight budget, one of them larger than the whole budget, are
// all applied, the consumer waited for the budget, and nothing of it is
// left taken once they are.
func TestInFlightBudget(t *testing.T) {
	b := newBed(t)
	const budget = 64 << 10
	id := "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4b07"
	b.open(id)
	pad := strings.Repeat("x", 20<<10)
	for i := range 40 {
		a := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprint(i, pad)}})
		b.publish(wire.ArtifactSubject(id, "alice"), a.Canonical)
	}
	// Larger than the whole budget: it takes all of it.
	big := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: strings.Repeat("y", 2*budget)}})
	last := b.publish(wire.ArtifactSubject(id, "alice"), big.Canonical)

	r, err := runner.New(context.Background(), b.js, b.stream, runner.Config{Shards: 2, InFlightBytes: budget,
		Projector: projector.Options{Rules: termination.Rules{}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if err := r.WaitFor(wctx, last); err != nil {
		t.Fatalf("the messages were not all applied: %v (in flight %+v)", err, r.InFlight())
	}
	got := -1
	r.ReadDeliberation(id, func(d *projector.Deliberation) { got = d.Artifacts() })
	if got != 41 {
		t.Errorf("%d artifacts admitted, want 41", got)
	}
	st := r.InFlight()
	if st.Max != budget || st.Used != 0 || st.Waits == 0 || st.Peak > budget {
		t.Errorf("in flight %+v: want max %d, nothing left taken, waits, a peak within the budget", st, budget)
	}
}

// A message's headers are held with it (the client keeps them in the same
// buffer as its data), so they are taken of the budget too: messages of a
// few bytes of data and tens of kilobytes of headers make the consumer
// wait for the budget as their data alone would not.
func TestInFlightBudget_CountsHeaders(t *testing.T) {
	b := newBed(t)
	const budget = 64 << 10
	id := "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4b08"
	b.open(id)
	var last uint64
	for i := range 20 {
		m := nats.NewMsg(wire.ControlSubject(id))
		m.Data = []byte(`{"op":"x"}`)
		m.Header.Set("Padding", strings.Repeat("h", 20<<10))
		m.Header.Set("Nats-Msg-Id", fmt.Sprint("headers-", i))
		ack, err := b.js.PublishMsg(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	r, err := runner.New(context.Background(), b.js, b.stream, runner.Config{Shards: 2, InFlightBytes: budget,
		Projector: projector.Options{Rules: termination.Rules{}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if err := r.WaitFor(wctx, last); err != nil {
		t.Fatalf("the messages were not all applied: %v (in flight %+v)", err, r.InFlight())
	}
	if st := r.InFlight(); st.Waits == 0 || st.Used != 0 {
		t.Errorf("in flight %+v: 400 KB of headers against a 64 KiB budget, and no wait", st)
	}
}
