package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/internal/jstest"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/wire"
)

func connect(t *testing.T) jetstream.JetStream {
	t.Helper()
	_, nc := jstest.Start(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func TestEnsure(t *testing.T) {
	js := connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := ledger.Ensure(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if err := ledger.Check(cfg); err != nil {
		t.Fatalf("created an unsafe stream: %v", err)
	}
	// Idempotent.
	if _, err := ledger.Ensure(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	// The server enforces what the configuration promises.
	ack, err := js.Publish(ctx, "parley.0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.ctl", []byte(`{"op":"open","charter":{"title":"t"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(ctx, ack.Sequence); err == nil {
		t.Error("a message was deleted")
	}
	if err := s.Purge(ctx); err == nil {
		t.Error("the stream was purged")
	}
	cfg.DenyPurge = false
	if _, err := js.UpdateStream(ctx, cfg); err == nil {
		t.Error("deny_purge was turned off")
	}
	// The query service's subjects are not captured.
	if _, err := js.Publish(ctx, "parley.api.list", nil); err == nil {
		t.Error("parley.api.list was stored")
	}
}

func TestEnsure_RefusesUnsafe(t *testing.T) {
	js := connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := ledger.StreamConfig(1)
	cfg.MaxAge = time.Hour
	cfg.DenyPurge = false
	cfg.Discard = jetstream.DiscardOld
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	_, err := ledger.Ensure(ctx, js, 1)
	if !errors.Is(err, ledger.ErrUnsafeStream) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"max_age", "deny_purge", "discard is old"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

func TestCheck(t *testing.T) {
	good := ledger.StreamConfig(3)
	if err := ledger.Check(good); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*jetstream.StreamConfig){
		"memory":     func(c *jetstream.StreamConfig) { c.Storage = jetstream.MemoryStorage },
		"workqueue":  func(c *jetstream.StreamConfig) { c.Retention = jetstream.WorkQueuePolicy },
		"max msgs":   func(c *jetstream.StreamConfig) { c.MaxMsgs = 10 },
		"max bytes":  func(c *jetstream.StreamConfig) { c.MaxBytes = 10 },
		"per subj":   func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = 1 },
		"deny del":   func(c *jetstream.StreamConfig) { c.DenyDelete = false },
		"rollup":     func(c *jetstream.StreamConfig) { c.AllowRollup = true },
		"ttl":        func(c *jetstream.StreamConfig) { c.AllowMsgTTL = true },
		"subjects":   func(c *jetstream.StreamConfig) { c.Subjects = []string{"parley.*.ctl"} },
		"del marker": func(c *jetstream.StreamConfig) { c.SubjectDeleteMarkerTTL = time.Minute },
	} {
		c := good
		mutate(&c)
		if err := ledger.Check(c); !errors.Is(err, ledger.ErrUnsafeStream) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestMsgIDs_For(t *testing.T) {
	a, b := wire.NewMsgIDs(), wire.NewMsgIDs()
	subject := "parley.019ad3f0-0000-7000-8000-000000000001.art.bob"
	id := "sha256:" + strings.Repeat("ab", 32)
	got := a.Artifact(subject, id)
	if len(got) != 32 || strings.Contains(got, id) || strings.Contains(got, subject) {
		t.Fatalf("Artifact = %q: want 32 hex digits that reveal neither the subject nor the artifact", got)
	}
	if a.Artifact(subject, id) != got {
		t.Fatal("the same publisher must get the same id for the same message (its retries are absorbed)")
	}
	if b.Artifact(subject, id) == got {
		t.Fatal("two publishers computed the same id: one could suppress the other's message")
	}
	if a.Artifact(subject+"x", id) == got || a.Control(subject, id) == got || a.For("a", "b") == a.For("ab") {
		t.Fatal("different messages share an id")
	}
}

// A participant who reads the stream sees the ids of stored messages but
// cannot make the stream drop someone else's next message: storing junk
// under the id the old scheme (<deliberation>:<artifact>) predicted, or
// under an id it saw, never makes the real publish a duplicate.
func TestMsgIDs_NoSquatting(t *testing.T) {
	js := connect(t)
	ctx := context.Background()
	if _, err := ledger.Ensure(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	d := "019ad3f0-0000-7000-8000-000000000001"
	bob := wire.NewMsgIDs()
	art := "sha256:" + strings.Repeat("cd", 32)
	subject := "parley." + d + ".art.bob"
	first, err := js.Publish(ctx, subject, []byte("first"), jetstream.WithMsgID(bob.Artifact(subject, "sha256:"+strings.Repeat("01", 32))))
	if err != nil {
		t.Fatal(err)
	}
	seen, err := js.Stream(ctx, wire.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := seen.GetMsg(ctx, first.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	observed := raw.Header.Get(jetstream.MsgIDHeader)
	for _, squat := range []string{d + ":" + art, observed + "x", strings.Repeat("0", 32)} {
		if _, err := js.Publish(ctx, "parley."+d+".art.alice", []byte("junk"), jetstream.WithMsgID(squat)); err != nil {
			t.Fatal(err)
		}
	}
	ack, err := js.Publish(ctx, subject, []byte("bob's objection"), jetstream.WithMsgID(bob.Artifact(subject, art)))
	if err != nil {
		t.Fatal(err)
	}
	if ack.Duplicate {
		t.Fatal("bob's publish was taken for a duplicate of alice's junk")
	}
	retry, err := js.Publish(ctx, subject, []byte("bob's objection"), jetstream.WithMsgID(bob.Artifact(subject, art)))
	if err != nil {
		t.Fatal(err)
	}
	if !retry.Duplicate || retry.Sequence != ack.Sequence {
		t.Fatalf("bob's own retry was not absorbed: %+v", retry)
	}
}
