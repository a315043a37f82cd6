package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/signing"
	"github.com/parley-engine/parley/wire"
)

// The runner carries an artifact's signature headers into the fold and
// verifies them ahead of it: signed by the bound key is admitted; unsigned,
// replayed by another participant or into another deliberation, or signed
// with another key, is refused with the signing code.
func TestSignatures(t *testing.T) {
	b := newBed(t)
	key := func(seed byte) (nkeys.KeyPair, string) {
		kp, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, bytes.Repeat([]byte{seed}, 32))
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		return kp, pub
	}
	alice, alicePub := key(1)
	_, bobPub := key(2)
	mallory, _ := key(3)
	charter, _ := json.Marshal(map[string]any{"op": "open", "charter": map[string]any{"title": "signed",
		"participants": []string{"alice", "bob"}, "keys": map[string]string{"alice": alicePub, "bob": bobPub}, "require_signatures": true}})
	b.publish(wire.ControlSubject(delibA), charter)
	b.publish(wire.ControlSubject(delibB), charter)
	r, cancel, done := b.runner(2)
	defer func() { cancel(); <-done }()

	pub := func(d, token string, a *events.Artifact, h signing.Headers) uint64 {
		t.Helper()
		m := nats.NewMsg(wire.ArtifactSubject(d, token))
		m.Data = a.Canonical
		if h != (signing.Headers{}) {
			h.Set(m.Header)
		}
		ack, err := b.js.PublishMsg(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	claim := func(s string) *events.Artifact {
		return events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: s}})
	}
	sign := func(kp nkeys.KeyPair, d, token string, a *events.Artifact) signing.Headers {
		h, err := signing.Sign(kp, d, token, a.ID.String())
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	a, c, u, w := claim("alice signs"), claim("bob replays"), claim("unsigned"), claim("mallory's key")
	type verdict struct{ delib, code string }
	want := map[uint64]verdict{
		pub(delibA, "alice", a, sign(alice, delibA, "alice", a)):   {delibA, ""},
		pub(delibA, "alice", u, signing.Headers{}):                 {delibA, "signature.missing"},
		pub(delibA, "bob", c, sign(alice, delibA, "alice", c)):     {delibA, "signature.wrong_key"},
		pub(delibB, "alice", a, sign(alice, delibA, "alice", a)):   {delibB, "signature.bad"},
		pub(delibA, "alice", w, sign(mallory, delibA, "alice", w)): {delibA, "signature.wrong_key"},
	}
	var last uint64
	for seq := range want {
		last = max(last, seq)
	}
	eventually.True(t, 10*time.Second, "the runner applies the messages", func() bool { return r.Position() >= last })
	for seq, v := range want {
		raw, err := b.stream.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		o, err := r.Outcome(v.delib, projector.Msg{Seq: seq, Subject: raw.Subject, Data: raw.Data}, nil)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case v.code == "" && o.Verdict != api.VerdictAccepted:
			t.Errorf("position %d: %s %+v, want accepted", seq, o.Verdict, o.Rejection)
		case v.code != "" && (o.Rejection == nil || o.Rejection.Code != v.code):
			t.Errorf("position %d: %s %+v, want %s", seq, o.Verdict, o.Rejection, v.code)
		}
	}
}
