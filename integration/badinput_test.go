package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// Bad input on artifact subjects is recorded as a rejection with its code,
// and the engine keeps serving. The stream is created beforehand with a
// dedupe window of 200 ms, so that a resubmission really arrives after it.
func TestBadInput(t *testing.T) {
	ns := startStandalone(t, t.TempDir(), freePort(t))
	defer ns.stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, err := nats.Connect(ns.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	cfg := ledger.StreamConfig(1)
	cfg.Duplicates = time.Second // long enough for the resubmission inside it, short for the test to outlast it
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), NATS: ns.url, HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	alice, _ := client.New(nc, "alice")
	id, err := alice.Open(ctx, client.Charter{Title: "bad input", Participants: []string{"alice", "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	claim, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	pub := func(subject string, data []byte, opts ...jetstream.PublishOpt) uint64 {
		t.Helper()
		ack, err := js.Publish(ctx, subject, data, opts...)
		if err != nil {
			t.Fatalf("publish on %s: %v", subject, err)
		}
		return ack.Sequence
	}
	// Inside the window the stream absorbs the resubmission...
	if ack, err := alice.PublishArtifact(ctx, id, claim); err != nil || !ack.Duplicate {
		t.Fatalf("inside the window: %v %+v", err, ack)
	}
	// ...after it, the stream stores it and the projector refuses it.
	// Until the stream forgets the id, it goes on absorbing it.
	eventually(t, "the stream stores the resubmission after its window", func() bool {
		ack, err := alice.PublishArtifact(ctx, id, claim)
		if err != nil {
			t.Fatalf("after the window: %v", err)
		}
		return !ack.Duplicate
	})
	pub(wire.ArtifactSubject(id, "alice"), []byte("\x00\x01 not json"))
	pub(wire.ArtifactSubject(id, "alice"), []byte(`{"s":"`+strings.Repeat("a", 2<<20)+`"}`))
	pub(wire.ArtifactSubject(id, "carol"), claim.Canonical)
	pub(wire.ArtifactSubject(id, "alice"), []byte(`{"artifact_id":"sha256:`+strings.Repeat("0", 64)+`","protocol_version":"0.1","artifact_type":"CLAIM","payload":{"statement":"x"},"references":[]}`))
	last := pub(wire.ArtifactSubject("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "alice"), claim.Canonical)
	if err := s.Runner.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	rej, err := s.Queries.Rejections(id)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{projector.CodeDuplicate: 1, "json.syntax": 1, "limit.size": 1, projector.CodeNotInCharter: 1, "id.mismatch": 1}
	for code, n := range want {
		if rej.ByCode[code] != n {
			t.Errorf("%s: %d rejections, want %d (all: %v)", code, rej.ByCode[code], n, rej.ByCode)
		}
	}
	for _, r := range rej.Rejections {
		if r.Position == 0 || r.Class == "" || r.Message == "" {
			t.Errorf("rejection without position, class or message: %+v", r)
		}
	}
	if u := s.Queries.Unrouted(); u.ByCode[projector.CodeNotOpen] != 1 {
		t.Errorf("unopened deliberation: %+v", u)
	}
	// Still serving, and the DAG holds the claim once.
	v, err := alice.State(ctx, id)
	if err != nil || v.Artifacts != 1 || v.Rejections != 5 {
		t.Fatalf("state %v %+v", err, v)
	}
}
