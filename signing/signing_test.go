package signing_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/signing"
)

const (
	delib  = "0f8c2a54-9e1b-4c6d-8a3f-5b7e9d1c2a40"
	delib2 = "0f8c2a54-9e1b-4c6d-8a3f-5b7e9d1c2a41"
	art    = "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
	art2   = "sha256:fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9"
)

// key returns the deterministic user key pair whose raw seed is 32 bytes
// of b.
func key(t testing.TB, b byte) nkeys.KeyPair {
	t.Helper()
	kp, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func pub(t testing.TB, kp nkeys.KeyPair) string {
	t.Helper()
	p, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRoundTrip(t *testing.T) {
	alice := key(t, 1)
	h, err := signing.Sign(alice, delib, "alice", art)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Signature) != signing.SignatureLen || !signing.ValidKey(h.Key) || h.Key != pub(t, alice) {
		t.Fatalf("headers %+v", h)
	}
	b := signing.Binding{"alice": pub(t, alice), "bob": pub(t, key(t, 2))}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := signing.Verify(delib, "alice", art, h, b); err != nil {
		t.Fatal(err)
	}
	// Through a NATS header map and back.
	m := map[string][]string{}
	h.Set(m)
	got, err := signing.FromHeader(m)
	if err != nil || got != h {
		t.Fatalf("FromHeader: %+v %v", got, err)
	}
	// The signature is plain Ed25519 over Message.
	msg, _ := signing.Message(delib, "alice", art)
	sig, err := signing.ParseHeaders(h)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := nkeys.Decode(nkeys.PrefixByteUser, []byte(h.Key))
	if !ed25519.Verify(raw, msg, sig) {
		t.Fatal("not an Ed25519 signature of Message")
	}
	if len(msg) != signing.MessageLen("alice") || msg[0] != 0xFF {
		t.Fatalf("message %q", msg)
	}
}

func code(err error) string {
	var e *signing.Error
	if errors.As(err, &e) {
		return e.Code
	}
	if err == nil {
		return "nil"
	}
	return "uncoded: " + err.Error()
}

func TestReplayAndRefusals(t *testing.T) {
	alice, bob, mallory := key(t, 1), key(t, 2), key(t, 3)
	b := signing.Binding{"alice": pub(t, alice), "bob": pub(t, bob)}
	h, err := signing.Sign(alice, delib, "alice", art)
	if err != nil {
		t.Fatal(err)
	}
	byMallory, _ := signing.Sign(mallory, delib, "alice", art)
	// A signature made by bob's key (so bound to bob) over alice's
	// message, presented as alice: the key is not alice's.
	bobAsAlice, _ := signing.Sign(bob, delib, "alice", art)
	// Alice's signature of another artifact under alice's key header:
	// verifies for that artifact, not this one.
	other, _ := signing.Sign(alice, delib, "alice", art2)
	forged := h
	forged.Signature = other.Signature
	sig, _ := signing.ParseHeaders(h)
	flipped := bytes.Clone(sig)
	flipped[10] ^= 1
	for _, c := range []struct {
		name                string
		delib, token, artID string
		h                   signing.Headers
		b                   signing.Binding
		want                *signing.Error
	}{
		{"genuine", delib, "alice", art, h, b, nil},
		{"replayed into another deliberation", delib2, "alice", art, h, b, signing.ErrBadSignature},
		{"replayed as another token", delib, "bob", art, h, b, signing.ErrWrongKey},
		{"replayed as another token bound to the same key", delib, "bob", art, h, signing.Binding{"bob": pub(t, alice)}, signing.ErrBadSignature},
		{"replayed onto another artifact", delib, "alice", art2, h, b, signing.ErrBadSignature},
		{"another artifact's signature", delib, "alice", art, forged, b, signing.ErrBadSignature},
		{"a flipped bit", delib, "alice", art, signing.Headers{Key: h.Key, Signature: signing.FormatSignature(flipped)}, b, signing.ErrBadSignature},
		{"an unbound key", delib, "alice", art, byMallory, b, signing.ErrWrongKey},
		{"another participant's key", delib, "alice", art, bobAsAlice, b, signing.ErrWrongKey},
		{"the header names the bound key, the signature is another's", delib, "alice", art, signing.Headers{Key: h.Key, Signature: byMallory.Signature}, b, signing.ErrBadSignature},
		{"no signature", delib, "alice", art, signing.Headers{}, b, signing.ErrNoSignature},
		{"unknown token", delib, "carol", art, h, b, signing.ErrUnknownToken},
		{"no binding", delib, "alice", art, h, nil, signing.ErrUnknownToken},
		{"bad deliberation", "0F8C2A54-9E1B-4C6D-8A3F-5B7E9D1C2A40", "alice", art, h, b, signing.ErrInput},
		{"bad token", delib, "_import", art, h, b, signing.ErrInput},
		{"bad artifact id", delib, "alice", strings.ToUpper(art), h, b, signing.ErrInput},
	} {
		err := signing.Verify(c.delib, c.token, c.artID, c.h, c.b)
		want := "nil"
		if c.want != nil {
			want = c.want.Code
		}
		if code(err) != want {
			t.Errorf("%s: %v, want %s", c.name, err, want)
		}
		if c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: errors.Is fails", c.name)
		}
	}
}

func TestMalformedHeaders(t *testing.T) {
	alice := key(t, 1)
	h, _ := signing.Sign(alice, delib, "alice", art)
	accountKey := pub(t, func() nkeys.KeyPair {
		kp, _ := nkeys.FromRawSeed(nkeys.PrefixByteAccount, bytes.Repeat([]byte{1}, 32))
		return kp
	}())
	// The last of 86 characters carries 2 bits of the signature and 4
	// zero bits: setting one of those is another text of the same bytes.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, h.Signature[85])
	if last%16 != 0 {
		t.Fatalf("the last character %q has padding bits set", h.Signature[85])
	}
	nonCanon := h.Signature[:85] + string(alphabet[last+1])
	for name, hh := range map[string]signing.Headers{
		"key only":                    {Key: h.Key},
		"signature only":              {Signature: h.Signature},
		"account key":                 {Key: accountKey, Signature: h.Signature},
		"lowercase key":               {Key: strings.ToLower(h.Key), Signature: h.Signature},
		"key with a bad checksum":     {Key: h.Key[:55] + string("AB"[boolInt(h.Key[55] == 'A')]), Signature: h.Signature},
		"padded signature":            {Key: h.Key, Signature: h.Signature + "=="},
		"standard base64 signature":   {Key: h.Key, Signature: strings.NewReplacer("-", "+", "_", "/").Replace(h.Signature) + "+"},
		"short signature":             {Key: h.Key, Signature: h.Signature[:85]},
		"signature with a space":      {Key: h.Key, Signature: " " + h.Signature[1:]},
		"non-canonical trailing bits": {Key: h.Key, Signature: nonCanon},
		"key with a trailing space":   {Key: h.Key + " ", Signature: h.Signature},
	} {
		if _, err := signing.ParseHeaders(hh); !errors.Is(err, signing.ErrMalformed) {
			t.Errorf("%s: %v, want %s", name, err, signing.ErrMalformed.Code)
		}
		if err := signing.Verify(delib, "alice", art, hh, signing.Binding{"alice": h.Key}); !errors.Is(err, signing.ErrMalformed) {
			t.Errorf("%s: Verify: %v", name, err)
		}
	}
	if _, err := signing.FromHeader(map[string][]string{signing.SignatureHeader: {h.Signature, h.Signature}, signing.KeyHeader: {h.Key}}); !errors.Is(err, signing.ErrMalformed) {
		t.Errorf("a repeated header: %v", err)
	}
	if got, err := signing.FromHeader(map[string][]string{"parley-signature": {h.Signature}}); err != nil || got != (signing.Headers{}) {
		t.Errorf("header names are exact, as in NATS: %+v %v", got, err)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestBindingValidate(t *testing.T) {
	alice := pub(t, key(t, 1))
	for name, b := range map[string]signing.Binding{
		"reserved token": {"_supervisor": alice},
		"empty token":    {"": alice},
		"seed as key":    {"alice": "SUAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
		"empty key":      {"alice": ""},
	} {
		if err := b.Validate(); !errors.Is(err, signing.ErrBinding) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := (signing.Binding{"alice": alice, "alice-2": alice}).Validate(); err != nil {
		t.Errorf("one key for two tokens: %v", err)
	}
}

func TestKeys(t *testing.T) {
	seed, _ := key(t, 1).Seed()
	if _, err := signing.KeyPair(string(seed)); err != nil {
		t.Fatal(err)
	}
	acct, _ := nkeys.FromRawSeed(nkeys.PrefixByteAccount, bytes.Repeat([]byte{1}, 32))
	aseed, _ := acct.Seed()
	if _, err := signing.KeyPair(string(aseed)); !errors.Is(err, signing.ErrKey) {
		t.Errorf("account seed: %v", err)
	}
	if _, err := signing.Sign(acct, delib, "alice", art); !errors.Is(err, signing.ErrKey) {
		t.Errorf("sign with an account key: %v", err)
	}
	pubOnly, _ := nkeys.FromPublicKey(pub(t, key(t, 1)))
	if _, err := signing.Sign(pubOnly, delib, "alice", art); !errors.Is(err, signing.ErrKey) {
		t.Errorf("sign without a seed: %v", err)
	}
}

// No JSON string is the signed message: the NATS CONNECT nonce cannot
// make a client sign it.
func TestMessageIsNotText(t *testing.T) {
	msg, _ := signing.Message(delib, "alice", art)
	if strings.ToValidUTF8(string(msg), "") == string(msg) {
		t.Fatal("the message is valid UTF-8")
	}
}

func FuzzParseHeaders(f *testing.F) {
	h, _ := signing.Sign(key(f, 1), delib, "alice", art)
	f.Add(h.Key, h.Signature)
	f.Add("", "")
	f.Add(h.Key, h.Signature+"=")
	f.Add("U", "AAAA")
	f.Fuzz(func(t *testing.T, k, s string) {
		sig, err := signing.ParseHeaders(signing.Headers{Key: k, Signature: s})
		if err != nil {
			var e *signing.Error
			if !errors.As(err, &e) || (e.Code != signing.ErrMalformed.Code && e.Code != signing.ErrNoSignature.Code) {
				t.Fatalf("uncoded or unexpected error %v", err)
			}
			return
		}
		// Accepted: exactly one text form.
		if len(sig) != 64 || signing.FormatSignature(sig) != s || !signing.ValidKey(k) {
			t.Fatalf("accepted %q %q", k, s)
		}
	})
}

func BenchmarkSign(b *testing.B) {
	kp := key(b, 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := signing.Sign(kp, delib, "alice", art); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	kp := key(b, 1)
	h, _ := signing.Sign(kp, delib, "alice", art)
	bind := signing.Binding{"alice": h.Key}
	b.ReportAllocs()
	for b.Loop() {
		if err := signing.Verify(delib, "alice", art, h, bind); err != nil {
			b.Fatal(err)
		}
	}
}

// VerifyKey is Verify without the binding: Verify's answer is VerifyKey's
// but where the binding names no key or another one.
func TestVerifyKey(t *testing.T) {
	alice, mallory := key(t, 1), key(t, 3)
	b := signing.Binding{"alice": pub(t, alice)}
	h, _ := signing.Sign(alice, delib, "alice", art)
	byMallory, _ := signing.Sign(mallory, delib, "alice", art)
	for _, c := range []struct {
		name                     string
		d, tok, id               string
		h                        signing.Headers
		verifyKey, verifyBinding string
	}{
		{"signed", delib, "alice", art, h, "nil", "nil"},
		{"unsigned", delib, "alice", art, signing.Headers{}, "signature.missing", "signature.missing"},
		{"malformed", delib, "alice", art, signing.Headers{Key: h.Key}, "signature.malformed", "signature.malformed"},
		{"another deliberation", delib2, "alice", art, h, "signature.bad", "signature.bad"},
		{"another artifact", delib, "alice", art2, h, "signature.bad", "signature.bad"},
		{"as bob", delib, "bob", art, h, "signature.bad", "signature.unknown_token"},
		{"mallory's key", delib, "alice", art, byMallory, "nil", "signature.wrong_key"},
		{"bad input", "x", "alice", art, h, "signature.invalid_input", "signature.invalid_input"},
	} {
		if got := code(signing.VerifyKey(c.d, c.tok, c.id, c.h)); got != c.verifyKey {
			t.Errorf("%s: VerifyKey %s, want %s", c.name, got, c.verifyKey)
		}
		if got := code(signing.Verify(c.d, c.tok, c.id, c.h, b)); got != c.verifyBinding {
			t.Errorf("%s: Verify %s, want %s", c.name, got, c.verifyBinding)
		}
	}
}

// A Signer's signatures are Sign's, byte for byte (Ed25519 is
// deterministic), and verify.
func TestSigner_AsSign(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	s, err := signing.NewSigner(kp)
	if err != nil {
		t.Fatal(err)
	}
	const delib = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	art := "sha256:" + strings.Repeat("ab", 32)
	a, err := signing.Sign(kp, delib, "alice", art)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Sign(delib, "alice", art)
	if err != nil || a != b {
		t.Fatalf("Signer %+v %v, Sign %+v", b, err, a)
	}
	if err := signing.VerifyKey(delib, "alice", art, b); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sign(delib, "not a token!", art); err == nil {
		t.Fatal("a bad token signed")
	}
	pub, _ := nkeys.CreateAccount()
	if _, err := signing.NewSigner(pub); err == nil {
		t.Fatal("an account key accepted as a user signer")
	}
}

func BenchmarkSigner(b *testing.B) {
	kp, _ := nkeys.CreateUser()
	s, _ := signing.NewSigner(kp)
	art := "sha256:" + strings.Repeat("ab", 32)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Sign("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "alice", art); err != nil {
			b.Fatal(err)
		}
	}
}
