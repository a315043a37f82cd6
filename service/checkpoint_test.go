package service_test

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/signing"
	"github.com/parley-engine/parley/tlog"
	"github.com/parley-engine/parley/wire"
)

// The engine signs what it says and checkpoints the record: its key is
// created in the data directory at the first start (mode 0600) and kept
// across restarts; the supervisor's TERMINATION carries a signature by it;
// after the decision and after the end a checkpoint signed by it is in the
// record (the fold admitted both: their size and root are the log's);
// every message of the record has a receipt that verifies with the
// engine's public key alone and names the message's subject and bytes;
// a client without credentials cannot publish a checkpoint.
func TestService_SignsAndCheckpoints(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	s := start(t, dir)
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	nc := dial(t, s)
	alice, _ := client.New(nc, "alice")
	key := s.Credentials().EngineKey
	if !signing.ValidKey(key) {
		t.Fatalf("engine key %q", key)
	}
	if got, err := alice.EngineKey(ctx); err != nil || got != key {
		t.Fatalf("EngineKey = %q, %v; want %q", got, err, key)
	}
	if fi, err := os.Stat(filepath.Join(dir, service.EngineKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v %v", fi, err)
	}
	id, err := alice.Open(ctx, client.Charter{Title: "Checkpointed", Participants: []string{"alice"}})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Logs are trees."}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "adopt", Status: events.Final},
		References: []events.Reference{{Target: c.ID, Relation: events.Decides}}}); err != nil {
		t.Fatal(err)
	}
	// The supervisor completes it; checkpoints follow the decision and the end.
	var n int
	var size uint64
	eventually.True(t, 30*time.Second, "the end checkpointed", func() bool {
		done := false
		s.Runner.ReadDeliberation(id, func(d *projector.Deliberation) {
			n, size = d.Checkpoints()
			done = d.Status == api.StatusCompleted && !d.CheckpointDue() && n >= 1
		})
		return done
	})
	// open, claim, decision, TERMINATION: the supervisor judged the
	// decision and ended the deliberation in one step, and one checkpoint
	// covers both.
	if n != 1 || size != 4 {
		t.Errorf("%d checkpoints, the last covering %d messages; want 1 covering 4", n, size)
	}
	js, _ := jetstream.New(nc)
	// The engine's own reads (participants have no direct gets).
	term, err := s.Stream.GetLastMsgForSubject(ctx, wire.ArtifactSubject(id, wire.SupervisorToken))
	if err != nil {
		t.Fatal(err)
	}
	h, err := signing.FromHeader(term.Header)
	if err != nil || h.Key != key {
		t.Fatalf("the TERMINATION's signature headers: %+v, %v", h, err)
	}
	a, err := events.Validate(term.Data)
	if err != nil {
		t.Fatal(err)
	}
	if err := signing.VerifyKey(id, wire.SupervisorToken, a.ID.String(), h); err != nil {
		t.Fatalf("the TERMINATION's signature: %v", err)
	}

	// Receipts of every message, checked with the public key alone.
	origin, _ := tlog.Origin(id)
	v, err := tlog.NewVerifier(key, origin)
	if err != nil {
		t.Fatal(err)
	}
	list, err := alice.Receipts(ctx, id, 1, 2, 3, 4, 5, 6, 99)
	if err != nil {
		t.Fatal(err)
	}
	subjects := map[uint64]string{1: wire.ControlSubject(id), 2: wire.ArtifactSubject(id, "alice"), 3: wire.ArtifactSubject(id, "alice"),
		4: wire.ArtifactSubject(id, wire.SupervisorToken)}
	for _, it := range list.Receipts {
		switch {
		case it.Ordinal <= 4:
			if it.Receipt == "" {
				t.Errorf("ordinal %d: no receipt: %s %s", it.Ordinal, it.Code, it.Message)
				continue
			}
			r, leaf, cp, err := tlog.VerifyReceipt([]byte(it.Receipt), origin, v)
			if err != nil {
				t.Errorf("ordinal %d: %v", it.Ordinal, err)
				continue
			}
			if r.Index != it.Ordinal-1 || leaf.Subject != subjects[it.Ordinal] || cp.Size <= r.Index {
				t.Errorf("ordinal %d: index %d, subject %s, checkpoint of %d", it.Ordinal, r.Index, leaf.Subject, cp.Size)
			}
			if it.Ordinal == 2 && leaf.DataHash != sha(c.Canonical) {
				t.Errorf("the claim's receipt names other bytes")
			}
		case it.Ordinal == 5:
			// The checkpoint is no message of the record.
			if it.Code != api.CodeReceiptNoOrdinal {
				t.Errorf("ordinal 5: %+v, want %s", it, api.CodeReceiptNoOrdinal)
			}
		default:
			if it.Code != api.CodeReceiptNoOrdinal {
				t.Errorf("ordinal %d: %+v, want %s", it.Ordinal, it, api.CodeReceiptNoOrdinal)
			}
		}
	}

	// Nobody without credentials publishes a checkpoint.
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = js.Publish(pctx, wire.CheckpointSubject(id), []byte("forged"), jetstream.WithRetryAttempts(0))
	pcancel()
	if err == nil {
		t.Error("a client without credentials published a checkpoint")
	}
	s.Runner.ReadDeliberation(id, func(d *projector.Deliberation) {
		if d.LogSize() != 4 {
			t.Errorf("the log has %d messages after the forged checkpoint, want 4", d.LogSize())
		}
	})

	// The key survives a restart.
	s.Close()
	closed = true
	s2 := start(t, dir)
	defer s2.Close()
	if s2.Credentials().EngineKey != key {
		t.Errorf("the engine's key changed across a restart")
	}
}

func sha(b []byte) tlog.Hash { return sha256.Sum256(b) }
