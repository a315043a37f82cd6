package integration

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/signing"
	"github.com/parley-engine/parley/wire"
)

const delib = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"

// deploy/nats.conf, loaded by a real server: the permissions hold.
func TestNATSConf_Permissions(t *testing.T) {
	s, err := embedded.Start(embedded.Config{Dir: t.TempDir(), ConfigFile: "../deploy/nats.conf", Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.Stop(s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	type conn struct {
		nc   *nats.Conn
		js   jetstream.JetStream
		mu   sync.Mutex
		errs []string
	}
	login := func(user string) *conn {
		c := &conn{}
		nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(user, "change-me-"+user),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				c.mu.Lock()
				c.errs = append(c.errs, err.Error())
				c.mu.Unlock()
			}))
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		t.Cleanup(nc.Close)
		c.nc = nc
		c.js, _ = jetstream.New(nc, jetstream.WithDefaultTimeout(2*time.Second))
		return c
	}
	violations := func(c *conn) string {
		c.mu.Lock()
		defer c.mu.Unlock()
		return strings.Join(c.errs, "; ")
	}
	if _, err := nats.Connect(s.ClientURL(), nats.UserInfo("alice", "wrong")); err == nil {
		t.Fatal("a wrong password was accepted")
	}

	engine := login("engine")
	stream, err := ledger.Ensure(ctx, engine.js, 1)
	if err != nil {
		t.Fatalf("the engine user cannot create the stream: %v", err)
	}
	orch := login("orchestrator")
	if _, err := orch.js.Publish(ctx, wire.ControlSubject(delib), []byte(`{"op":"open","charter":{"title":"t"}}`)); err != nil {
		t.Fatalf("orchestrator open: %v", err)
	}
	alice, bob := login("alice"), login("bob")
	claim := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "x"}})

	// A participant publishes under its own token...
	if _, err := alice.js.Publish(ctx, wire.ArtifactSubject(delib, "alice"), claim.Canonical); err != nil {
		t.Fatalf("alice as alice: %v", err)
	}
	// ...and under no other, nor as the supervisor, nor on control.
	denied := func(c *conn, subject string) bool {
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := c.js.Publish(short, subject, claim.Canonical)
		return err != nil
	}
	for _, subject := range []string{wire.ArtifactSubject(delib, "bob"), wire.ArtifactSubject(delib, wire.SupervisorToken), wire.ControlSubject(delib)} {
		if !denied(alice, subject) {
			t.Errorf("alice published on %s", subject)
		}
	}
	if !denied(bob, wire.ArtifactSubject(delib, "alice")) {
		t.Error("bob published as alice")
	}
	// ...and reads the stream with an ordered push consumer, but neither
	// by direct get nor by pull (the answer goes to whatever reply subject
	// the requester names).
	if as, err := alice.js.Stream(ctx, wire.StreamName); err != nil {
		t.Errorf("alice stream info: %v", err)
	} else {
		short, cancel := context.WithTimeout(ctx, time.Second)
		_, err := as.GetMsg(short, 2)
		cancel()
		if err == nil {
			t.Error("alice read by direct get")
		}
		rd, err := ledger.Read(ctx, alice.nc, wire.ArtifactSubject(delib, "alice"), 0)
		if err != nil {
			t.Fatalf("alice ordered push consumer: %v", err)
		}
		if m, err := rd.Next(ctx); err != nil || m.Subject != wire.ArtifactSubject(delib, "alice") {
			t.Errorf("alice ordered push consumer: %v", err)
		}
		rd.Stop()
		cons, err := as.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{wire.ArtifactSubject(delib, "alice")}})
		if err != nil {
			t.Fatalf("alice pull consumer: %v", err)
		}
		if m, err := cons.Next(jetstream.FetchMaxWait(time.Second)); err == nil {
			t.Errorf("alice pulled %s", m.Subject())
		}
	}
	if v := violations(alice); !strings.Contains(v, "Permissions Violation") {
		t.Errorf("alice saw no permission violation: %q", v)
	}
	// The engine publishes as _supervisor.
	if _, err := engine.js.Publish(ctx, wire.ArtifactSubject(delib, wire.SupervisorToken), claim.Canonical); err != nil {
		t.Errorf("engine as _supervisor: %v", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 3 { // open, alice's claim, the supervisor's
		t.Errorf("stream holds %d messages, want 3", info.State.Msgs)
	}

	// The engine cannot delete, purge or update the stream, nor delete a
	// message.
	// (Each refused request is given a second: a denied subject gets no
	// answer.)
	fails := func(f func(context.Context) error) bool {
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return f(short) != nil
	}
	if !fails(func(c context.Context) error { return engine.js.DeleteStream(c, wire.StreamName) }) {
		t.Error("engine deleted the stream")
	}
	if !fails(func(c context.Context) error { return stream.Purge(c) }) {
		t.Error("engine purged the stream")
	}
	if !fails(func(c context.Context) error { return stream.DeleteMsg(c, 1) }) {
		t.Error("engine deleted a message")
	}
	cfg := ledger.StreamConfig(1)
	cfg.Description = "changed"
	if !fails(func(c context.Context) error { _, err := engine.js.UpdateStream(c, cfg); return err }) {
		t.Error("engine updated the stream")
	}
	// Participants cannot either.
	if !fails(func(c context.Context) error { return alice.js.DeleteStream(c, wire.StreamName) }) {
		t.Error("alice deleted the stream")
	}
	// Only the administrator can delete the stream (and even they cannot
	// purge it: the stream denies it).
	admin := login("admin")
	as, err := admin.js.Stream(ctx, wire.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if err := as.Purge(ctx); err == nil {
		t.Error("admin purged a DenyPurge stream")
	}
	if err := admin.js.DeleteStream(ctx, wire.StreamName); err != nil {
		t.Errorf("admin cannot delete the stream: %v", err)
	}
	if _, err := engine.js.Stream(ctx, wire.StreamName); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("after admin delete: %v", err)
	}
}

// engine serve --nats-config deploy/nats.conf: without the engine's user
// it stops with an error that says what is missing (it used to crash on a
// nil connection); with it, it serves, and the file's participants
// publish under their own tokens.
func TestNATSConf_EngineServe(t *testing.T) {
	dir := t.TempDir()
	args := []string{"serve", "--nats-config", "../deploy/nats.conf", "--data", filepath.Join(dir, "data"),
		"--listen", "127.0.0.1:" + strconv.Itoa(freePort(t)), "--http", "127.0.0.1:" + strconv.Itoa(freePort(t))}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, engineBin, args...).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "--user") ||
		strings.Contains(string(out), "panic") || strings.Contains(string(out), "SIGSEGV") {
		t.Fatalf("without a user: %v\n%s", err, out)
	}

	e := &engineProc{t: t, dataDir: filepath.Join(dir, "data"), natsPort: freePort(t), httpPort: freePort(t),
		extraArgs: []string{"--nats-config", "../deploy/nats.conf", "--user", "engine", "--password", "change-me-engine"}}
	e.start()
	defer e.stop()
	nc, err := nats.Connect(e.natsURL(), nats.UserInfo("alice", "change-me-alice"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	alice, _ := client.New(nc, "alice")
	orch, err := nats.Connect(e.natsURL(), nats.UserInfo("orchestrator", "change-me-orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	defer orch.Close()
	o, _ := client.New(orch, "orchestrator")
	id, err := o.Open(ctx, client.Charter{Title: "with deploy/nats.conf"})
	if err != nil {
		t.Fatal(err)
	}
	_, ack, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := alice.WaitPosition(ctx, id, ack.Sequence); err != nil || v.Artifacts != 1 {
		t.Fatalf("%v %+v", err, v)
	}
	if _, err := nats.Connect(e.natsURL()); err == nil {
		t.Error("deploy/nats.conf let in a client without credentials")
	}
}

// Under deploy/nats.conf, in a deliberation whose charter binds keys and
// requires signatures: someone with alice's NATS credentials but not her
// key cannot publish as alice (unsigned: signature.missing; signed with
// another key: signature.wrong_key); alice's signed artifact republished
// by bob (with its headers) is refused, and so is it republished into
// another deliberation of the same charter (signature.bad: the signature
// names the deliberation). alice's own signed artifact is accepted, and
// the engine's supervisor signs the end with the engine's key.
func TestNATSConf_SignaturesBeyondCredentials(t *testing.T) {
	dir := t.TempDir()
	e := &engineProc{t: t, dataDir: filepath.Join(dir, "data"), natsPort: freePort(t), httpPort: freePort(t),
		extraArgs: []string{"--nats-config", "../deploy/nats.conf", "--user", "engine", "--password", "change-me-engine"}}
	e.start()
	defer e.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	connect := func(user string) *nats.Conn {
		nc, err := nats.Connect(e.natsURL(), nats.UserInfo(user, "change-me-"+user))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	aliceKey, _ := nkeys.CreateUser()
	alicePub, _ := aliceKey.PublicKey()
	bobKey, _ := nkeys.CreateUser()
	bobPub, _ := bobKey.PublicKey()
	malloryKey, _ := nkeys.CreateUser()
	alice, _ := client.NewWithOptions(connect("alice"), "alice", client.Options{SigningKey: aliceKey})
	asAliceNoKey, _ := client.New(connect("alice"), "alice")
	asAliceOtherKey, _ := client.NewWithOptions(connect("alice"), "alice", client.Options{SigningKey: malloryKey})
	bobNC := connect("bob")
	o, _ := client.New(connect("orchestrator"), "orchestrator")
	charter := client.Charter{Title: "signed", Participants: []string{"alice", "bob"},
		Keys: map[string]string{"alice": alicePub, "bob": bobPub}, RequireSignatures: true}
	id, err := o.Open(ctx, charter)
	if err != nil {
		t.Fatal(err)
	}
	other, err := o.Open(ctx, charter)
	if err != nil {
		t.Fatal(err)
	}
	verdict := func(c *client.Client, id string, ack *jetstream.PubAck, a *events.Artifact) api.OutcomeReport {
		t.Helper()
		out, err := c.WaitOutcome(ctx, id, ack.Sequence, a.ID.String())
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	code := func(r api.OutcomeReport) string {
		if r.Code == "" {
			return string(r.Outcome)
		}
		return r.Code
	}
	claim := func(s string) events.Draft {
		return events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: s}}
	}
	a, ack, err := asAliceNoKey.Publish(ctx, id, claim("no key"))
	if err != nil {
		t.Fatal(err)
	}
	if got := code(verdict(alice, id, ack, a)); got != "signature.missing" {
		t.Errorf("alice's credentials, no key: %s", got)
	}
	a, ack, _ = asAliceOtherKey.Publish(ctx, id, claim("another key"))
	if got := code(verdict(alice, id, ack, a)); got != "signature.wrong_key" {
		t.Errorf("alice's credentials, another key: %s", got)
	}
	signed, ack, _ := alice.Publish(ctx, id, claim("alice's own"))
	if got := code(verdict(alice, id, ack, signed)); got != string(api.VerdictAccepted) {
		t.Fatalf("alice's signed claim: %s", got)
	}
	// Her message as published, republished by bob and into the other deliberation.
	h, err := signing.Sign(aliceKey, id, "alice", signed.ID.String())
	if err != nil {
		t.Fatal(err)
	}
	replay := func(nc *nats.Conn, subject string) *jetstream.PubAck {
		t.Helper()
		js, _ := jetstream.New(nc)
		m := &nats.Msg{Subject: subject, Data: signed.Canonical, Header: nats.Header{}}
		h.Set(m.Header)
		ack, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(signed.ID.String()+subject))
		if err != nil {
			t.Fatal(err)
		}
		return ack
	}
	if got := code(verdict(alice, id, replay(bobNC, wire.ArtifactSubject(id, "bob")), signed)); got != "signature.wrong_key" {
		t.Errorf("alice's signed artifact republished by bob: %s", got)
	}
	if got := code(verdict(alice, other, replay(connect("alice"), wire.ArtifactSubject(other, "alice")), signed)); got != "signature.bad" {
		t.Errorf("alice's signed artifact in another deliberation: %s", got)
	}
}
