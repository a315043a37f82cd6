// Package tlog makes a deliberation's record an RFC 6962 Merkle tree
// log: one leaf per message of the deliberation, in stream order; signed
// checkpoints of it as C2SP tlog-checkpoint notes (golang.org/x/mod's
// signed notes, Ed25519, with keys taken from nkeys seeds); inclusion and
// consistency proofs (transparency-dev/merkle); receipts as C2SP
// tlog-proof documents (transparency-dev/formats) that carry the leaf; and
// optional C2SP tlog-cosignature witness signatures (made and checked with
// package tlog/cosign).
//
// Every byte is specified in docs/VERIFY.md. The package does no IO and
// reads no clock.
package tlog

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

	"github.com/transparency-dev/merkle/rfc6962"
)

// Hash is a SHA-256 hash: a leaf hash, a node hash or a root.
type Hash = [sha256.Size]byte

// LeafVersion opens every leaf: the leaf format's name and version.
const LeafVersion = "parley-tlog-leaf-v1\n"

// MaxField bounds the subject, key and signature fields of a leaf.
const MaxField = 1 << 16

// Leaf is what the log commits to for one message of a deliberation. The
// message's ordinal is not in it: it is the leaf's index, which every
// inclusion proof binds.
type Leaf struct {
	// UnixNano is the message's time (JetStream's, or for an imported
	// message its original time) in nanoseconds since 1970-01-01 UTC.
	UnixNano int64
	// Subject is the message's subject, parley.<deliberation>.art.<token>
	// or parley.<deliberation>.ctl.
	Subject string
	// DataHash is SHA-256 of the message's exact bytes, as published (not
	// the artifact id, which hashes the canonical form less its
	// artifact_id member).
	DataHash Hash
	// Key and Signature are the values of the Parley-Key and
	// Parley-Signature headers, empty when absent, committed as they are
	// (even when malformed) so that stripping or changing a signature
	// changes the leaf.
	Key, Signature string
}

// NewLeaf returns the leaf of a message.
func NewLeaf(subject string, t time.Time, data []byte, key, signature string) Leaf {
	return Leaf{UnixNano: t.UnixNano(), Subject: subject, DataHash: sha256.Sum256(data), Key: key, Signature: signature}
}

// Marshal returns the leaf's bytes:
//
//	"parley-tlog-leaf-v1\n"
//	int64 big-endian   UnixNano
//	uint32 big-endian  len(Subject)   Subject
//	32 bytes           DataHash
//	uint32 big-endian  len(Key)       Key
//	uint32 big-endian  len(Signature) Signature
//
// It panics on a field longer than MaxField (a caller's bug: NATS bounds
// subjects and headers far below it).
func (l Leaf) Marshal() []byte {
	for _, f := range []string{l.Subject, l.Key, l.Signature} {
		if len(f) > MaxField {
			panic("tlog: leaf field longer than MaxField")
		}
	}
	return l.appendTo(make([]byte, 0, len(LeafVersion)+8+4+len(l.Subject)+32+8+len(l.Key)+len(l.Signature)))
}

// appendTo appends the leaf's bytes (Marshal's) to b.
func (l Leaf) appendTo(b []byte) []byte {
	b = append(b, LeafVersion...)
	b = binary.BigEndian.AppendUint64(b, uint64(l.UnixNano))
	b = appendField(b, l.Subject)
	b = append(b, l.DataHash[:]...)
	b = appendField(b, l.Key)
	return appendField(b, l.Signature)
}

func appendField(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// ParseLeaf parses a leaf's bytes; anything but exactly Marshal's output
// is ErrLeaf.
func ParseLeaf(b []byte) (Leaf, error) {
	var l Leaf
	rest, ok := cut(b, len(LeafVersion))
	if !ok || string(b[:len(LeafVersion)]) != LeafVersion {
		return Leaf{}, fail(ErrLeaf, "no "+`"parley-tlog-leaf-v1"`+" line")
	}
	if len(rest) < 8 {
		return Leaf{}, fail(ErrLeaf, "truncated")
	}
	l.UnixNano = int64(binary.BigEndian.Uint64(rest))
	rest = rest[8:]
	if l.Subject, rest, ok = field(rest); !ok {
		return Leaf{}, fail(ErrLeaf, "truncated subject")
	}
	if len(rest) < 32 {
		return Leaf{}, fail(ErrLeaf, "truncated data hash")
	}
	copy(l.DataHash[:], rest)
	rest = rest[32:]
	if l.Key, rest, ok = field(rest); !ok {
		return Leaf{}, fail(ErrLeaf, "truncated key")
	}
	if l.Signature, rest, ok = field(rest); !ok {
		return Leaf{}, fail(ErrLeaf, "truncated signature")
	}
	if len(rest) != 0 {
		return Leaf{}, fail(ErrLeaf, "trailing bytes")
	}
	return l, nil
}

func cut(b []byte, n int) ([]byte, bool) {
	if len(b) < n {
		return nil, false
	}
	return b[n:], true
}

func field(b []byte) (string, []byte, bool) {
	if len(b) < 4 {
		return "", nil, false
	}
	n := binary.BigEndian.Uint32(b)
	if n > MaxField || uint64(len(b)-4) < uint64(n) {
		return "", nil, false
	}
	return string(b[4 : 4+n]), b[4+n:], true
}

// Hash returns the leaf's RFC 6962 leaf hash: SHA-256(0x00 || Marshal()).
func (l Leaf) Hash() Hash {
	// SHA-256(0x00 || Marshal()), built on the stack for the usual sizes
	// (a subject, a key and a signature fit in a few hundred bytes): the
	// fold hashes a leaf for every message.
	var buf [512]byte
	b := l.appendTo(append(buf[:0], 0))
	return sha256.Sum256(b)
}

// LeafHash returns the RFC 6962 leaf hash of leaf bytes.
func LeafHash(leaf []byte) Hash { return Hash(rfc6962.DefaultHasher.HashLeaf(leaf)) }
