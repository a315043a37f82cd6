package tlog

import (
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

var factory = &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}

// EmptyRoot is the root of the empty tree: SHA-256 of no bytes.
var EmptyRoot = Hash(rfc6962.DefaultHasher.EmptyRoot())

// Frontier computes a log's root as leaves are appended, in O(log n)
// space: the roots of the perfect subtrees that cover it (a compact range
// from 0). Its zero value is not usable; call NewFrontier.
type Frontier struct {
	r *compact.Range
}

// NewFrontier returns the frontier of the empty log.
func NewFrontier() *Frontier { return &Frontier{r: factory.NewEmptyRange(0)} }

// FrontierOf resumes a frontier from its size and Hashes.
func FrontierOf(size uint64, hashes []Hash) (*Frontier, error) {
	hs := make([][]byte, len(hashes))
	for i := range hashes {
		hs[i] = hashes[i][:]
	}
	r, err := factory.NewRange(0, size, hs)
	if err != nil {
		return nil, fail(ErrRange, err.Error())
	}
	return &Frontier{r: r}, nil
}

// Append adds a leaf hash.
func (f *Frontier) Append(leafHash Hash) { f.append(leafHash, nil) }

func (f *Frontier) append(leafHash Hash, visit compact.VisitFn) {
	h := leafHash
	// Append only fails on a hash of the wrong length.
	_ = f.r.Append(h[:], visit)
}

// Size is the number of leaves.
func (f *Frontier) Size() uint64 { return f.r.End() }

// Hashes are the roots of the perfect subtrees covering the log, left to
// right: what FrontierOf resumes from.
func (f *Frontier) Hashes() []Hash {
	out := make([]Hash, len(f.r.Hashes()))
	for i, h := range f.r.Hashes() {
		out[i] = Hash(h)
	}
	return out
}

// Root returns the RFC 6962 root of the log (EmptyRoot when empty).
func (f *Frontier) Root() Hash {
	r, _ := f.r.GetRootHash(nil)
	if r == nil {
		return EmptyRoot
	}
	return Hash(r)
}

// Tree is a log held in memory: every perfect subtree's hash (about two
// hashes a leaf), enough to give its root at any earlier size and
// inclusion and consistency proofs.
type Tree struct {
	f      *Frontier
	levels [][]byte // levels[l]: the hashes of the perfect subtrees of height l, left to right
}

// NewTree returns the empty tree.
func NewTree() *Tree { return &Tree{f: NewFrontier()} }

// Append adds a leaf hash and returns its index.
func (t *Tree) Append(leafHash Hash) uint64 {
	i := t.f.Size()
	t.f.append(leafHash, func(id compact.NodeID, h []byte) {
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
func (t *Tree) Size() uint64 { return t.f.Size() }

// Root is the root at the current size.
func (t *Tree) Root() Hash { return t.f.Root() }

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
