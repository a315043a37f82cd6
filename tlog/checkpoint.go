package tlog

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"strconv"
	"strings"

	"github.com/nats-io/nkeys"
	"golang.org/x/mod/sumdb/note"

	flog "github.com/transparency-dev/formats/log"

	"github.com/parley-engine/parley/wire"
)

// OriginPrefix opens the origin of every deliberation's log; the origin is
// the prefix and the deliberation id, as in its NATS subjects.
const OriginPrefix = "parley."

// Origin returns the origin of deliberation's log: "parley.<id>". It is
// also the name of the key that signs the log's checkpoints.
func Origin(deliberation string) (string, error) {
	if !wire.ValidDeliberation(deliberation) {
		return "", fail(ErrOrigin, "not a deliberation id")
	}
	return OriginPrefix + deliberation, nil
}

// Checkpoint is a log's tree head: its origin, size and root.
type Checkpoint struct {
	Origin string
	Size   uint64
	Root   Hash
}

// Body returns the checkpoint's note text (C2SP tlog-checkpoint):
//
//	<origin>\n<size in decimal>\n<base64 of the root>\n
func (c Checkpoint) Body() []byte {
	return flog.Checkpoint{Origin: c.Origin, Size: c.Size, Hash: c.Root[:]}.Marshal()
}

// ParseBody parses a checkpoint's note text. It accepts exactly what Body
// returns for some checkpoint whose origin is a note key name: no
// extension line, no leading zero, standard padded base64 of 32 bytes.
func ParseBody(text []byte) (Checkpoint, error) {
	var fc flog.Checkpoint
	rest, err := fc.Unmarshal(text)
	if err != nil {
		return Checkpoint{}, fail(ErrCheckpoint, err.Error())
	}
	if len(rest) != 0 {
		return Checkpoint{}, fail(ErrCheckpoint, "extension lines")
	}
	if len(fc.Hash) != len(Hash{}) {
		return Checkpoint{}, fail(ErrCheckpoint, "the root is not 32 bytes")
	}
	if !ValidName(fc.Origin) {
		return Checkpoint{}, fail(ErrCheckpoint, "the origin is not a key name")
	}
	c := Checkpoint{Origin: fc.Origin, Size: fc.Size, Root: Hash(fc.Hash)}
	if !bytes.Equal(c.Body(), text) {
		return Checkpoint{}, fail(ErrCheckpoint, "not in canonical form")
	}
	return c, nil
}

// ValidName reports whether s meets note's rule for a key name, which an
// origin must meet to name the log's key: non-empty UTF-8 without spaces or '+'.
func ValidName(s string) bool {
	return s != "" && strings.ToValidUTF8(s, "") == s && !strings.ContainsAny(s, "+ \t\n\r\v\f\u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
}

// Signer signs a log's checkpoints: a note.Signer named by the log's
// origin whose Ed25519 key is an nkeys key pair's. An nkeys seed ("S…")
// encodes a 32-byte RFC 8032 Ed25519 seed; the nkey public key ("N…",
// "A…", "U…", …) encodes the 32-byte Ed25519 public key; a note Ed25519
// signature (algorithm 0x01) is plain Ed25519 over the note text, so an
// nkeys key pair signs notes as it is.
type Signer struct {
	name string
	hash uint32
	kp   nkeys.KeyPair
}

// Name returns the key name: the log's origin.
func (s *Signer) Name() string { return s.name }

// KeyHash returns the note key hash.
func (s *Signer) KeyHash() uint32 { return s.hash }

// Sign signs msg with Ed25519.
func (s *Signer) Sign(msg []byte) ([]byte, error) { return s.kp.Sign(msg) }

// NewSigner returns the signer of origin's checkpoints with the nkeys
// seed's key (any kind of nkeys seed but a curve key: the engine's server
// key "SN…" is the natural one).
func NewSigner(seed []byte, origin string) (*Signer, error) {
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return nil, fail(ErrKey, "not an nkeys seed")
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fail(ErrKey, err.Error())
	}
	vkey, err := VerifierKey(pub, origin)
	if err != nil {
		return nil, err
	}
	_, hash, err := parseVerifierKey(vkey)
	if err != nil {
		return nil, err
	}
	return &Signer{name: origin, hash: hash, kp: kp}, nil
}

// VerifierKey returns the note verifier key of origin's log for an nkeys
// public key: "<origin>+<8 hex key hash>+<base64 of 0x01 || public key>",
// the key hash being the first four bytes of SHA-256(origin || "\n" ||
// 0x01 || public key), big-endian.
func VerifierKey(publicKey, origin string) (string, error) {
	pub, err := PublicKey(publicKey)
	if err != nil {
		return "", err
	}
	if !ValidName(origin) {
		return "", fail(ErrOrigin, "not a key name")
	}
	vkey, err := note.NewEd25519VerifierKey(origin, pub)
	if err != nil {
		return "", fail(ErrKey, err.Error())
	}
	return vkey, nil
}

// PublicKey decodes an nkeys public key of an Ed25519 kind: server,
// cluster, operator, account or user.
func PublicKey(publicKey string) (ed25519.PublicKey, error) {
	kinds := map[byte]nkeys.PrefixByte{'N': nkeys.PrefixByteServer, 'C': nkeys.PrefixByteCluster, 'O': nkeys.PrefixByteOperator, 'A': nkeys.PrefixByteAccount, 'U': nkeys.PrefixByteUser}
	if publicKey == "" {
		return nil, fail(ErrKey, "not an Ed25519 nkeys public key")
	}
	pre, ok := kinds[publicKey[0]]
	if !ok {
		return nil, fail(ErrKey, "not an Ed25519 nkeys public key")
	}
	raw, err := nkeys.Decode(pre, []byte(publicKey))
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, fail(ErrKey, "not an Ed25519 nkeys public key")
	}
	return ed25519.PublicKey(raw), nil
}

func parseVerifierKey(vkey string) (string, uint32, error) {
	name, rest, _ := strings.Cut(vkey, "+")
	h, _, _ := strings.Cut(rest, "+")
	hash, err := strconv.ParseUint(h, 16, 32)
	if err != nil || len(h) != 8 {
		return "", 0, fail(ErrKey, "not a note verifier key")
	}
	return name, uint32(hash), nil
}

// NewVerifier returns the verifier of origin's checkpoints for a trusted
// key given either as an nkeys public key or as a note verifier key
// (whose name must then be origin).
func NewVerifier(key, origin string) (note.Verifier, error) {
	vkey := key
	if !strings.Contains(key, "+") {
		var err error
		if vkey, err = VerifierKey(key, origin); err != nil {
			return nil, err
		}
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, fail(ErrKey, err.Error())
	}
	if v.Name() != origin {
		return nil, fail(ErrOrigin, "the verifier key names "+strconv.Quote(v.Name()))
	}
	return v, nil
}

// Sign returns c as a signed note (C2SP signed-note): its body, a blank
// line and one signature line per signer,
// "— <name> <base64 of 4-byte key hash || signature>\n". The first signer
// must be the log's (named by c's origin).
func Sign(c Checkpoint, signers ...note.Signer) ([]byte, error) {
	if len(signers) == 0 || signers[0].Name() != c.Origin {
		return nil, fail(ErrOrigin, "the log's key is named by its origin")
	}
	if !ValidName(c.Origin) {
		return nil, fail(ErrOrigin, "the origin is not a key name")
	}
	b, err := note.Sign(&note.Note{Text: string(c.Body())}, signers...)
	if err != nil {
		return nil, fail(ErrKey, err.Error())
	}
	return b, nil
}

// Open verifies a signed checkpoint of origin's log: it must bear a
// valid signature of log, a cosignature of every witness given, and its
// text must be exactly a checkpoint body of origin. Signatures by unknown
// keys are ignored, as the note format requires. It returns the
// checkpoint and the opened note (whose Sigs are the verified
// signatures).
func Open(signed []byte, origin string, log note.Verifier, witnesses ...note.Verifier) (Checkpoint, *note.Note, error) {
	if log.Name() != origin {
		return Checkpoint{}, nil, fail(ErrOrigin, "the log's verifier is not named by the origin")
	}
	n, err := note.Open(signed, note.VerifierList(append([]note.Verifier{log}, witnesses...)...))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		switch {
		case errors.As(err, &unverified):
			return Checkpoint{}, nil, fail(ErrSignature, "no signature of a trusted key")
		case errors.As(err, &invalid):
			return Checkpoint{}, nil, fail(ErrSignature, err.Error())
		}
		return Checkpoint{}, nil, fail(ErrCheckpoint, err.Error())
	}
	for _, v := range append([]note.Verifier{log}, witnesses...) {
		if !signedBy(n, v) {
			return Checkpoint{}, nil, fail(ErrSignature, "no signature of "+v.Name())
		}
	}
	c, err := ParseBody([]byte(n.Text))
	if err != nil {
		return Checkpoint{}, nil, err
	}
	if c.Origin != origin {
		return Checkpoint{}, nil, fail(ErrOrigin, "the checkpoint is of "+strconv.Quote(c.Origin))
	}
	return c, n, nil
}

func signedBy(n *note.Note, v note.Verifier) bool {
	for _, s := range n.Sigs {
		if s.Name == v.Name() && s.Hash == v.KeyHash() {
			return true
		}
	}
	return false
}

// Cosign adds cosignatures to a signed checkpoint that log has signed,
// after its existing signatures (unknown ones are kept as they are).
func Cosign(signed []byte, origin string, log note.Verifier, cosigners ...note.Signer) ([]byte, error) {
	_, n, err := Open(signed, origin, log)
	if err != nil {
		return nil, err
	}
	// note.Sign keeps n.Sigs but drops unverified ones; keep them too.
	n.Sigs = append(n.Sigs, n.UnverifiedSigs...)
	b, err := note.Sign(n, cosigners...)
	if err != nil {
		return nil, fail(ErrKey, err.Error())
	}
	return b, nil
}
