package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/tlog"
	"github.com/parley-engine/parley/tlog/cosign"
	"github.com/parley-engine/parley/wire"
)

func TestWitness_BadArguments(t *testing.T) {
	dir := t.TempDir()
	kp, _ := nkeys.CreateUser()
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	key := filepath.Join(dir, "w.nk")
	os.WriteFile(key, seed, 0o600)
	notSeed := filepath.Join(dir, "pub")
	os.WriteFile(notSeed, []byte(pub+"\n"), 0o600)
	rec := filepath.Join(dir, "rec.jsonl")
	os.WriteFile(rec, []byte("{}\n"), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"witness"}, "--key FILE is required"},
		{[]string{"witness", "--key", filepath.Join(dir, "none")}, "--key: open"},
		{[]string{"witness", "--key", key}, "--engine-key is required"},
		{[]string{"witness", "--key", key, "--engine-key", "nope"}, "--engine-key nope: neither an nkeys public key"},
		{[]string{"witness", "--key", key, "--engine-key", key}, "the file holds no nkeys public key"},
		{[]string{"witness", "--key", notSeed, "--engine-key", pub}, "the key"},
		{[]string{"witness", "--key", key, "--engine-key", notSeed, "--name", "a.b"}, `the name "a.b" is not a token`},
		{[]string{"witness", "--key", key, "--engine-key", pub, "extra"}, "no arguments, only flags"},
		{[]string{"witness", "--engine-kee", pub}, "engine witness -h"},
		{[]string{"witness", "--key", key, "--engine-key", pub, "--dir", filepath.Join(dir, "d"), "--nats", "nats://127.0.0.1:1"}, "engine witness: "},
		{[]string{"audit", "--witness", "w+00000000+AAAA", rec}, "need --trusted-key"},
		{[]string{"audit", "--trusted-key", pub, "--witness", "w:" + pub, rec}, "--witness needs --checkpoint"},
		{[]string{"audit", "--trusted-key", pub, "--checkpoint", rec, "--witness", "nobody", rec}, "--witness nobody: not a witness's verifier key"},
		{[]string{"audit", "--trusted-key", pub, "--checkpoint", rec, "--witness", "w:nope", rec}, "--witness w:nope"},
	} {
		code, _, errs := run(t, "", c.args...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
}

// engine witness against a live engine cosigns the checkpoints of a
// deliberation to its end; engine audit --witness accepts the note it
// kept, and refuses the engine's note alone.
func TestWitness_CosignsForTheAudit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dataDir := t.TempDir()
	s, err := service.Start(ctx, service.Config{DataDir: dataDir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	dir := t.TempDir()
	kp, _ := nkeys.CreateUser()
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	keyFile := filepath.Join(dir, "w.nk")
	os.WriteFile(keyFile, seed, 0o600)
	engineKey := s.Credentials().EngineKey
	engineKeyFile := filepath.Join(dir, "engine.pub")
	os.WriteFile(engineKeyFile, []byte(engineKey+"\n"), 0o600)
	notes := filepath.Join(dir, "notes")

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var out, errs bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Run(wctx, []string{"witness", "--nats", s.NATSURL(), "--data", s.DataDir(), "--key", keyFile, "--engine-key", engineKeyFile, "--name", "w1", "--dir", notes},
			strings.NewReader(""), &out, &errs)
	}()

	alice, _ := client.New(nc, "alice")
	id, err := alice.Open(ctx, client.Charter{Title: "witnessed", Participants: []string{"alice"}})
	if err != nil {
		t.Fatal(err)
	}
	claim, _, _ := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The cache halves p99 latency."}})
	alice.Publish(ctx, id, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "One workload only.", Blocking: true},
		References: []events.Reference{{Target: claim.ID, Relation: events.ObjectsTo}}})
	alice.Publish(ctx, id, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "Adopt it.", Status: events.Final,
		ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}}})
	eventually.True(t, 30*time.Second, "a checkpoint after the FAILURE", func() bool {
		v, err := alice.State(ctx, id)
		return err == nil && v.Log.Checkpoints > 0 && !v.Log.CheckpointDue
	})
	if err := alice.Cancel(ctx, id, "enough"); err != nil {
		t.Fatal(err)
	}
	var final api.View
	eventually.True(t, 30*time.Second, "a checkpoint of the end", func() bool {
		v, err := alice.State(ctx, id)
		final = v
		return err == nil && v.Status.Terminal() && !v.Log.CheckpointDue && v.Log.Covered == v.Log.Size
	})
	lastCheckpointSeq := lastSeq(t, s)
	cosigned := filepath.Join(notes, id, strconv.FormatUint(final.Log.Size, 10)+".note")
	eventually.True(t, 30*time.Second, "the witness's note of the end", func() bool {
		_, err := os.Stat(cosigned)
		return err == nil
	})
	// The recording, as the engine holds it now.
	rec := filepath.Join(dir, "rec.jsonl")
	if code, _, e := run(t, "", "export", "--nats", s.NATSURL(), "--data", s.DataDir(), "--deliberation", id, "--out", rec); code != 0 {
		t.Fatalf("export: %d %s", code, e)
	}
	// The operator, who holds the engine's key, signs another log of the
	// same size and publishes it: the witness says so loudly and goes on.
	c := s.Credentials()
	op, err := nats.Connect(c.NATSURL, nats.UserInfo(c.NATSUser, c.NATSPassword))
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	engineSeed, err := os.ReadFile(filepath.Join(dataDir, service.EngineKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	origin, _ := tlog.Origin(id)
	signer, err := tlog.NewSigner(bytes.TrimSpace(engineSeed), origin)
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := tlog.Sign(tlog.Checkpoint{Origin: origin, Size: final.Log.Size, Root: tlog.Hash{7}}, signer)
	fm := nats.NewMsg(wire.CheckpointSubject(id))
	fm.Data = forged
	fm.Header.Set("Parley-Key", engineKey)
	if err := op.PublishMsg(fm); err != nil {
		t.Fatal(err)
	}
	refused := filepath.Join(notes, id, "refused-"+strconv.FormatUint(final.Log.Size, 10)+".note")
	eventually.True(t, 30*time.Second, "the forged note kept apart", func() bool {
		_, err := os.Stat(refused)
		return err == nil
	})
	stop()
	if code := <-done; code != exitOK {
		t.Fatalf("witness exit %d: %s", code, errs.String())
	}
	vkey, _ := cosign.VerifierKey(pub, "w1")
	if strings.TrimSpace(out.String()) != vkey {
		t.Fatalf("stdout %q, want the verifier key %s", out.String(), vkey)
	}
	if e := errs.String(); !strings.Contains(e, "cosigned "+id+" at "+strconv.FormatUint(final.Log.Size, 10)+" messages") ||
		!strings.Contains(e, "may not subscribe to parley.witness.w1.checkpoint") ||
		!strings.Contains(e, "SECOND HISTORY: deliberation "+id) || !strings.Contains(e, "kept in "+refused) {
		t.Fatalf("stderr: %s", e)
	}

	// The engine's own note of the end, as the stream holds it (before
	// the forged one).
	js, _ := op.JetStream()
	m, err := js.GetMsg(wire.StreamName, lastCheckpointSeq)
	if err != nil || m.Subject != wire.CheckpointSubject(id) {
		t.Fatalf("the engine's last checkpoint: %v %+v", err, m)
	}
	engineOnly := filepath.Join(dir, "engine.note")
	os.WriteFile(engineOnly, m.Data, 0o600)
	other, _ := nkeys.CreateUser()
	otherPub, _ := other.PublicKey()

	for _, c := range []struct {
		note, witness string
		code          int
		want          string
	}{
		{cosigned, vkey, exitOK, "OK"},
		{cosigned, "w1:" + pub, exitOK, "OK"},
		{engineOnly, "", exitOK, "OK"},
		{engineOnly, vkey, exitRejected, "audit.not_witnessed"},
		{cosigned, "w1:" + otherPub, exitRejected, "audit.not_witnessed"},
		{cosigned, "w2:" + pub, exitRejected, "audit.not_witnessed"},
	} {
		args := []string{"audit", "--trusted-key", engineKey, "--checkpoint", c.note}
		if c.witness != "" {
			args = append(args, "--witness", c.witness)
		}
		code, stdout, stderr := run(t, "", append(args, rec)...)
		if code != c.code || !strings.Contains(stdout, c.want) {
			t.Errorf("%v: exit %d, want %d and %q:\n%s%s", args, code, c.code, c.want, stdout, stderr)
		}
	}
}
