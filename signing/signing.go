// Package signing binds an artifact to the participant who published it:
// an Ed25519 signature, made with the participant's nkeys user key, over a
// domain-separated message that names the deliberation, the participant
// token and the artifact id. A signature cannot be replayed into another
// deliberation, as another token, or onto another artifact.
//
// The exact bytes (the signed message, the two NATS headers that carry a
// signature) are specified in docs/VERIFY.md; this package is their
// reference. It does no IO and reads no clock.
package signing

import (
	"crypto/ed25519"
	"encoding/base64"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/wire"
)

// The NATS headers that carry an artifact's signature. Both or neither.
const (
	// KeyHeader names the signer's nkeys user public key: 56 characters,
	// 'U' first (base32 of the prefix byte, the 32-byte Ed25519 public
	// key and a CRC-16).
	KeyHeader = "Parley-Key"
	// SignatureHeader holds the 64-byte Ed25519 signature of Message in
	// unpadded base64url (RFC 4648 §5): exactly 86 characters.
	SignatureHeader = "Parley-Signature"
)

// Domain is the text after the leading 0xFF byte of every signed message;
// the trailing digit is the version of the message format.
const Domain = "parley-artifact-signature-v1"

// SignatureLen is the length of a Parley-Signature value.
const SignatureLen = 86

// MessageLen is the length of every signed message: 0xFF, the domain and
// four newlines, a 36-byte deliberation id, the token (1 to 64 bytes) and a
// 71-byte artifact id.
func MessageLen(token string) int { return 1 + len(Domain) + 36 + len(token) + 71 + 4 }

// Message returns the bytes a participant signs for artifactID, published
// as token in deliberation:
//
//	0xFF "parley-artifact-signature-v1" 0x0A
//	deliberation 0x0A token 0x0A artifactID 0x0A
//
// The framing is unambiguous: the three fields are of fixed grammars that
// exclude the newline (a deliberation id is a lowercase UUID, a token is
// [A-Za-z0-9][A-Za-z0-9_-]{0,63}, an artifact id is "sha256:" and 64
// lowercase hex), their number is fixed and each is terminated by a
// newline, so a message splits into its fields in exactly one way. The
// first byte, 0xFF, never occurs in UTF-8: no protocol that signs text with
// the same key, such as the nonce of NATS's CONNECT (a JSON string the
// server chooses and the client signs with its user nkey) or a JWT, can be
// made to sign a message of this form.
func Message(deliberation, token, artifactID string) ([]byte, error) {
	if err := checkInput(deliberation, token, artifactID); err != nil {
		return nil, err
	}
	return appendMessage(make([]byte, 0, MessageLen(token)), deliberation, token, artifactID), nil
}

func appendMessage(b []byte, deliberation, token, artifactID string) []byte {
	b = append(b, 0xFF)
	b = append(b, Domain...)
	b = append(b, '\n')
	b = append(b, deliberation...)
	b = append(b, '\n')
	b = append(b, token...)
	b = append(b, '\n')
	b = append(b, artifactID...)
	return append(b, '\n')
}

func checkInput(deliberation, token, artifactID string) error {
	switch {
	case !wire.ValidDeliberation(deliberation):
		return fail(ErrInput, "deliberation id")
	case !wire.ValidSigner(token):
		return fail(ErrInput, "participant token")
	case !canon.ValidID(artifactID):
		return fail(ErrInput, "artifact id")
	}
	return nil
}

// Headers are the values of the two signature headers of a message.
type Headers struct {
	Key       string // Parley-Key: the signer's nkeys user public key
	Signature string // Parley-Signature: 86 characters of base64url
}

// sigEncoding is unpadded base64url that rejects non-zero trailing bits,
// so every signature has exactly one text form.
var sigEncoding = base64.RawURLEncoding.Strict()

// ValidKey reports whether s is an nkeys user public key.
func ValidKey(s string) bool {
	return len(s) == 56 && s[0] == 'U' && nkeys.IsValidPublicUserKey(s)
}

// ParseHeaders validates the two header values and decodes the signature.
// Both empty is ErrNoSignature; anything else that is not exactly one valid
// key and one valid signature is ErrMalformed.
func ParseHeaders(h Headers) ([]byte, error) {
	switch {
	case h.Key == "" && h.Signature == "":
		return nil, ErrNoSignature
	case h.Key == "":
		return nil, fail(ErrMalformed, KeyHeader+" is missing")
	case h.Signature == "":
		return nil, fail(ErrMalformed, SignatureHeader+" is missing")
	case !ValidKey(h.Key):
		return nil, fail(ErrMalformed, KeyHeader+" is not an nkeys user public key")
	case len(h.Signature) != SignatureLen:
		return nil, fail(ErrMalformed, SignatureHeader+" is not 86 characters")
	}
	sig, err := sigEncoding.DecodeString(h.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return nil, fail(ErrMalformed, SignatureHeader+" is not unpadded base64url of 64 bytes")
	}
	return sig, nil
}

// FormatSignature returns the Parley-Signature value of a 64-byte
// signature.
func FormatSignature(sig []byte) string { return sigEncoding.EncodeToString(sig) }

// FromHeader reads the two headers from a NATS message's header map
// (nats.Header is a map[string][]string; keys are matched exactly, as NATS
// does). A header given more than once is ErrMalformed; the values are
// otherwise returned as they are, for ParseHeaders or Verify to judge.
func FromHeader(h map[string][]string) (Headers, error) {
	var out Headers
	for _, f := range []struct {
		name string
		to   *string
	}{{KeyHeader, &out.Key}, {SignatureHeader, &out.Signature}} {
		switch v := h[f.name]; len(v) {
		case 0:
		case 1:
			*f.to = v[0]
		default:
			return Headers{}, fail(ErrMalformed, f.name+" is given more than once")
		}
	}
	return out, nil
}

// Set writes the two headers into a NATS message's header map.
func (h Headers) Set(m map[string][]string) {
	m[KeyHeader] = []string{h.Key}
	m[SignatureHeader] = []string{h.Signature}
}

// Sign signs artifactID, published as token in deliberation, with kp, an
// nkeys user key pair that holds its seed (nkeys.FromSeed of an "SU…"
// seed).
func Sign(kp nkeys.KeyPair, deliberation, token, artifactID string) (Headers, error) {
	msg, err := Message(deliberation, token, artifactID)
	if err != nil {
		return Headers{}, err
	}
	pub, err := kp.PublicKey()
	if err != nil || !ValidKey(pub) {
		return Headers{}, ErrKey
	}
	sig, err := kp.Sign(msg)
	if err != nil {
		return Headers{}, fail(ErrKey, err.Error())
	}
	return Headers{Key: pub, Signature: FormatSignature(sig)}, nil
}

// Signer signs with one key, its Ed25519 private key derived once: an
// nkeys key pair decodes its seed and derives the key again at every
// signature, which costs as much as the signature itself.
type Signer struct {
	pub  string
	priv ed25519.PrivateKey
}

// NewSigner returns the signer of kp, an nkeys user key pair holding its
// seed.
func NewSigner(kp nkeys.KeyPair) (*Signer, error) {
	pub, err := kp.PublicKey()
	if err != nil || !ValidKey(pub) {
		return nil, ErrKey
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, fail(ErrKey, "no seed: it cannot sign")
	}
	_, raw, err := nkeys.DecodeSeed(seed)
	if err != nil || len(raw) != ed25519.SeedSize {
		return nil, fail(ErrKey, "not an nkeys seed")
	}
	return &Signer{pub: pub, priv: ed25519.NewKeyFromSeed(raw)}, nil
}

// PublicKey is the signer's nkeys user public key.
func (s *Signer) PublicKey() string { return s.pub }

// Sign signs artifactID, published as token in deliberation: what Sign
// does with the key pair, at the cost of the signature alone.
func (s *Signer) Sign(deliberation, token, artifactID string) (Headers, error) {
	msg, err := Message(deliberation, token, artifactID)
	if err != nil {
		return Headers{}, err
	}
	return Headers{Key: s.pub, Signature: FormatSignature(ed25519.Sign(s.priv, msg))}, nil
}

// KeyPair returns the key pair of an nkeys user seed ("SU…"), refusing
// every other kind of seed.
func KeyPair(seed string) (nkeys.KeyPair, error) {
	if !strings.HasPrefix(seed, "SU") {
		return nil, fail(ErrKey, "not a user seed")
	}
	kp, err := nkeys.FromSeed([]byte(seed))
	if err != nil {
		return nil, fail(ErrKey, "not an nkeys seed")
	}
	if pub, err := kp.PublicKey(); err != nil || !ValidKey(pub) {
		return nil, fail(ErrKey, "not a user seed")
	}
	return kp, nil
}

// Binding maps participant tokens to the nkeys user public keys their
// artifacts must be signed with (a charter's key binding).
type Binding map[string]string

// Validate checks that every token is a participant token and every key
// an nkeys user public key. One key may be bound to several tokens: a
// signature names its token, so it does not carry over between them.
func (b Binding) Validate() error {
	for token, key := range b {
		if !wire.ValidToken(token) {
			return fail(ErrBinding, "token "+quote(token)+" is not a participant token")
		}
		if !ValidKey(key) {
			return fail(ErrBinding, "the key of "+token+" is not an nkeys user public key")
		}
	}
	return nil
}

// Verify checks that h signs artifactID, published as token in
// deliberation, with the key b binds to token. It returns nil or a
// *Error: ErrInput (the caller's arguments), ErrNoSignature,
// ErrMalformed, ErrUnknownToken, ErrWrongKey or ErrBadSignature, in that
// order of precedence.
func Verify(deliberation, token, artifactID string, h Headers, b Binding) error {
	if err := checkInput(deliberation, token, artifactID); err != nil {
		return err
	}
	sig, err := ParseHeaders(h)
	if err != nil {
		return err
	}
	bound, ok := b[token]
	if !ok {
		return fail(ErrUnknownToken, token)
	}
	if h.Key != bound {
		return ErrWrongKey
	}
	pub, err := publicKey(bound)
	if err != nil {
		return fail(ErrBinding, "the key of "+token+" is not an nkeys user public key")
	}
	return verify(pub, sig, deliberation, token, artifactID)
}

// VerifyKey checks that h signs artifactID, published as token in
// deliberation, with the key h itself names, whatever any binding says:
// the costly half of Verify, which needs no binding, so that it can run
// ahead of whoever knows the binding. It returns nil or ErrInput,
// ErrNoSignature, ErrMalformed or ErrBadSignature. Verify's answer is
// VerifyKey's when VerifyKey answers ErrInput, ErrNoSignature or
// ErrMalformed; otherwise ErrUnknownToken or ErrWrongKey when the binding
// says so, and VerifyKey's when it does not.
func VerifyKey(deliberation, token, artifactID string, h Headers) error {
	if err := checkInput(deliberation, token, artifactID); err != nil {
		return err
	}
	sig, err := ParseHeaders(h)
	if err != nil {
		return err
	}
	pub, err := publicKey(h.Key)
	if err != nil {
		return fail(ErrMalformed, KeyHeader+" is not an nkeys user public key")
	}
	return verify(pub, sig, deliberation, token, artifactID)
}

func verify(pub ed25519.PublicKey, sig []byte, deliberation, token, artifactID string) error {
	var buf [208]byte // the longest message: a 64-byte token
	msg := appendMessage(buf[:0], deliberation, token, artifactID)
	if !ed25519.Verify(pub, msg, sig) {
		return ErrBadSignature
	}
	return nil
}

// publicKey decodes an nkeys user public key into its Ed25519 key.
func publicKey(key string) (ed25519.PublicKey, error) {
	if !ValidKey(key) {
		return nil, ErrBinding
	}
	raw, err := nkeys.Decode(nkeys.PrefixByteUser, []byte(key))
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, ErrBinding
	}
	return ed25519.PublicKey(raw), nil
}

func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return "\"" + strings.ToValidUTF8(s, "\uFFFD") + "\""
}
