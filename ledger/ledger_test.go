package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/ledger"
)

func connect(t *testing.T) jetstream.JetStream {
	t.Helper()
	s, err := embedded.Start(embedded.Config{Dir: t.TempDir(), DontListen: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { embedded.Stop(s) })
	nc, err := nats.Connect("", nats.InProcessServer(s))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
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
