package projector_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/signing"
	supervisor "github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

const delib2 = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c"

// userKey is a deterministic nkeys user key pair.
func userKey(t testing.TB, b byte) nkeys.KeyPair {
	t.Helper()
	kp, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func pub(t testing.TB, kp nkeys.KeyPair) string {
	t.Helper()
	k, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func sign(t testing.TB, kp nkeys.KeyPair, d, token string, a *events.Artifact) signing.Headers {
	t.Helper()
	h, err := signing.Sign(kp, d, token, a.ID.String())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func openSigned(keys map[string]string, require bool, participants ...string) string {
	ch := map[string]any{"title": "signed", "keys": keys}
	if require {
		ch["require_signatures"] = true
	}
	if len(participants) > 0 {
		ch["participants"] = participants
	}
	b, _ := json.Marshal(map[string]any{"op": "open", "charter": ch})
	return string(b)
}

// signedFeed applies messages with their signature headers, with the
// runner's verdict precomputed (prepared) or left to the fold.
type signedFeed struct {
	*feed
	prepared bool
}

func (f signedFeed) signed(d, participant string, a *events.Artifact, h signing.Headers) projector.Outcome {
	f.seq++
	m := projector.Msg{Seq: f.seq, Subject: wire.ArtifactSubject(d, participant), Data: a.Canonical, Signature: h}
	if f.prepared {
		m.Artifact, m.Invalid = events.NewValidator().ValidateTransient(m.Data)
		projector.PrepareSignature(&m)
		if h != (signing.Headers{}) && !m.SignatureChecked {
			f.t.Fatal("PrepareSignature did not check a signed artifact")
		}
	}
	return f.p.Apply(m)
}

func wantAccepted(t *testing.T, o projector.Outcome) {
	t.Helper()
	if o.Rejection != nil || len(o.Accepted) != 1 {
		t.Fatalf("outcome %+v, want accepted", o)
	}
}

func TestSignatures(t *testing.T) {
	for _, prepared := range []bool{false, true} {
		t.Run(fmt.Sprintf("prepared=%v", prepared), func(t *testing.T) {
			alice, bob, mallory := userKey(t, 1), userKey(t, 2), userKey(t, 3)
			keys := map[string]string{"alice": pub(t, alice), "bob": pub(t, bob)}
			f := signedFeed{newFeed(t), prepared}
			if o := f.ctl(openSigned(keys, true, "alice", "bob")); o.Rejection != nil {
				t.Fatal(o.Rejection)
			}
			f.raw(wire.ControlSubject(delib2), []byte(openSigned(keys, true, "alice", "bob")))

			// alice's signed artifact is admitted.
			a := claim("signed by alice")
			ha := sign(t, alice, delib, "alice", a)
			wantAccepted(t, f.signed(delib, "alice", a, ha))

			// Unsigned: refused when the charter requires signatures.
			o := f.signed(delib, "alice", claim("unsigned"), signing.Headers{})
			wantRejection(t, o, "signature.missing")
			if o.Rejection.Class != signing.ClassSignature {
				t.Errorf("class %s", o.Rejection.Class)
			}

			// alice's signature replayed by bob: the same bytes on bob's
			// subject, with alice's headers (her key is not bob's) or with
			// bob's key named (her signature is not his).
			b := claim("alice's words, bob's subject")
			hb := sign(t, alice, delib, "alice", b)
			wantRejection(t, f.signed(delib, "bob", b, hb), "signature.wrong_key")
			wantRejection(t, f.signed(delib, "bob", b, signing.Headers{Key: pub(t, bob), Signature: hb.Signature}), "signature.bad")

			// Replayed into another deliberation with the same binding.
			c := claim("for the first deliberation")
			hc := sign(t, alice, delib, "alice", c)
			wantRejection(t, f.signed(delib2, "alice", c, hc), "signature.bad")
			wantAccepted(t, f.signed(delib, "alice", c, hc))

			// Signed with a key not bound to the token.
			d := claim("mallory's key")
			wantRejection(t, f.signed(delib, "alice", d, sign(t, mallory, delib, "alice", d)), "signature.wrong_key")
			hm := sign(t, mallory, delib, "alice", d)
			wantRejection(t, f.signed(delib, "alice", d, signing.Headers{Key: pub(t, alice), Signature: hm.Signature}), "signature.bad")
			// Malformed headers.
			wantRejection(t, f.signed(delib, "alice", d, signing.Headers{Key: pub(t, alice)}), "signature.malformed")
			// The signature of another artifact.
			wantRejection(t, f.signed(delib, "alice", d, ha), "signature.bad")

			// The rejections are counted by code, and the record holds
			// two artifacts.
			if got := f.d().Artifacts(); got != 2 {
				t.Errorf("%d artifacts, want 2", got)
			}
		})
	}
}

// A binding without require_signatures checks the signatures present and
// accepts unsigned artifacts; a token it does not bind cannot sign. No
// binding: the headers are ignored.
func TestSignatures_Optional(t *testing.T) {
	for _, prepared := range []bool{false, true} {
		t.Run(fmt.Sprintf("prepared=%v", prepared), func(t *testing.T) {
			alice, mallory := userKey(t, 1), userKey(t, 3)
			f := signedFeed{newFeed(t), prepared}
			f.ctl(openSigned(map[string]string{"alice": pub(t, alice)}, false))
			wantAccepted(t, f.signed(delib, "alice", claim("unsigned"), signing.Headers{}))
			wantAccepted(t, f.signed(delib, "carol", claim("carol unsigned"), signing.Headers{}))
			a := claim("signed")
			wantAccepted(t, f.signed(delib, "alice", a, sign(t, alice, delib, "alice", a)))
			b := claim("badly signed")
			wantRejection(t, f.signed(delib, "alice", b, sign(t, mallory, delib, "alice", a)), "signature.wrong_key")
			wantRejection(t, f.signed(delib, "alice", b, signing.Headers{Key: pub(t, alice), Signature: sign(t, alice, delib, "alice", a).Signature}), "signature.bad")
			wantRejection(t, f.signed(delib, "carol", b, sign(t, mallory, delib, "carol", b)), "signature.unknown_token")

			g := signedFeed{newFeed(t), prepared}
			g.ctl(`{"op":"open","charter":{"title":"no binding"}}`)
			wantAccepted(t, g.signed(delib, "alice", b, signing.Headers{Key: "junk", Signature: "junk"}))
		})
	}
}

// A header given twice is kept joined, and refused as malformed.
func TestSignatureOf(t *testing.T) {
	h := map[string][]string{signing.KeyHeader: {"a", "b"}, signing.SignatureHeader: {"s"}}
	got := projector.SignatureOf(wire.ArtifactSubject(delib, "alice"), h)
	if got.Key != "a, b" || got.Signature != "s" {
		t.Errorf("%+v", got)
	}
	if _, err := signing.ParseHeaders(got); err == nil {
		t.Error("joined headers parse")
	}
	if got := projector.SignatureOf(wire.ControlSubject(delib), h); got != (signing.Headers{}) {
		t.Errorf("control subject: %+v", got)
	}
}

func TestSignatures_Charter(t *testing.T) {
	alice := userKey(t, 1)
	for name, open := range map[string]string{
		"bad key":            openSigned(map[string]string{"alice": "UNOTAKEY"}, false),
		"server key":         openSigned(map[string]string{"alice": "N" + pub(t, alice)[1:]}, false),
		"bad token":          openSigned(map[string]string{"_supervisor": pub(t, alice)}, false),
		"require, no keys":   `{"op":"open","charter":{"title":"t","require_signatures":true}}`,
		"participant no key": openSigned(map[string]string{"alice": pub(t, alice)}, true, "alice", "bob"),
	} {
		f := newFeed(t)
		o := f.ctl(open)
		if o.Rejection == nil || o.Rejection.Code != projector.CodeControlInvalid {
			t.Errorf("%s: %+v, want %s", name, o, projector.CodeControlInvalid)
		}
	}
	// The 4 KiB bound on a control message: 60 keys with tokens of up to 4
	// characters fit; 70 do not, and the open is refused as too large.
	fits := func(n int) projector.Outcome {
		keys := map[string]string{}
		for i := range n {
			keys[fmt.Sprintf("p%d", i)] = pub(t, userKey(t, byte(i+1)))
		}
		return newFeed(t).ctl(openSigned(keys, true))
	}
	if o := fits(60); o.Rejection != nil {
		t.Errorf("60 keys: %+v", o.Rejection)
	}
	wantRejection(t, fits(70), projector.CodeControlTooLarge)
}

// The binding is part of the snapshot and of the state digest.
func TestSignatures_Snapshot(t *testing.T) {
	alice := userKey(t, 1)
	f := signedFeed{newFeed(t), false}
	f.ctl(openSigned(map[string]string{"alice": pub(t, alice)}, true))
	a := claim("signed")
	wantAccepted(t, f.signed(delib, "alice", a, sign(t, alice, delib, "alice", a)))
	var buf bytes.Buffer
	if err := f.p.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	q, err := projector.ReadSnapshot(&buf, projector.Options{Rules: supervisor.Rules{}})
	if err != nil {
		t.Fatal(err)
	}
	if f.d().StateDigest() != q.Deliberation(delib).StateDigest() {
		t.Fatal("snapshot changed the state")
	}
	if k := q.Deliberation(delib).Charter.Keys["alice"]; k != pub(t, alice) || !q.Deliberation(delib).Charter.RequireSignatures {
		t.Fatalf("binding after the snapshot: %q", k)
	}
	g := signedFeed{&feed{t: t, p: q, seq: f.seq}, false}
	wantRejection(t, g.signed(delib, "alice", claim("unsigned"), signing.Headers{}), "signature.missing")

	// Two charters that differ only in their binding differ in digest.
	h := newFeed(t)
	h.ctl(openSigned(map[string]string{"alice": pub(t, userKey(t, 2))}, true))
	k := newFeed(t)
	k.ctl(openSigned(map[string]string{"alice": pub(t, userKey(t, 2))}, false))
	if h.d().StateDigest() == k.d().StateDigest() || !strings.HasPrefix(h.d().StateDigest().String(), "sha256:") {
		t.Error("the binding is not in the state digest")
	}
}

// BenchmarkApply_Signature folds the chain of BenchmarkApply (2,000
// artifacts from 10 participants) unsigned in a charter without keys, and
// signed in a charter that requires signatures: verified by the fold
// itself (an offline fold: audit, replay), or with the runner's verdict
// precomputed (validation and PrepareSignature done once ahead of the
// timer, as the runner does them on every core ahead of the fold; compare
// with unsigned-prepared).
func BenchmarkApply_Signature(b *testing.B) {
	const n = 2000
	keys := map[string]string{}
	kps := map[string]nkeys.KeyPair{}
	for i := range 10 {
		tok := fmt.Sprintf("p%d", i)
		kps[tok] = userKey(b, byte(i+1))
		keys[tok] = pub(b, kps[tok])
	}
	build := func(open string, signed bool) []projector.Msg {
		msgs := []projector.Msg{{Subject: wire.ControlSubject(delib), Data: []byte(open)}}
		var prev *events.Artifact
		for i := range n {
			a := claim("root")
			if prev != nil {
				a = events.MustSeal(events.Draft{Type: events.TypeObjection,
					Payload:    events.Objection{Statement: fmt.Sprintf("objection %d: the previous point does not hold for mixed workloads", i), Blocking: i%10 == 0},
					References: []events.Reference{{Target: prev.ID, Relation: events.ObjectsTo}}})
			}
			tok := fmt.Sprintf("p%d", i%10)
			m := projector.Msg{Subject: wire.ArtifactSubject(delib, tok), Data: a.Canonical}
			if signed {
				m.Signature = sign(b, kps[tok], delib, tok, a)
			}
			msgs = append(msgs, m)
			prev = a
		}
		return msgs
	}
	run := func(b *testing.B, msgs []projector.Msg) {
		b.ReportAllocs()
		for b.Loop() {
			p := projector.New(projector.Options{Rules: supervisor.Rules{}})
			for j := range msgs {
				msgs[j].Seq = uint64(j + 1)
				if o := p.Apply(msgs[j]); o.Rejection != nil {
					b.Fatal(o.Rejection)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/artifact")
	}
	b.Run("unsigned", func(b *testing.B) {
		run(b, build(`{"op":"open","charter":{"title":"bench"}}`, false))
	})
	b.Run("signed", func(b *testing.B) {
		run(b, build(openSigned(keys, true), true))
	})
	prepare := func(msgs []projector.Msg) []projector.Msg {
		v := events.NewValidator()
		for j := range msgs[1:] {
			m := &msgs[j+1]
			m.Artifact, m.Invalid = v.ValidateTransient(m.Data)
			projector.PrepareSignature(m)
		}
		return msgs
	}
	b.Run("unsigned-prepared", func(b *testing.B) {
		run(b, prepare(build(`{"op":"open","charter":{"title":"bench"}}`, false)))
	})
	b.Run("signed-prepared", func(b *testing.B) {
		run(b, prepare(build(openSigned(keys, true), true)))
	})
}
