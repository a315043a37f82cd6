package tlog_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
	"golang.org/x/mod/sumdb/note"

	"github.com/parley-engine/parley/tlog"
)

const delib = "0f8c2a54-9e1b-4c6d-8a3f-5b7e9d1c2a40"

func dh(t testing.TB, s string) tlog.Hash {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		t.Fatalf("bad hex %q", s)
	}
	return tlog.Hash(b)
}

// The RFC 6962 test vectors (as in certificate-transparency and
// transparency-dev/merkle): eight leaves, the roots of every prefix, and
// some inclusion and consistency proofs.
var (
	katLeaves = []string{"", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"}
	katRoots  = []string{
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
		"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
		"aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
		"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
		"4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
		"76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
		"ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
		"5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
	}
	katInclusion = []struct {
		index, size uint64
		proof       []string
	}{
		{0, 8, []string{"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7", "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
		{5, 8, []string{"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b", "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0", "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
		{2, 3, []string{"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"}},
		{1, 5, []string{"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d", "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
		{0, 1, nil},
	}
	katConsistency = []struct {
		size1, size2 uint64
		proof        []string
	}{
		{1, 8, []string{"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7", "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
		{6, 8, []string{"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a", "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0", "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
		{2, 5, []string{"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
		{6, 7, []string{"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a", "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f", "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
		{1, 1, nil},
		{0, 8, nil},
	}
)

func katTree(t testing.TB) *tlog.Tree {
	tr := tlog.NewTree()
	for _, l := range katLeaves {
		b, _ := hex.DecodeString(l)
		tr.Append(tlog.LeafHash(b))
	}
	return tr
}

func hashes(t testing.TB, ss []string) []tlog.Hash {
	out := make([]tlog.Hash, len(ss))
	for i, s := range ss {
		out[i] = dh(t, s)
	}
	return out
}

func TestKnownAnswers(t *testing.T) {
	f := tlog.NewFrontier()
	if f.Root() != dh(t, katRoots[0]) || tlog.EmptyRoot != dh(t, katRoots[0]) {
		t.Fatal("empty root")
	}
	tr := katTree(t)
	for i, l := range katLeaves {
		b, _ := hex.DecodeString(l)
		f.Append(tlog.LeafHash(b))
		if f.Root() != dh(t, katRoots[i+1]) {
			t.Errorf("frontier root at %d", i+1)
		}
	}
	for size := range uint64(9) {
		if r, err := tr.RootAt(size); err != nil || r != dh(t, katRoots[size]) {
			t.Errorf("RootAt(%d): %x %v", size, r, err)
		}
	}
	for _, c := range katInclusion {
		p, err := tr.InclusionProof(c.index, c.size)
		if err != nil || fmt.Sprint(p) != fmt.Sprint(hashes(t, c.proof)) {
			t.Errorf("inclusion %d in %d: %x %v", c.index, c.size, p, err)
		}
		lh, _ := tr.LeafHash(c.index)
		cp := tlog.Checkpoint{Origin: "o", Size: c.size, Root: dh(t, katRoots[c.size])}
		if err := tlog.VerifyInclusion(cp, c.index, lh, hashes(t, c.proof)); err != nil {
			t.Errorf("verify inclusion %d in %d: %v", c.index, c.size, err)
		}
	}
	for _, c := range katConsistency {
		p, err := tr.ConsistencyProof(c.size1, c.size2)
		if err != nil || fmt.Sprint(p) != fmt.Sprint(hashes(t, c.proof)) {
			t.Errorf("consistency %d to %d: %x %v", c.size1, c.size2, p, err)
		}
		a := tlog.Checkpoint{Origin: "o", Size: c.size1, Root: dh(t, katRoots[c.size1])}
		b := tlog.Checkpoint{Origin: "o", Size: c.size2, Root: dh(t, katRoots[c.size2])}
		if err := tlog.VerifyConsistency(a, b, hashes(t, c.proof)); err != nil {
			t.Errorf("verify consistency %d to %d: %v", c.size1, c.size2, err)
		}
		if err := tlog.VerifyConsistency(b, a, hashes(t, c.proof)); err != nil {
			t.Errorf("verify consistency in either order %d to %d: %v", c.size1, c.size2, err)
		}
	}
}

// Against transparency-dev/merkle's reference tree, every root, inclusion
// and consistency proof of every size up to 70.
func TestAgainstReference(t *testing.T) {
	ref := testonly.New(rfc6962.DefaultHasher)
	tr := tlog.NewTree()
	f := tlog.NewFrontier()
	const n = 70
	for i := range n {
		leaf := []byte(fmt.Sprintf("leaf %d", i))
		ref.AppendData(leaf)
		tr.Append(tlog.LeafHash(leaf))
		f.Append(tlog.LeafHash(leaf))
		if f.Root() != tlog.Hash(ref.Hash()) || tr.Root() != f.Root() {
			t.Fatalf("root at %d", i+1)
		}
		g, err := tlog.FrontierOf(f.Size(), f.Hashes())
		if err != nil || g.Root() != f.Root() {
			t.Fatalf("resumed frontier at %d: %v", i+1, err)
		}
	}
	for size := uint64(0); size <= n; size++ {
		cp := tlog.Checkpoint{Origin: "o", Size: size, Root: tlog.Hash(ref.HashAt(size))}
		if err := tr.Check(cp); err != nil {
			t.Fatalf("check %d: %v", size, err)
		}
		for i := range size {
			p, err := tr.InclusionProof(i, size)
			want, _ := ref.InclusionProof(i, size)
			if err != nil || fmt.Sprintf("%x", toSlices(p)) != fmt.Sprintf("%x", want) {
				t.Fatalf("inclusion %d in %d", i, size)
			}
			lh, _ := tr.LeafHash(i)
			if err := tlog.VerifyInclusion(cp, i, lh, p); err != nil {
				t.Fatalf("verify inclusion %d in %d: %v", i, size, err)
			}
		}
		for s1 := uint64(0); s1 <= size; s1++ {
			p, err := tr.ConsistencyProof(s1, size)
			want, _ := ref.ConsistencyProof(s1, size)
			if err != nil || fmt.Sprintf("%x", toSlices(p)) != fmt.Sprintf("%x", want) {
				t.Fatalf("consistency %d to %d", s1, size)
			}
			a := tlog.Checkpoint{Origin: "o", Size: s1, Root: tlog.Hash(ref.HashAt(s1))}
			if err := tlog.VerifyConsistency(a, cp, p); err != nil {
				t.Fatalf("verify consistency %d to %d: %v", s1, size, err)
			}
		}
	}
	if _, err := tr.InclusionProof(n, n); !errors.Is(err, tlog.ErrRange) {
		t.Errorf("index = size: %v", err)
	}
	if _, err := tr.ConsistencyProof(3, n+1); !errors.Is(err, tlog.ErrRange) {
		t.Errorf("beyond the tree: %v", err)
	}
}

func toSlices(hs []tlog.Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out
}

// msgs returns n deterministic messages' leaves.
func msgs(n int) []tlog.Leaf {
	out := make([]tlog.Leaf, n)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	for i := range out {
		out[i] = tlog.NewLeaf("parley."+delib+".art.alice", t0.Add(time.Duration(i)*time.Second), []byte(fmt.Sprintf(`{"n":%d}`, i)), "", "")
	}
	return out
}

func build(ls []tlog.Leaf) *tlog.Tree {
	t := tlog.NewTree()
	for _, l := range ls {
		t.AppendLeaf(l)
	}
	return t
}

func TestLeafRoundTrip(t *testing.T) {
	l := tlog.NewLeaf("parley."+delib+".art.alice", time.Unix(0, -5), []byte("x"), "UKEY", "SIG")
	b := l.Marshal()
	got, err := tlog.ParseLeaf(b)
	if err != nil || got != l {
		t.Fatalf("%+v %v", got, err)
	}
	if !bytes.HasPrefix(b, []byte(tlog.LeafVersion)) || got.DataHash != sha256.Sum256([]byte("x")) {
		t.Fatal("leaf bytes")
	}
	for i := range b {
		if _, err := tlog.ParseLeaf(b[:i]); !errors.Is(err, tlog.ErrLeaf) {
			t.Fatalf("truncated at %d: %v", i, err)
		}
	}
	if _, err := tlog.ParseLeaf(append(bytes.Clone(b), 0)); !errors.Is(err, tlog.ErrLeaf) {
		t.Fatal("trailing byte accepted")
	}
}

// A changed, removed or reordered message changes the root and fails the
// proofs made against the genuine checkpoint.
func TestTampering(t *testing.T) {
	ls := msgs(11)
	genuine := build(ls)
	origin, _ := tlog.Origin(delib)
	cp := tlog.Checkpoint{Origin: origin, Size: genuine.Size(), Root: genuine.Root()}
	changed := append([]tlog.Leaf(nil), ls...)
	changed[4].DataHash[0] ^= 1
	resigned := append([]tlog.Leaf(nil), ls...)
	resigned[4].Signature = "x"
	retimed := append([]tlog.Leaf(nil), ls...)
	retimed[4].UnixNano++
	removed := append(append([]tlog.Leaf(nil), ls[:4]...), ls[5:]...)
	reordered := append([]tlog.Leaf(nil), ls...)
	reordered[4], reordered[5] = reordered[5], reordered[4]
	for name, ls := range map[string][]tlog.Leaf{"changed": changed, "re-signed": resigned, "re-timed": retimed, "removed": removed, "reordered": reordered} {
		tr := build(ls)
		if err := tr.Check(cp); err == nil {
			t.Errorf("%s: the record reproduces the checkpoint", name)
		}
		// Every proof of the tampered record, against the genuine
		// checkpoint, fails from the tampered position on (or all, if
		// the sizes differ).
		for i := uint64(4); i < tr.Size(); i++ {
			lh, _ := tr.LeafHash(i)
			p, _ := tr.InclusionProof(i, tr.Size())
			if err := tlog.VerifyInclusion(cp, i, lh, p); err == nil {
				t.Errorf("%s: leaf %d proves", name, i)
			}
		}
	}
	// The genuine leaf 4 does not prove as leaf 5.
	lh, _ := genuine.LeafHash(4)
	p, _ := genuine.InclusionProof(4, cp.Size)
	if err := tlog.VerifyInclusion(cp, 5, lh, p); !errors.Is(err, tlog.ErrInclusion) {
		t.Errorf("another index: %v", err)
	}
	if err := tlog.VerifyInclusion(cp, cp.Size, lh, p); !errors.Is(err, tlog.ErrRange) {
		t.Errorf("index beyond the size: %v", err)
	}
	// A truncated record cannot reproduce a checkpoint beyond it.
	if err := build(ls[:5]).Check(cp); !errors.Is(err, tlog.ErrRange) {
		t.Errorf("short record: %v", err)
	}
}

// keyPair returns the deterministic nkeys key pair of kind pre whose raw
// seed is 32 bytes of b.
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

func TestCheckpoints(t *testing.T) {
	origin, _ := tlog.Origin(delib)
	seed, public := keyPair(t, nkeys.PrefixByteServer, 2)
	s, err := tlog.NewSigner(seed, origin)
	if err != nil {
		t.Fatal(err)
	}
	tr := build(msgs(5))
	cp := tlog.Checkpoint{Origin: origin, Size: tr.Size(), Root: tr.Root()}
	signed, err := tlog.Sign(cp, s)
	if err != nil {
		t.Fatal(err)
	}
	v, err := tlog.NewVerifier(public, origin)
	if err != nil {
		t.Fatal(err)
	}
	got, n, err := tlog.Open(signed, origin, v)
	if err != nil || got != cp || len(n.Sigs) != 1 {
		t.Fatalf("open: %+v %v", got, err)
	}
	// Interoperable: note's own verifier, from the verifier key alone,
	// accepts it; note's own signer, from the nkeys seed as a note private
	// key, makes the same bytes (Ed25519 is deterministic).
	vkey, _ := tlog.VerifierKey(public, origin)
	nv, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(signed, note.VerifierList(nv)); err != nil {
		t.Fatalf("note.Open: %v", err)
	}
	if v2, err := tlog.NewVerifier(vkey, origin); err != nil || v2.KeyHash() != nv.KeyHash() {
		t.Fatalf("a verifier key as the trusted key: %v", err)
	}
	_, raw, _ := nkeys.DecodeSeed(seed)
	parts := strings.Split(vkey, "+")
	ns, err := note.NewSigner("PRIVATE+KEY+" + origin + "+" + parts[1] + "+" + base64.StdEncoding.EncodeToString(append([]byte{1}, raw...)))
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := note.Sign(&note.Note{Text: string(cp.Body())}, ns); !bytes.Equal(again, signed) {
		t.Fatalf("note's signer:\n%s\nours:\n%s", again, signed)
	}

	// Refusals.
	_, otherPublic := keyPair(t, nkeys.PrefixByteServer, 3)
	ov, _ := tlog.NewVerifier(otherPublic, origin)
	otherOrigin, _ := tlog.Origin("0f8c2a54-9e1b-4c6d-8a3f-5b7e9d1c2a41")
	vOther, _ := tlog.NewVerifier(public, otherOrigin)
	tampered := bytes.Replace(signed, []byte("\n5\n"), []byte("\n6\n"), 1)
	for name, c := range map[string]struct {
		signed []byte
		origin string
		v      note.Verifier
		want   *tlog.Error
	}{
		"another key":                  {signed, origin, ov, tlog.ErrSignature},
		"another deliberation":         {signed, otherOrigin, vOther, tlog.ErrSignature},
		"a verifier of another origin": {signed, origin, vOther, tlog.ErrOrigin},
		"a tampered size":              {tampered, origin, v, tlog.ErrSignature},
		"not a note":                   {[]byte("hello"), origin, v, tlog.ErrCheckpoint},
	} {
		if _, _, err := tlog.Open(c.signed, c.origin, c.v); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %s", name, err, c.want.Code)
		}
	}
	// Bodies that are not exactly a checkpoint's, even when signed.
	for name, body := range map[string]string{
		"extension line": string(cp.Body()) + "ext\n",
		"leading zero":   strings.Replace(string(cp.Body()), "\n5\n", "\n05\n", 1),
		"short root":     origin + "\n5\nAAAA\n",
	} {
		b, err := note.Sign(&note.Note{Text: body}, s)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := tlog.Open(b, origin, v); !errors.Is(err, tlog.ErrCheckpoint) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := tlog.Sign(tlog.Checkpoint{Origin: otherOrigin}, s); !errors.Is(err, tlog.ErrOrigin) {
		t.Errorf("signing another origin: %v", err)
	}
	if _, err := tlog.NewSigner([]byte("SNAAAA"), origin); !errors.Is(err, tlog.ErrKey) {
		t.Errorf("bad seed: %v", err)
	}
	if _, err := tlog.Origin("not-a-uuid"); !errors.Is(err, tlog.ErrOrigin) {
		t.Errorf("bad deliberation: %v", err)
	}
}

// Two checkpoints of one size with different roots are a split view,
// provable from the two signed notes alone; a consistency proof between
// different sizes verifies, or not.
func TestConsistency(t *testing.T) {
	origin, _ := tlog.Origin(delib)
	ls := msgs(9)
	honest := build(ls)
	forked := build(append(append([]tlog.Leaf(nil), ls[:6]...), msgs(12)[9:]...))
	at := func(tr *tlog.Tree, size uint64) tlog.Checkpoint {
		r, err := tr.RootAt(size)
		if err != nil {
			t.Fatal(err)
		}
		return tlog.Checkpoint{Origin: origin, Size: size, Root: r}
	}
	p, _ := honest.ConsistencyProof(4, 9)
	if err := tlog.VerifyConsistency(at(honest, 4), at(honest, 9), p); err != nil {
		t.Fatal(err)
	}
	if err := tlog.VerifyConsistency(at(honest, 9), at(forked, 9), nil); !errors.Is(err, tlog.ErrInconsistent) {
		t.Errorf("split view: %v", err)
	}
	// The fork agrees up to 6; a proof from 7 on the fork does not show
	// the honest 9 extends it.
	pf, _ := forked.ConsistencyProof(7, 9)
	if err := tlog.VerifyConsistency(at(forked, 7), at(honest, 9), pf); !errors.Is(err, tlog.ErrConsistency) {
		t.Errorf("forked: %v", err)
	}
	ph, _ := honest.ConsistencyProof(7, 9)
	if err := tlog.VerifyConsistency(at(forked, 7), at(honest, 9), ph); !errors.Is(err, tlog.ErrConsistency) {
		t.Errorf("forked, honest proof: %v", err)
	}
	p6, _ := honest.ConsistencyProof(6, 9)
	if err := tlog.VerifyConsistency(at(forked, 6), at(honest, 9), p6); err != nil {
		t.Errorf("the common prefix: %v", err)
	}
	other := at(honest, 9)
	other.Origin = "parley.x"
	if err := tlog.VerifyConsistency(at(honest, 4), other, p); !errors.Is(err, tlog.ErrOrigin) {
		t.Errorf("two origins: %v", err)
	}
	bogusEmpty := tlog.Checkpoint{Origin: origin, Size: 0, Root: honest.Root()}
	if err := tlog.VerifyConsistency(bogusEmpty, at(honest, 9), nil); !errors.Is(err, tlog.ErrInconsistent) {
		t.Errorf("an empty tree with a root: %v", err)
	}
	if err := honest.Check(at(forked, 9)); !errors.Is(err, tlog.ErrInconsistent) {
		t.Errorf("the record refutes the fork: %v", err)
	}
}

func TestReceipts(t *testing.T) {
	origin, _ := tlog.Origin(delib)
	seed, public := keyPair(t, nkeys.PrefixByteServer, 2)
	s, _ := tlog.NewSigner(seed, origin)
	v, _ := tlog.NewVerifier(public, origin)
	ls := msgs(7)
	tr := build(ls)
	cp := tlog.Checkpoint{Origin: origin, Size: 6, Root: must2(tr.RootAt(6))}
	signed, _ := tlog.Sign(cp, s)
	for i := range uint64(6) {
		r, err := tlog.NewReceipt(tr, i, ls[i], cp, signed)
		if err != nil {
			t.Fatal(err)
		}
		b := r.Marshal()
		if !bytes.HasPrefix(b, []byte("c2sp.org/tlog-proof@v1\nextra ")) {
			t.Fatalf("receipt:\n%s", b)
		}
		got, leaf, c, err := tlog.VerifyReceipt(b, origin, v)
		if err != nil || leaf != ls[i] || c != cp || got.Index != i {
			t.Fatalf("receipt %d: %v", i, err)
		}
		// Tampered: the leaf, the index, a proof hash, the checkpoint.
		other := r
		other.Leaf = ls[(i+1)%6].Marshal()
		if _, _, _, err := tlog.VerifyReceipt(other.Marshal(), origin, v); !errors.Is(err, tlog.ErrInclusion) {
			t.Errorf("another leaf: %v", err)
		}
		other = r
		other.Index = (i + 1) % 6
		if _, _, _, err := tlog.VerifyReceipt(other.Marshal(), origin, v); !errors.Is(err, tlog.ErrInclusion) {
			t.Errorf("another index: %v", err)
		}
		other = r
		other.Proof = append([]tlog.Hash(nil), r.Proof...)
		other.Proof[0][3] ^= 1
		if _, _, _, err := tlog.VerifyReceipt(other.Marshal(), origin, v); !errors.Is(err, tlog.ErrInclusion) {
			t.Errorf("a changed proof: %v", err)
		}
		other = r
		other.Checkpoint = bytes.Replace(signed, []byte("\n6\n"), []byte("\n7\n"), 1)
		if _, _, _, err := tlog.VerifyReceipt(other.Marshal(), origin, v); !errors.Is(err, tlog.ErrSignature) {
			t.Errorf("a changed checkpoint: %v", err)
		}
	}
	if _, err := tlog.NewReceipt(tr, 6, ls[6], cp, signed); !errors.Is(err, tlog.ErrRange) {
		t.Errorf("a leaf the checkpoint does not cover: %v", err)
	}
	if _, err := tlog.NewReceipt(tr, 2, ls[3], cp, signed); !errors.Is(err, tlog.ErrInclusion) {
		t.Errorf("the wrong leaf: %v", err)
	}
	r, _ := tlog.NewReceipt(tr, 2, ls[2], cp, signed)
	b := r.Marshal()
	for name, bad := range map[string][]byte{
		"no trailing newline": bytes.TrimSuffix(b, []byte("\n")),
		"CRLF":                bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")),
		"no leaf":             Receipt{r.Index, r.Proof, nil, r.Checkpoint}.marshal(),
		"a bad leaf":          Receipt{r.Index, r.Proof, []byte("x"), r.Checkpoint}.marshal(),
		"index with a plus":   bytes.Replace(b, []byte("index 2"), []byte("index +2"), 1),
		"leading zero":        bytes.Replace(b, []byte("index 2"), []byte("index 02"), 1),
		"other header":        bytes.Replace(b, []byte("@v1"), []byte("@v2"), 1),
	} {
		if _, err := tlog.ParseReceipt(bad); !errors.Is(err, tlog.ErrReceipt) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Receipt mirrors tlog.Receipt to build malformed ones.
type Receipt struct {
	Index      uint64
	Proof      []tlog.Hash
	Leaf       []byte
	Checkpoint []byte
}

func (r Receipt) marshal() []byte { return tlog.Receipt(r).Marshal() }

func must2(h tlog.Hash, err error) tlog.Hash {
	if err != nil {
		panic(err)
	}
	return h
}

func FuzzOpen(f *testing.F) {
	origin, _ := tlog.Origin(delib)
	seed, public := keyPair(f, nkeys.PrefixByteServer, 2)
	s, _ := tlog.NewSigner(seed, origin)
	v, _ := tlog.NewVerifier(public, origin)
	signed, _ := tlog.Sign(tlog.Checkpoint{Origin: origin, Size: 3, Root: build(msgs(3)).Root()}, s)
	f.Add(signed)
	f.Add([]byte(origin + "\n3\nAAAA\n\n— x y\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := tlog.ParseBody(b); err == nil {
			c, _ := tlog.ParseBody(b)
			if !bytes.Equal(c.Body(), b) {
				t.Fatalf("accepted a non-canonical body %q", b)
			}
		} else if !errors.Is(err, tlog.ErrCheckpoint) {
			t.Fatalf("uncoded: %v", err)
		}
		c, _, err := tlog.Open(b, origin, v)
		if err != nil {
			var e *tlog.Error
			if !errors.As(err, &e) {
				t.Fatalf("uncoded: %v", err)
			}
			return
		}
		if c.Origin != origin {
			t.Fatalf("opened another origin's checkpoint")
		}
	})
}

func FuzzParseReceipt(f *testing.F) {
	origin, _ := tlog.Origin(delib)
	seed, _ := keyPair(f, nkeys.PrefixByteServer, 2)
	s, _ := tlog.NewSigner(seed, origin)
	ls := msgs(3)
	tr := build(ls)
	cp := tlog.Checkpoint{Origin: origin, Size: 3, Root: tr.Root()}
	signed, _ := tlog.Sign(cp, s)
	r, _ := tlog.NewReceipt(tr, 1, ls[1], cp, signed)
	f.Add(r.Marshal())
	f.Add([]byte("c2sp.org/tlog-proof@v1\nindex 0\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := tlog.ParseReceipt(b)
		if err != nil {
			if !errors.Is(err, tlog.ErrReceipt) {
				t.Fatalf("uncoded: %v", err)
			}
			return
		}
		if !bytes.Equal(r.Marshal(), b) {
			t.Fatal("accepted a non-canonical receipt")
		}
	})
}

func FuzzParseLeaf(f *testing.F) {
	f.Add(msgs(1)[0].Marshal())
	f.Add([]byte(tlog.LeafVersion))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := tlog.ParseLeaf(b)
		if err != nil {
			if !errors.Is(err, tlog.ErrLeaf) {
				t.Fatalf("uncoded: %v", err)
			}
			return
		}
		if !bytes.Equal(l.Marshal(), b) {
			t.Fatal("accepted a non-canonical leaf")
		}
	})
}

func BenchmarkFrontierAppend(b *testing.B) {
	f := tlog.NewFrontier()
	h := msgs(1)[0].Hash()
	b.ReportAllocs()
	for b.Loop() {
		f.Append(h)
	}
}

func BenchmarkLeafHash(b *testing.B) {
	l := msgs(1)[0]
	b.ReportAllocs()
	for b.Loop() {
		_ = l.Hash()
	}
}

func BenchmarkTreeAppend(b *testing.B) {
	tr := tlog.NewTree()
	h := msgs(1)[0].Hash()
	b.ReportAllocs()
	for b.Loop() {
		tr.Append(h)
	}
}

func benchTree(n int) *tlog.Tree {
	tr := tlog.NewTree()
	for i := range n {
		tr.Append(tlog.LeafHash([]byte(fmt.Sprint(i))))
	}
	return tr
}

func BenchmarkInclusionProof(b *testing.B) {
	const n = 1 << 20
	tr := benchTree(n)
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		if _, err := tr.InclusionProof(i%n, n); err != nil {
			b.Fatal(err)
		}
		i += 7919
	}
}

func BenchmarkVerifyInclusion(b *testing.B) {
	const n = 1 << 20
	tr := benchTree(n)
	cp := tlog.Checkpoint{Origin: "o", Size: n, Root: tr.Root()}
	p, _ := tr.InclusionProof(12345, n)
	lh, _ := tr.LeafHash(12345)
	b.ReportAllocs()
	for b.Loop() {
		if err := tlog.VerifyInclusion(cp, 12345, lh, p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkConsistencyProof(b *testing.B) {
	const n = 1 << 20
	tr := benchTree(n)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.ConsistencyProof(n/3, n); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSignCheckpoint(b *testing.B) {
	origin, _ := tlog.Origin(delib)
	seed, _ := keyPair(b, nkeys.PrefixByteServer, 2)
	s, _ := tlog.NewSigner(seed, origin)
	cp := tlog.Checkpoint{Origin: origin, Size: 3, Root: build(msgs(3)).Root()}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tlog.Sign(cp, s); err != nil {
			b.Fatal(err)
		}
	}
}
