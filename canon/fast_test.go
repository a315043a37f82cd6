package canon_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/parley-engine/parley/canon"
)

// judgeBothWays runs ID and Verify on data with the fast path and with the
// full parser alone, under the default limits (judgeWith). It reports
// whether the fast path took data.
func judgeBothWays(t *testing.T, data []byte) bool {
	t.Helper()
	return judgeWith(t, data)
}

// checkTopMembers compares the fast path's spans of the top-level members
// with what jsontext reads.
func checkTopMembers(t *testing.T, data []byte, got []canon.Member) {
	t.Helper()
	d := jsontext.NewDecoder(bytes.NewReader(data))
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		t.Fatalf("%q: %v", clip(data), err)
	}
	var want []canon.Member
	for d.PeekKind() != '}' {
		before := int(d.InputOffset())
		name, err := d.ReadToken()
		if err != nil {
			t.Fatal(err)
		}
		afterName := int(d.InputOffset())
		v, err := d.ReadValue()
		if err != nil {
			t.Fatal(err)
		}
		end := int(d.InputOffset())
		_ = name
		// Offsets: the name's quotes are at before (after a comma) and
		// afterName-1; the value ends at end.
		if data[before] == ',' {
			before++
		}
		want = append(want, canon.Member{NameStart: before + 1, NameEnd: afterName - 1, ValueStart: end - len(v), ValueEnd: end})
	}
	if len(got) != len(want) {
		t.Fatalf("%q: %d top-level members, jsontext reads %d", clip(data), len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%q: member %d at %+v, jsontext reads %+v", clip(data), i, got[i], want[i])
		}
	}
}

func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var ea, eb *canon.Error
	if !errors.As(a, &ea) || !errors.As(b, &eb) {
		return false
	}
	return ea.Code == eb.Code && ea.Offset == eb.Offset && ea.Msg == eb.Msg
}

// corpus is every input the package's tests have, and the canonical form
// of each that has one.
func corpus(tb testing.TB) [][]byte {
	out := upstreamFiles(tb,
		"amd-upstream/*/*.input.json",
		"amd-upstream/*/*.json",
		"jcs-upstream/*/input/*.json",
		"jcs-upstream/*/output/*.json",
		"jsontestsuite/test_parsing/*.json",
		"jsontestsuite/test_transform/*.json",
		"matrix-canonical/*/*.json",
		"ep-upstream/*/*.json")
	for _, v := range loadVectors(tb) {
		out = append(out, v.input)
	}
	out = append(out, benchCorpus(400, 3)...)
	n := len(out)
	for _, d := range out[:n] {
		if c, err := canon.Canonicalize(canon.AMD, d); err == nil {
			out = append(out, c)
		}
	}
	return out
}

func TestFast_AgreesWithFullParser(t *testing.T) {
	defer canon.SetFast(true)
	docs := corpus(t)
	took := 0
	for _, d := range docs {
		if judgeBothWays(t, d) {
			took++
		}
	}
	// Near misses: canonical documents with one byte changed, inserted or
	// removed, most of which the fast path must turn down.
	rng := rand.New(rand.NewPCG(7, 8))
	mutants := 0
	for _, d := range docs {
		c, err := canon.Canonicalize(canon.AMD, d)
		if err != nil || len(c) < 2 || len(c) > 4096 {
			continue
		}
		for range 20 {
			m := bytes.Clone(c)
			k := rng.IntN(len(m))
			switch rng.IntN(3) {
			case 0:
				m[k] = " \t\"\\,:{}[]0-1e.ta\x00\x7f\xc3\xa9\xcc\x81\xed"[rng.IntN(24)]
			case 1:
				m = append(m[:k], append([]byte{"\\\" ,01-e\u0301"[rng.IntN(10)]}, m[k:]...)...)
			case 2:
				m = append(m[:k], m[k+1:]...)
			}
			judgeBothWays(t, m)
			mutants++
		}
	}
	t.Logf("%d documents (%d taken by the fast path), %d near misses", len(docs), took, mutants)
	if took < 400 {
		t.Fatalf("the fast path took only %d of %d documents", took, len(docs))
	}
}

func FuzzFastPath(f *testing.F) {
	defer canon.SetFast(true)
	for _, d := range corpus(f) {
		if len(d) <= 64<<10 {
			f.Add(d)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		judgeBothWays(t, data)
	})
}
