// Package cosign makes and checks C2SP tlog-cosignature (cosignature/v1)
// witness signatures of a deliberation's checkpoints, with Ed25519 keys
// taken from nkeys seeds, through transparency-dev/formats. It is apart
// from package tlog because a cosignature carries the time it was made
// (this package's signer reads the clock) and because formats' note
// package links crypto/x509 (and so package net) for its other key
// types; tlog stays a pure core. tlog.Cosign adds a cosignature made here
// to a signed checkpoint, and tlog.Open checks it given a Verifier.
package cosign

import (
	"crypto/ed25519"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/nats-io/nkeys"
	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/parley-engine/parley/tlog"
)

// Signer returns a cosignature/v1 signer named name (the witness's name,
// a note key name) with an nkeys seed's Ed25519 key. Each signature is
// the 8-byte big-endian Unix time it was made and the Ed25519 signature
// of "cosignature/v1\ntime <that time>\n" followed by the checkpoint's
// note text.
func Signer(seed []byte, name string) (note.Signer, error) {
	_, raw, err := nkeys.DecodeSeed(seed)
	if err != nil || len(raw) != ed25519.SeedSize || !tlog.ValidName(name) {
		return nil, &tlog.Error{Code: tlog.ErrKey.Code, Msg: tlog.ErrKey.Msg + ": not an nkeys seed and a key name"}
	}
	// formats reads note's private key encoding, algorithm 0x04, and
	// computes the key hash itself (the 8 hex digits are not read).
	skey := "PRIVATE+KEY+" + name + "+00000000+" + base64.StdEncoding.EncodeToString(append([]byte{0x04}, raw...))
	s, err := fnote.NewSignerForCosignatureV1(skey)
	if err != nil {
		return nil, keyErr(err.Error())
	}
	return s, nil
}

func keyErr(detail string) error {
	return &tlog.Error{Code: tlog.ErrKey.Code, Msg: tlog.ErrKey.Msg + ": " + detail}
}

// VerifierKey returns a witness's note verifier key:
// "<name>+<8 hex key hash>+<base64 of 0x04 || public key>", the key hash
// being the first four bytes of SHA-256(name || "\n" || 0x04 || public
// key).
func VerifierKey(publicKey, name string) (string, error) {
	pub, err := tlog.PublicKey(publicKey)
	if err != nil {
		return "", err
	}
	if !tlog.ValidName(name) {
		return "", keyErr("not a key name")
	}
	vkey, err := note.NewEd25519VerifierKey(name, pub)
	if err != nil {
		return "", keyErr(err.Error())
	}
	if vkey, err = fnote.VKeyToCosignatureV1(vkey); err != nil {
		return "", keyErr(err.Error())
	}
	return vkey, nil
}

// Verifier returns the verifier of a witness's cosignatures, given an
// nkeys public key and the witness's name, or its verifier key (whose name
// must be name).
func Verifier(key, name string) (note.Verifier, error) {
	vkey := key
	if !strings.Contains(key, "+") {
		var err error
		if vkey, err = VerifierKey(key, name); err != nil {
			return nil, err
		}
	}
	v, err := fnote.NewVerifierForCosignatureV1(vkey)
	if err != nil {
		return nil, keyErr(err.Error())
	}
	if v.Name() != name {
		return nil, keyErr("the verifier key names " + strconv.Quote(v.Name()))
	}
	return v, nil
}
