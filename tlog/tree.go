package tlog

import (
	"crypto/sha256"
	"math/bits"
	"strconv"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

var factory = &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}

// EmptyRoot is the root of the empty tree: SHA-256 of no bytes.
var EmptyRoot = Hash(rfc6962.DefaultHasher.EmptyRoot())

// Frontier computes a log's root as leaves are appended, in O(log n)
// space: the roots of the perfect subtrees that cover it, left to right
// (what a compact range from 0 holds), merged as RFC 6962 merges them. It
// hashes on the stack: an append allocates nothing but the slice's growth.
// Its zero value is not usable; call NewFrontier.
type Frontier struct {
	size   uint64
	hashes []Hash
}

// NewFrontier returns the frontier of the empty log.
func NewFrontier() *Frontier { return &Frontier{} }

// FrontierOf resumes a frontier from its size and Hashes.
func FrontierOf(size uint64, hashes []Hash) (*Frontier, error) {
	if bits.OnesCount64(size) != len(hashes) {
		return nil, fail(ErrRange, "a frontier of "+strconv.FormatUint(size, 10)+" leaves has "+strconv.Itoa(bits.OnesCount64(size))+" hashes, not "+strconv.Itoa(len(hashes)))
	}
	return &Frontier{size: size, hashes: append([]Hash(nil), hashes...)}, nil
}

// nodeHash is RFC 6962's interior node hash, SHA-256(0x01 || l || r).
func nodeHash(l, r *Hash) Hash {
	var b [1 + 2*sha256.Size]byte
	b[0] = 1
	copy(b[1:], l[:])
	copy(b[1+sha256.Size:], r[:])
	return sha256.Sum256(b[:])
}

// Append adds a leaf hash.
func (f *Frontier) Append(leafHash Hash) {
	h := leafHash
	// Each trailing one of the size is a perfect subtree of the height the
	// new one reaches: merged into it, right to left.
	for s := f.size; s&1 == 1; s >>= 1 {
		last := &f.hashes[len(f.hashes)-1]
		h = nodeHash(last, &h)
		f.hashes = f.hashes[:len(f.hashes)-1]
	}
	f.hashes = append(f.hashes, h)
	f.size++
}

// Size is the number of leaves.
func (f *Frontier) Size() uint64 { return f.size }

// Hashes are the roots of the perfect subtrees covering the log, left to
// right: what FrontierOf resumes from.
func (f *Frontier) Hashes() []Hash { return append([]Hash(nil), f.hashes...) }

// Root returns the RFC 6962 root of the log (EmptyRoot when empty): the
// subtrees' roots merged from the right.
func (f *Frontier) Root() Hash {
	if len(f.hashes) == 0 {
		return EmptyRoot
	}
	r := f.hashes[len(f.hashes)-1]
	for i := len(f.hashes) - 2; i >= 0; i-- {
		r = nodeHash(&f.hashes[i], &r)
	}
	return r
}

// Tree is a log held in memory: every perfect subtree's hash (about two
// hashes a leaf), enough to give its root at any earlier size and
// inclusion and consistency proofs.
type Tree struct {
	r      *compact.Range
	levels [][]byte // levels[l]: the hashes of the perfect subtrees of height l, left to right
}

// NewTree returns the empty tree.
func NewTree() *Tree { return &Tree{r: factory.NewEmptyRange(0)} }

// Append adds a leaf hash and returns its index.
func (t *Tree) Append(leafHash Hash) uint64 {
	i := t.r.End()
	h := leafHash
	// Append only fails on a hash of the wrong length.
	_ = t.r.Append(h[:], func(id compact.NodeID, h []byte) {
		for uint(len(t.levels)) <= id.Level {
			t.levels = append(t.levels, nil)
		}
		t.levels[id.Level] = append(t.levels[id.Level], h...)
	})
	return i
}

// AppendLeaf adds a leaf and returns its index.
func (t *Tree) AppendLeaf(l Leaf) uint64 { return t.Append(l.Hash()) }

// Size is the number of leaves.
func (t *Tree) Size() uint64 { return t.r.End() }

// Root is the root at the current size.
func (t *Tree) Root() Hash {
	r, _ := t.r.GetRootHash(nil)
	if r == nil {
		return EmptyRoot
	}
	return Hash(r)
}

// LeafHash returns the hash of leaf i.
func (t *Tree) LeafHash(i uint64) (Hash, error) {
	if i >= t.Size() {
		return Hash{}, ErrRange
	}
	return t.node(compact.NewNodeID(0, i)), nil
}

func (t *Tree) node(id compact.NodeID) Hash {
	return Hash(t.levels[id.Level][id.Index*32 : id.Index*32+32])
}

// RootAt returns the root of the tree's first size leaves.
func (t *Tree) RootAt(size uint64) (Hash, error) {
	if size > t.Size() {
		return Hash{}, fail(ErrRange, "size beyond the tree")
	}
	ids := compact.RangeNodes(0, size, nil)
	hs := make([][]byte, len(ids))
	for i, id := range ids {
		h := t.node(id)
		hs[i] = h[:]
	}
	r, err := factory.NewRange(0, size, hs)
	if err != nil {
		return Hash{}, fail(ErrRange, err.Error())
	}
	root, _ := r.GetRootHash(nil)
	if root == nil {
		return EmptyRoot, nil
	}
	return Hash(root), nil
}

// InclusionProof returns the RFC 6962 inclusion proof of leaf index in the
// tree of the given size.
func (t *Tree) InclusionProof(index, size uint64) ([]Hash, error) {
	if size > t.Size() || index >= size {
		return nil, fail(ErrRange, "index or size beyond the tree")
	}
	n, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, fail(ErrRange, err.Error())
	}
	return t.rehash(n)
}

// ConsistencyProof returns the RFC 6962 consistency proof from size1 to
// size2.
func (t *Tree) ConsistencyProof(size1, size2 uint64) ([]Hash, error) {
	if size2 > t.Size() || size1 > size2 {
		return nil, fail(ErrRange, "sizes beyond the tree or out of order")
	}
	n, err := proof.Consistency(size1, size2)
	if err != nil {
		return nil, fail(ErrRange, err.Error())
	}
	return t.rehash(n)
}

func (t *Tree) rehash(n proof.Nodes) ([]Hash, error) {
	hs := make([][]byte, len(n.IDs))
	for i, id := range n.IDs {
		h := t.node(id)
		hs[i] = h[:]
	}
	hs, err := n.Rehash(hs, rfc6962.DefaultHasher.HashChildren)
	if err != nil {
		return nil, fail(ErrRange, err.Error())
	}
	return toHashes(hs), nil
}

func toHashes(hs [][]byte) []Hash {
	out := make([]Hash, len(hs))
	for i, h := range hs {
		out[i] = Hash(h)
	}
	return out
}

func toSlices(hs []Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out
}

// Check reports whether c's root is the tree's root at c's size: nil, or
// ErrRange (the tree is shorter than the checkpoint) or ErrInconsistent.
// The tree is the record rebuilt from a recording; the origin is the
// caller's to check.
func (t *Tree) Check(c Checkpoint) error {
	r, err := t.RootAt(c.Size)
	if err != nil {
		return fail(ErrRange, "the checkpoint covers more messages than the record holds")
	}
	if r != c.Root {
		return fail(ErrInconsistent, "the record does not reproduce the checkpoint's root")
	}
	return nil
}

// VerifyInclusion checks that leafHash is leaf index of c's tree.
func VerifyInclusion(c Checkpoint, index uint64, leafHash Hash, p []Hash) error {
	if index >= c.Size {
		return fail(ErrRange, "the index is not below the checkpoint's size")
	}
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, index, c.Size, leafHash[:], toSlices(p), c.Root[:]); err != nil {
		return fail(ErrInclusion, err.Error())
	}
	return nil
}

// VerifyConsistency checks that two checkpoints of one log are
// consistent: that the larger's tree extends the smaller's, by the
// consistency proof p (from the smaller size to the larger; empty for
// equal sizes). It returns nil, ErrOrigin (two logs), ErrInconsistent (the
// same size, different roots: no proof can reconcile them) or
// ErrConsistency (p does not verify).
func VerifyConsistency(a, b Checkpoint, p []Hash) error {
	if a.Origin != b.Origin {
		return fail(ErrOrigin, "checkpoints of two logs")
	}
	if a.Size > b.Size {
		a, b = b, a
	}
	if a.Size == 0 && a.Root != EmptyRoot {
		return fail(ErrInconsistent, "an empty tree with a root other than SHA-256 of no bytes")
	}
	if a.Size == b.Size {
		if a.Root != b.Root {
			return fail(ErrInconsistent, "two roots for one size")
		}
		if len(p) != 0 {
			return fail(ErrConsistency, "a proof between equal sizes must be empty")
		}
		return nil
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, a.Size, b.Size, toSlices(p), a.Root[:], b.Root[:]); err != nil {
		return fail(ErrConsistency, err.Error())
	}
	return nil
}
