package tlog

import (
	"bytes"

	"github.com/transparency-dev/formats/proof"
	"golang.org/x/mod/sumdb/note"
)

// Receipt proves that a message is in a deliberation's log: the leaf, its
// index, the inclusion proof and the signed checkpoint it leads to (the
// first checkpoint that covers the message, when the engine hands it out).
// Its encoding is a C2SP tlog-proof document whose extra data is the
// leaf's bytes:
//
//	c2sp.org/tlog-proof@v1\n
//	extra <base64 of the leaf>\n
//	index <decimal index>\n
//	<base64 of a proof hash>\n      (one line per hash, leaf to root)
//	\n
//	<the signed checkpoint note>
type Receipt struct {
	Index      uint64
	Proof      []Hash
	Leaf       []byte
	Checkpoint []byte
}

// Marshal encodes the receipt.
func (r Receipt) Marshal() []byte {
	return proof.TLogProof{Index: r.Index, Hashes: r.Proof, Checkpoint: r.Checkpoint, ExtraData: r.Leaf}.Marshal()
}

// ParseReceipt decodes a receipt; anything but exactly Marshal's output of
// a receipt with a parseable leaf and a checkpoint is ErrReceipt. It does
// not verify: see VerifyReceipt.
func ParseReceipt(b []byte) (Receipt, error) {
	var p proof.TLogProof
	if err := p.Unmarshal(b); err != nil {
		return Receipt{}, fail(ErrReceipt, err.Error())
	}
	if len(p.ExtraData) == 0 {
		return Receipt{}, fail(ErrReceipt, "no leaf")
	}
	if len(p.Checkpoint) == 0 {
		return Receipt{}, fail(ErrReceipt, "no checkpoint")
	}
	r := Receipt{Index: p.Index, Proof: p.Hashes, Leaf: p.ExtraData, Checkpoint: p.Checkpoint}
	if !bytes.Equal(r.Marshal(), b) {
		return Receipt{}, fail(ErrReceipt, "not in canonical form")
	}
	if _, err := ParseLeaf(r.Leaf); err != nil {
		return Receipt{}, fail(ErrReceipt, err.Error())
	}
	return r, nil
}

// VerifyReceipt parses a receipt and verifies it: the checkpoint is
// origin's, signed by log (and cosigned by every witness given), and the
// inclusion proof leads from the leaf at the index to its root. It
// returns the receipt, its leaf and the checkpoint; what the leaf says
// (its subject, data hash and signature) is the caller's to compare with
// the message it holds.
func VerifyReceipt(b []byte, origin string, log note.Verifier, witnesses ...note.Verifier) (Receipt, Leaf, Checkpoint, error) {
	r, err := ParseReceipt(b)
	if err != nil {
		return Receipt{}, Leaf{}, Checkpoint{}, err
	}
	c, _, err := Open(r.Checkpoint, origin, log, witnesses...)
	if err != nil {
		return Receipt{}, Leaf{}, Checkpoint{}, err
	}
	l, _ := ParseLeaf(r.Leaf)
	if err := VerifyInclusion(c, r.Index, LeafHash(r.Leaf), r.Proof); err != nil {
		return Receipt{}, Leaf{}, Checkpoint{}, err
	}
	return r, l, c, nil
}

// NewReceipt makes the receipt of leaf index of t in the checkpoint c,
// whose signed note is signed. It checks that the tree holds the leaf at
// the index, and that c is the tree's head at its size and is what signed
// says; it does not verify signed's signatures.
func NewReceipt(t *Tree, index uint64, leaf Leaf, c Checkpoint, signed []byte) (Receipt, error) {
	if !bytes.HasPrefix(signed, append(c.Body(), '\n')) {
		return Receipt{}, fail(ErrCheckpoint, "the signed note is not of the checkpoint")
	}
	if err := t.Check(c); err != nil {
		return Receipt{}, err
	}
	lb := leaf.Marshal()
	if h, err := t.LeafHash(index); err != nil || h != LeafHash(lb) {
		return Receipt{}, fail(ErrInclusion, "the tree holds another leaf at the index")
	}
	p, err := t.InclusionProof(index, c.Size)
	if err != nil {
		return Receipt{}, err
	}
	return Receipt{Index: index, Proof: p, Leaf: lb, Checkpoint: signed}, nil
}
