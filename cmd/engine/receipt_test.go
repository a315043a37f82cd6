package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/service"
)

// engine receipt fetches the receipts of a deliberation's messages, waiting
// for the end's checkpoint; engine audit --trusted-key with one passes the
// engine's recording offline (a recording that omits its message fails:
// integration/verify_test.go). Bad arguments are one-line usage errors.
func TestReceipt_FetchAndAudit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	s, err := service.Start(ctx, service.Config{DataDir: filepath.Join(dir, "data"), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
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
	id, _ := alice.Open(ctx, client.Charter{Title: "receipts"})
	claim, ack, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "kept"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.WaitPosition(ctx, id, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	// The decision through engine publish --receipt: a judgment, which a
	// checkpoint follows, so its receipt comes within a second or so.
	dec := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "keep", Status: events.Final},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}}})
	decReceipt := filepath.Join(dir, "decision.tlog-proof")
	if code, _, errs := run(t, string(dec.Canonical), "publish", "--nats", s.NATSURL(), "--data", s.DataDir(), "--deliberation", id, "--as", "alice", "--quiet",
		"--receipt", decReceipt, "--receipt-wait", "30s", "-"); code != exitOK {
		t.Fatalf("publish --receipt: %d %s", code, errs)
	}
	if b, err := os.ReadFile(decReceipt); err != nil || !strings.HasPrefix(string(b), "c2sp.org/tlog-proof@v1\n") {
		t.Fatalf("the decision's receipt: %q %v", b, err)
	}

	out := filepath.Join(dir, "receipts")
	code, stdout, errs := run(t, "", "receipt", "--nats", s.NATSURL(), "--out", out, "--wait", "30s", id, "1", "2", "3")
	if code != exitOK || strings.Count(stdout, ".tlog-proof") != 3 {
		t.Fatalf("engine receipt: %d\n%s\n%s", code, stdout, errs)
	}
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	alice.Watch(wctx, id, func(v api.View) bool { return v.Status != api.StatusCompleted || v.Log.CheckpointDue })
	rec := filepath.Join(dir, "rec.jsonl")
	if code, _, errs := run(t, "", "export", "--nats", s.NATSURL(), "--data", s.DataDir(), "--deliberation", id, "--out", rec); code != 0 {
		t.Fatalf("export: %d %s", code, errs)
	}
	keyFile := filepath.Join(dir, "engine.pub")
	os.WriteFile(keyFile, []byte(s.Credentials().EngineKey+"\n"), 0o600)
	code, stdout, errs = run(t, "", "audit", "--trusted-key", keyFile, "--receipt", filepath.Join(out, "2.tlog-proof"), "--receipt", decReceipt, rec)
	if code != exitOK || !strings.Contains(stdout, "engine (trusted)") {
		t.Fatalf("audit with the engine's key and a receipt: %d\n%s\n%s", code, stdout, errs)
	}
	// Usage errors.
	for _, args := range [][]string{
		{"receipt", "--nats", s.NATSURL(), id},
		{"receipt", "--nats", s.NATSURL(), "not-an-id", "1"},
		{"receipt", "--nats", s.NATSURL(), id, "0"},
		{"receipt", "--nats", s.NATSURL(), id, "x"},
		{"audit", "--receipt", filepath.Join(out, "2.tlog-proof"), rec},
		{"audit", "--trusted-key", "not-a-key-nor-a-file", rec},
	} {
		if code, _, errs := run(t, "", args...); code != exitUsage || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%v: %d %q, want a one-line usage error", args, code, errs)
		}
	}
	// An ordinal past the record: no receipt, exit 1.
	if code, _, _ := run(t, "", "receipt", "--nats", s.NATSURL(), id, "99"); code != exitRejected {
		t.Errorf("an ordinal past the record: %d", code)
	}
}
