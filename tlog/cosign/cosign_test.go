package cosign_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"
	"golang.org/x/mod/sumdb/note"

	"github.com/parley-engine/parley/tlog"
	"github.com/parley-engine/parley/tlog/cosign"
)

const delib = "0f8c2a54-9e1b-4c6d-8a3f-5b7e9d1c2a40"

func keyPair(t testing.TB, pre nkeys.PrefixByte, b byte) (seed []byte, public string) {
	t.Helper()
	kp, err := nkeys.FromRawSeed(pre, bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	seed, _ = kp.Seed()
	public, _ = kp.PublicKey()
	return seed, public
}

func root() tlog.Hash {
	tr := tlog.NewTree()
	for _, s := range []string{"a", "b", "c"} {
		tr.Append(tlog.LeafHash([]byte(s)))
	}
	return tr.Root()
}

func TestCosignatures(t *testing.T) {
	origin, _ := tlog.Origin(delib)
	seed, public := keyPair(t, nkeys.PrefixByteServer, 2)
	wseed, wpublic := keyPair(t, nkeys.PrefixByteServer, 3)
	s, _ := tlog.NewSigner(seed, origin)
	v, _ := tlog.NewVerifier(public, origin)
	w, err := cosign.Signer(wseed, "witness.example/w1")
	if err != nil {
		t.Fatal(err)
	}
	wv, err := cosign.Verifier(wpublic, "witness.example/w1")
	if err != nil {
		t.Fatal(err)
	}
	if w.KeyHash() != wv.KeyHash() {
		t.Fatal("cosigner and verifier key hashes differ")
	}
	cp := tlog.Checkpoint{Origin: origin, Size: 3, Root: root()}
	signed, _ := tlog.Sign(cp, s)
	if _, _, err := tlog.Open(signed, origin, v, wv); !errors.Is(err, tlog.ErrSignature) {
		t.Errorf("a missing cosignature: %v", err)
	}
	cosigned, err := tlog.Cosign(signed, origin, v, w)
	if err != nil {
		t.Fatal(err)
	}
	got, n, err := tlog.Open(cosigned, origin, v, wv)
	if err != nil || got != cp || len(n.Sigs) != 2 {
		t.Fatalf("cosigned: %v\n%s", err, cosigned)
	}
	// The cosignature line, by hand: 4-byte key hash, 8-byte time,
	// Ed25519 over "cosignature/v1\ntime <t>\n" and the note text.
	line := cosigned[bytes.LastIndex(cosigned, []byte("\n— "))+1:]
	fields := strings.Fields(string(line))
	raw, err := base64.StdEncoding.DecodeString(fields[2])
	if err != nil || len(fields) != 3 || fields[1] != "witness.example/w1" || len(raw) != 4+8+64 || binary.BigEndian.Uint32(raw) != wv.KeyHash() {
		t.Fatalf("cosignature line %q", line)
	}
	ts := binary.BigEndian.Uint64(raw[4:])
	msg := fmt.Sprintf("cosignature/v1\ntime %d\n%s", ts, cp.Body())
	pub, _ := tlog.PublicKey(wpublic)
	if !ed25519.Verify(pub, []byte(msg), raw[12:]) {
		t.Fatal("the cosignature is not Ed25519 over the cosignature/v1 message")
	}
	// The log's verifier alone still opens it: the cosignature is an
	// unknown signature to it, ignored.
	if _, _, err := tlog.Open(cosigned, origin, v); err != nil {
		t.Fatal(err)
	}
	// The cosignature is not the log's signature.
	if _, _, err := tlog.Open(cosigned, origin, mustV(tlog.NewVerifier(wpublic, origin))); !errors.Is(err, tlog.ErrSignature) {
		t.Errorf("the witness as the log: %v", err)
	}
	wvkey, _ := cosign.VerifierKey(wpublic, "witness.example/w1")
	if wv2, err := cosign.Verifier(wvkey, "witness.example/w1"); err != nil || wv2.KeyHash() != wv.KeyHash() {
		t.Errorf("cosignature verifier key: %v", err)
	}
}

func mustV(v note.Verifier, err error) note.Verifier {
	if err != nil {
		panic(err)
	}
	return v
}
