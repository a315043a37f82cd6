package canon_test

import (
	"bytes"
	"errors"
	"io"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/text/unicode/norm"

	"github.com/parley-engine/parley/canon"
)

// node is the reference model's value tree.
type node struct {
	kind    byte // '{' '[' '"' '0' 't' 'f' 'n'
	str     string
	num     int64
	names   []string
	members []*node
}

// refParse is a slow reference for both profiles, built on jsontext's
// strict decoder (duplicates, invalid UTF-8 and lone surrogates are errors
// there too): integers by syntax (AMD) or value (JCS, via float parsing
// limited to safe integers), NFC on every string for AMD, then a collision
// check. ok=false means the reference rejects.
func refParse(data []byte, p canon.Profile) (*node, int, bool) {
	if !jsontext.Value(data).IsValid() {
		return nil, 0, false
	}
	d := jsontext.NewDecoder(bytes.NewReader(data))
	maxDepth := 0
	var read func() (*node, bool)
	read = func() (*node, bool) {
		tok, err := d.ReadToken()
		if err != nil {
			return nil, false
		}
		maxDepth = max(maxDepth, d.StackDepth())
		switch k := tok.Kind(); k {
		case '"':
			s := tok.String()
			if p == canon.AMD {
				s = norm.NFC.String(s)
			}
			return &node{kind: '"', str: s}, true
		case '0':
			raw := tok.String()
			var v int64
			if p == canon.AMD {
				if strings.ContainsAny(raw, ".eE") {
					return nil, false
				}
				n, err := strconv.ParseInt(raw, 10, 64)
				if err != nil {
					return nil, false
				}
				v = n
			} else {
				n, ok := refJCSNumber(raw)
				if !ok {
					return nil, false
				}
				v = n
			}
			if v > 1<<53-1 || v < -(1<<53-1) {
				return nil, false
			}
			return &node{kind: '0', num: v}, true
		case 't', 'f', 'n':
			return &node{kind: byte(k)}, true
		case '[':
			n := &node{kind: '['}
			for d.PeekKind() != ']' {
				m, ok := read()
				if !ok {
					return nil, false
				}
				n.members = append(n.members, m)
			}
			d.ReadToken()
			return n, true
		case '{':
			n := &node{kind: '{'}
			for d.PeekKind() != '}' {
				tok, err := d.ReadToken()
				if err != nil {
					return nil, false
				}
				name := tok.String()
				if p == canon.AMD {
					name = norm.NFC.String(name)
				}
				m, ok := read()
				if !ok {
					return nil, false
				}
				n.names = append(n.names, name)
				n.members = append(n.members, m)
			}
			d.ReadToken()
			// Sort, then reject equal neighbours (NFC collisions).
			idx := make([]int, len(n.names))
			for i := range idx {
				idx[i] = i
			}
			less := func(a, b string) int { return strings.Compare(a, b) }
			if p == canon.JCS {
				less = func(a, b string) int {
					return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
				}
			}
			slices.SortStableFunc(idx, func(a, b int) int { return less(n.names[a], n.names[b]) })
			names, members := make([]string, len(idx)), make([]*node, len(idx))
			for i, j := range idx {
				names[i], members[i] = n.names[j], n.members[j]
				if i > 0 && names[i] == names[i-1] {
					return nil, false
				}
			}
			n.names, n.members = names, members
			return n, true
		}
		return nil, false
	}
	n, ok := read()
	if !ok {
		return nil, 0, false
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return nil, 0, false
	}
	return n, maxDepth, true
}

// refJCSNumber evaluates a JSON number exactly with math/big, refusing
// values that are not integers of magnitude at most 2^53-1. Exponents too
// large to expand are decided without expanding them.
func refJCSNumber(raw string) (int64, bool) {
	mant, exp, _ := strings.Cut(strings.ToLower(raw), "e")
	if strings.Trim(mant, "-0.") == "" {
		return 0, true
	}
	if exp != "" {
		e, err := strconv.Atoi(exp)
		if err != nil || e > 400+len(mant) || e < -400-len(mant) {
			return 0, false
		}
	}
	r, ok := new(big.Rat).SetString(raw)
	if !ok || !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	n := r.Num().Int64()
	return n, n <= 1<<53-1 && n >= -(1<<53-1)
}

func refWrite(b *bytes.Buffer, n *node) {
	switch n.kind {
	case '"':
		refString(b, n.str)
	case '0':
		b.WriteString(strconv.FormatInt(n.num, 10))
	case 't':
		b.WriteString("true")
	case 'f':
		b.WriteString("false")
	case 'n':
		b.WriteString("null")
	case '[':
		b.WriteByte('[')
		for i, m := range n.members {
			if i > 0 {
				b.WriteByte(',')
			}
			refWrite(b, m)
		}
		b.WriteByte(']')
	case '{':
		b.WriteByte('{')
		for i, m := range n.members {
			if i > 0 {
				b.WriteByte(',')
			}
			refString(b, n.names[i])
			b.WriteByte(':')
			refWrite(b, m)
		}
		b.WriteByte('}')
	}
}

func refString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte("0123456789abcdef"[r>>4])
				b.WriteByte("0123456789abcdef"[r&0xF])
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// seedCorpus adds every vector input parley has to f.
func seedCorpus(f *testing.F) {
	for _, b := range upstreamFiles(f,
		"amd-upstream/*/*.input.json",
		"jcs-upstream/*/input/*.json",
		"jsontestsuite/test_parsing/*.json",
		"jsontestsuite/test_transform/*.json",
		"matrix-canonical/input/*.json") {
		f.Add(b)
	}
	for _, v := range loadVectors(f) {
		// The megabyte-sized limit vectors make every mutation and
		// minimization slow; the limits have their own tests.
		if len(v.input) <= 64<<10 {
			f.Add(v.input)
		}
	}
	for _, d := range benchCorpus(8, 2) {
		f.Add(d)
	}
}

// checkProfile runs the properties both fuzz targets share.
func checkProfile(t *testing.T, p canon.Profile, data []byte) {
	out, err := canon.Canonicalize(p, data)
	var ce *canon.Error
	if err != nil && !errors.As(err, &ce) {
		t.Fatalf("unclassified error %v", err)
	}
	ref, depth, refOK := refParse(data, p)
	valid := jsontext.Value(data).IsValid()
	if err != nil {
		if ce.Offset < 0 || ce.Offset > int64(len(data)) {
			t.Fatalf("offset %d outside input of %d bytes", ce.Offset, len(data))
		}
		// What canon calls malformed, or an unpaired surrogate,
		// jsontext rejects too.
		if (ce.Class == canon.MalformedInput || ce.Code == canon.ErrLoneSurrogate.Code) && valid {
			t.Fatalf("canon: %v; jsontext accepts", err)
		}
		// x/text keeps runs of more than 30 non-starters stream-safe by
		// inserting U+034F; canon refuses such strings instead. The
		// reference (plain x/text) must show the insertion.
		if ce.Code == canon.ErrNonstarterRun.Code {
			var b bytes.Buffer
			if refOK {
				refWrite(&b, ref)
			}
			if !refOK || !bytes.Contains(b.Bytes(), []byte("\u034f")) {
				t.Fatalf("nonstarter_run without an inserted U+034F: %q", clip(data))
			}
			return
		}
		// The reference has no depth or size limit: otherwise it must
		// agree.
		if refOK && ce.Code != canon.ErrDepth.Code && ce.Code != canon.ErrSize.Code {
			var b bytes.Buffer
			refWrite(&b, ref)
			t.Fatalf("canon rejects (%v), reference accepts as %q", err, clip(b.Bytes()))
		}
		return
	}
	if !valid {
		t.Fatalf("canon accepts what jsontext rejects: %q", clip(data))
	}
	if !refOK {
		t.Fatalf("canon accepts as %q, the reference rejects", clip(out))
	}
	if depth > canon.DefaultMaxDepth {
		t.Fatalf("accepted depth %d", depth)
	}
	var b bytes.Buffer
	refWrite(&b, ref)
	if !bytes.Equal(out, b.Bytes()) {
		t.Fatalf("canon     %q\nreference %q", clip(out), clip(b.Bytes()))
	}
	again, err := canon.Canonicalize(p, out)
	if err != nil || !bytes.Equal(again, out) {
		t.Fatalf("output does not re-parse to itself: %v", err)
	}
	if p == canon.JCS {
		// On what both accept, jsontext's RFC 8785 output is ours.
		v := jsontext.Value(slices.Clone(data))
		if err := v.Canonicalize(); err != nil {
			t.Fatalf("jsontext rejects what canon accepts: %v", err)
		}
		if !bytes.Equal(v, out) {
			t.Fatalf("canon    %q\njsontext %q", clip(out), clip(v))
		}
	}
	if p == canon.AMD && len(out) > 0 && out[0] == '{' {
		id1, err1 := canon.ID(data)
		id2, err2 := canon.ID(out)
		if err1 != nil || err2 != nil || id1 != id2 {
			t.Fatalf("ID(x) != ID(Canonicalize(x)): %v %v", err1, err2)
		}
	}
}

func FuzzAMD(f *testing.F) {
	seedCorpus(f)
	f.Fuzz(func(t *testing.T, data []byte) { checkProfile(t, canon.AMD, data) })
}

func FuzzJCS(f *testing.F) {
	seedCorpus(f)
	f.Fuzz(func(t *testing.T, data []byte) { checkProfile(t, canon.JCS, data) })
}

// clip shortens what a failure prints.
func clip(b []byte) []byte {
	if len(b) > 300 {
		return append(b[:300:300], "..."...)
	}
	return b
}
