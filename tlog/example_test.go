package tlog_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/signing"
	"github.com/parley-engine/parley/tlog"
)

// The worked example of docs/VERIFY.md: every block fenced as
// "```text example:NAME" there is recomputed here, byte for byte. Run with
// PARLEY_PRINT_EXAMPLE=1 to print the blocks.
func TestVerifyExample(t *testing.T) {
	got := example(t)
	if os.Getenv("PARLEY_PRINT_EXAMPLE") != "" {
		for _, k := range exampleOrder {
			fmt.Printf("```text example:%s\n%s```\n\n", k, got[k])
		}
	}
	doc, err := os.ReadFile("../docs/VERIFY.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	for _, m := range regexp.MustCompile("(?ms)^```text example:([a-z0-9-]+)\n(.*?)^```$").FindAllSubmatch(doc, -1) {
		blocks[string(m[1])] = string(m[2])
	}
	for _, k := range exampleOrder {
		if blocks[k] != got[k] {
			t.Errorf("docs/VERIFY.md example:%s is\n%s\nthe code computes\n%s", k, blocks[k], got[k])
		}
	}
	if len(blocks) != len(exampleOrder) {
		t.Errorf("docs/VERIFY.md has %d example blocks, want %d", len(blocks), len(exampleOrder))
	}
}

var exampleOrder = []string{
	"participant-key", "artifact", "signed-message", "headers",
	"engine-key", "verifier-key",
	"leaf-0", "leaf-hashes", "roots",
	"checkpoint-2", "checkpoint-3", "consistency-2-3", "receipt-1",
}

func hexLines(b []byte) string {
	var s strings.Builder
	for len(b) > 0 {
		n := min(len(b), 32)
		s.WriteString(hex.EncodeToString(b[:n]))
		s.WriteByte('\n')
		b = b[n:]
	}
	return s.String()
}

func example(t *testing.T) map[string]string {
	out := map[string]string{}
	const delib = "0f8c2a54-9e1b-4c6d-8a3f-5b7e9d1c2a40"
	alice, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, bytes.Repeat([]byte{0x01}, 32))
	if err != nil {
		t.Fatal(err)
	}
	aseed, _ := alice.Seed()
	apub, _ := alice.PublicKey()
	out["participant-key"] = fmt.Sprintf("seed   %s\npublic %s\n", aseed, apub)

	// Two artifacts of alice's, canonical, with their ids, and a control
	// message.
	artifact := func(text string) ([]byte, string) {
		body := `{"text":"` + text + `"}`
		id, err := canon.ID([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		data := []byte(`{"artifact_id":"` + id.String() + `","text":"` + text + `"}`)
		if got, err := canon.Verify(data); err != nil || got != id {
			t.Fatalf("example artifact: %v", err)
		}
		return data, id.String()
	}
	data0, id0 := artifact("hello")
	data1, id1 := artifact("world")
	ctl := []byte(`{"control":"example"}`)
	out["artifact"] = fmt.Sprintf("%s\n%s\n%s\n%s\n", data0, id0, data1, id1)

	msg, err := signing.Message(delib, "alice", id0)
	if err != nil {
		t.Fatal(err)
	}
	out["signed-message"] = hexLines(msg)
	h0, err := signing.Sign(alice, delib, "alice", id0)
	if err != nil {
		t.Fatal(err)
	}
	h1, _ := signing.Sign(alice, delib, "alice", id1)
	out["headers"] = fmt.Sprintf("%s: %s\n%s: %s\n", signing.KeyHeader, h0.Key, signing.SignatureHeader, h0.Signature)
	if err := signing.Verify(delib, "alice", id0, h0, signing.Binding{"alice": apub}); err != nil {
		t.Fatal(err)
	}

	engine, _ := nkeys.FromRawSeed(nkeys.PrefixByteServer, bytes.Repeat([]byte{0x02}, 32))
	eseed, _ := engine.Seed()
	epub, _ := engine.PublicKey()
	out["engine-key"] = fmt.Sprintf("seed   %s\npublic %s\n", eseed, epub)
	origin, _ := tlog.Origin(delib)
	vkey, err := tlog.VerifierKey(epub, origin)
	if err != nil {
		t.Fatal(err)
	}
	out["verifier-key"] = vkey + "\n"

	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	leaves := []tlog.Leaf{
		tlog.NewLeaf("parley."+delib+".art.alice", t0, data0, h0.Key, h0.Signature),
		tlog.NewLeaf("parley."+delib+".art.alice", t0.Add(time.Second), data1, h1.Key, h1.Signature),
		tlog.NewLeaf("parley."+delib+".ctl", t0.Add(2*time.Second), ctl, "", ""),
	}
	out["leaf-0"] = hexLines(leaves[0].Marshal())
	tr := tlog.NewTree()
	var lh strings.Builder
	for i, l := range leaves {
		tr.AppendLeaf(l)
		h := l.Hash()
		fmt.Fprintf(&lh, "%d %s\n", i, hex.EncodeToString(h[:]))
	}
	out["leaf-hashes"] = lh.String()
	var roots strings.Builder
	for size := range uint64(4) {
		r, _ := tr.RootAt(size)
		fmt.Fprintf(&roots, "%d %s %s\n", size, hex.EncodeToString(r[:]), base64.StdEncoding.EncodeToString(r[:]))
	}
	out["roots"] = roots.String()

	s, err := tlog.NewSigner(eseed, origin)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := tlog.NewVerifier(epub, origin)
	cp := func(size uint64) (tlog.Checkpoint, []byte) {
		r, _ := tr.RootAt(size)
		c := tlog.Checkpoint{Origin: origin, Size: size, Root: r}
		signed, err := tlog.Sign(c, s)
		if err != nil {
			t.Fatal(err)
		}
		if got, _, err := tlog.Open(signed, origin, v); err != nil || got != c {
			t.Fatal(err)
		}
		return c, signed
	}
	c2, s2 := cp(2)
	c3, s3 := cp(3)
	out["checkpoint-2"] = string(s2)
	out["checkpoint-3"] = string(s3)
	p, _ := tr.ConsistencyProof(2, 3)
	var cons strings.Builder
	for _, h := range p {
		cons.WriteString(base64.StdEncoding.EncodeToString(h[:]) + "\n")
	}
	out["consistency-2-3"] = cons.String()
	if err := tlog.VerifyConsistency(c2, c3, p); err != nil {
		t.Fatal(err)
	}
	r, err := tlog.NewReceipt(tr, 1, leaves[1], c3, s3)
	if err != nil {
		t.Fatal(err)
	}
	out["receipt-1"] = string(r.Marshal())
	if _, l, _, err := tlog.VerifyReceipt(r.Marshal(), origin, v); err != nil || l != leaves[1] {
		t.Fatal(err)
	}
	return out
}
