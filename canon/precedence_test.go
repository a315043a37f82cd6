package canon_test

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/parley-engine/parley/canon"
)

var precedenceDump = flag.String("precedence.dump", "",
	"write the random multi-fault documents of TestPrecedence_Model to this file as JSON lines "+
		"(input_hex, the model's class without parley's limits and with them, parley's class and id), to run another implementation over them")

// faultKinds are the faults the multi-fault generator combines.
var faultKinds = []string{
	"fraction", "exponent", "big-integer", "non-finite", "duplicate", "collision",
	"surrogate-name", "surrogate-value", "invalid-utf8", "bom", "syntax", "top-level",
	"nesting", "nonstarter-run",
}

// gnode is a document under construction: an object, an array or a leaf of
// raw JSON text, which may be faulty.
type gnode struct {
	kind  byte // '{', '[' or 'l'
	leaf  string
	names []string // raw name text, quotes included
	kids  []*gnode
	colon []bool // a member whose colon is missing
	tail  string // raw text before the closing bracket
}

type faultGen struct {
	r    *rand.Rand
	seq  int
	bom  bool
	wrap string // top-level fault: "array" or "string"
	cut  int    // bytes cut from the end, 0 for none
	more string // text after the value
}

var (
	plainNames  = []string{`"a"`, `"b"`, `"artifact_id"`, `"payload"`, `"\u00e9t\u00e9"`, `"z"`, `"\ud83d\ude00"`, `"k\u0301"`, `"\u4e2d"`, `"n"`}
	plainLeaves = []string{`0`, `-12`, `9007199254740991`, `-9007199254740991`, `-0`, `true`, `false`, `null`,
		`"plain"`, `"caf\u00e9"`, "\"e\u0301tude\"", `"\u00e9"`, `"\ud83d\ude00"`, `"x\ty"`, `""`, "\"\u212b\"", `"\ufdd0"`}
)

func (g *faultGen) pick(xs []string) string { return xs[g.r.IntN(len(xs))] }

func (g *faultGen) name() string {
	g.seq++
	return fmt.Sprintf(`"m%d"`, g.seq)
}

// tree builds a fault-free random value.
func (g *faultGen) tree(depth int) *gnode {
	switch k := g.r.IntN(10); {
	case depth < 4 && k < 3:
		n := &gnode{kind: '{'}
		names := slices.Clone(plainNames)
		g.r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		for i := range g.r.IntN(5) {
			n.names = append(n.names, names[i])
			n.kids = append(n.kids, g.tree(depth+1))
			n.colon = append(n.colon, false)
		}
		return n
	case depth < 4 && k < 5:
		n := &gnode{kind: '['}
		for range g.r.IntN(4) {
			n.kids = append(n.kids, g.tree(depth+1))
		}
		return n
	}
	return &gnode{kind: 'l', leaf: g.pick(plainLeaves)}
}

// containers lists the objects and arrays of t with their depth.
func containers(t *gnode, depth int, out *[]*gnode, depths *[]int) {
	if t.kind == 'l' {
		return
	}
	*out = append(*out, t)
	*depths = append(*depths, depth)
	for _, k := range t.kids {
		containers(k, depth+1, out, depths)
	}
}

// insert puts a member (objects) or element (arrays) at a random place.
func (g *faultGen) insert(c *gnode, name string, v *gnode) {
	at := g.r.IntN(len(c.kids) + 1)
	c.kids = slices.Insert(c.kids, at, v)
	if c.kind == '{' {
		if name == "" {
			name = g.name()
		}
		c.names = slices.Insert(c.names, at, name)
		c.colon = slices.Insert(c.colon, at, false)
	}
}

// inject adds one fault of the kind to the document rooted at top.
func (g *faultGen) inject(top *gnode, kind string) {
	var cs []*gnode
	var ds []int
	containers(top, 1, &cs, &ds)
	ci := g.r.IntN(len(cs))
	c := cs[ci]
	leaf := func(texts ...string) { g.insert(c, "", &gnode{kind: 'l', leaf: g.pick(texts)}) }
	var objs []*gnode
	for _, o := range cs {
		if o.kind == '{' {
			objs = append(objs, o)
		}
	}
	obj := objs[g.r.IntN(len(objs))]
	switch kind {
	case "fraction":
		leaf(`1.5`, `-0.0`, `2.50`, `1.5e`, `0.1E3`, `3.25E+`)
	case "exponent":
		leaf(`1e5`, `2E-3`, `0e0`, `-1E+2`)
	case "big-integer":
		leaf(`9007199254740992`, `-9007199254740992`, `12345678901234567`, `99999999999999999999`)
	case "non-finite":
		leaf(`NaN`, `Infinity`, `-Infinity`)
	case "surrogate-value":
		leaf(`"\ud800"`, `"a\udc00b"`, `"\ud800\u0041"`, `"\udbff"`, `"\ud800\ud800\udc00"`)
	case "invalid-utf8":
		switch g.r.IntN(3) {
		case 0:
			leaf("\"\xff\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"caf\xe9\"", "\"\xe2\x82\"")
		case 1:
			g.insert(obj, "\"n\xf4\x90\x80\x80\"", &gnode{kind: 'l', leaf: `1`})
		default:
			leaf("\xff", "\xc3")
		}
	case "duplicate", "collision":
		if len(obj.names) == 0 || g.r.IntN(3) == 0 {
			first := []string{`"d"`, `"\u00e9"`, `"\u00c5"`}[g.r.IntN(3)]
			g.insert(obj, first, g.tree(3))
		}
		k := g.r.IntN(len(obj.names))
		n := obj.names[k]
		if kind == "collision" {
			n = map[string]string{`"\u00e9"`: "\"e\u0301\"", `"\u00c5"`: `"\u212b"`, `"\u00e9t\u00e9"`: "\"e\u0301te\u0301\""}[n]
			if n == "" {
				n = "\"e\u0301\""
				g.insert(obj, `"\u00e9"`, g.tree(3))
			}
		} else if n == `"a"` && g.r.IntN(2) == 0 {
			n = `"\u0061"`
		}
		// After the original, so that it is the second occurrence.
		at := k + 1 + g.r.IntN(len(obj.names)-k)
		obj.kids = slices.Insert(obj.kids, at, g.tree(3))
		obj.names = slices.Insert(obj.names, at, n)
		obj.colon = slices.Insert(obj.colon, at, false)
	case "surrogate-name":
		g.insert(obj, g.pick([]string{`"\ud800"`, `"x\udc00"`, `"\ud83d"`, `"\ud800\u0041"`}), g.tree(3))
	case "bom":
		g.bom = true
	case "top-level":
		g.wrap = []string{"array", "string"}[g.r.IntN(2)]
	case "nesting":
		// 58 to 69 levels below the container: over the limit or not.
		n := 58 + g.r.IntN(12)
		open, close := "", ""
		for i := range n {
			if i%3 == 0 {
				open += `{"x":`
				close = "}" + close
			} else {
				open += "["
				close = "]" + close
			}
		}
		leaf(open + "1" + close)
	case "nonstarter-run":
		run := "\"a" + strings.Repeat("\u0301", 31) + "\""
		if g.r.IntN(2) == 0 {
			leaf(run)
		} else {
			g.insert(obj, run, g.tree(3))
		}
	case "syntax":
		switch g.r.IntN(9) {
		case 0:
			c.tail = ","
		case 1:
			if len(obj.colon) > 0 {
				obj.colon[g.r.IntN(len(obj.colon))] = true
			} else {
				leaf(`tru`)
			}
		case 2:
			leaf(`tru`, `nul`, `True`, `01`, `1.`, `+1`, `.5`, `-`, `1e`, `'a'`, `[1,]`)
		case 3:
			leaf("\"a\x01b\"", "\"\t\"")
		case 4:
			leaf(`"\q"`, `"\u12G4"`, `"\ud800\u12"`)
		case 5:
			g.cut = 1 + g.r.IntN(6)
		case 6:
			g.more = g.pick([]string{` 1`, `{}`, `x`, ` ,`})
		case 7:
			leaf(`/*c*/1`)
		default:
			leaf(`{"a" 1}`, `{1:2}`, `[1 2]`)
		}
	}
}

func (g *faultGen) write(b *strings.Builder, n *gnode) {
	ws := func() {
		if g.r.IntN(4) == 0 {
			b.WriteString([]string{" ", "\n  ", "\t", "\r\n"}[g.r.IntN(4)])
		}
	}
	switch n.kind {
	case 'l':
		b.WriteString(n.leaf)
		return
	case '{':
		b.WriteByte('{')
		for i, k := range n.kids {
			if i > 0 {
				b.WriteByte(',')
			}
			ws()
			b.WriteString(n.names[i])
			ws()
			if !n.colon[i] {
				b.WriteByte(':')
			}
			ws()
			g.write(b, k)
		}
		b.WriteString(n.tail)
		ws()
		b.WriteByte('}')
	case '[':
		b.WriteByte('[')
		for i, k := range n.kids {
			if i > 0 {
				b.WriteByte(',')
			}
			ws()
			g.write(b, k)
		}
		b.WriteString(n.tail)
		ws()
		b.WriteByte(']')
	}
}

// multiFaultDoc returns a random artifact-shaped document with n faults of
// random kinds in random places, and the kinds.
func multiFaultDoc(r *rand.Rand, n int) ([]byte, []string) {
	g := &faultGen{r: r}
	top := &gnode{kind: '{'}
	for _, nm := range []string{`"protocol_version"`, `"artifact_type"`, `"payload"`, `"references"`} {
		top.names = append(top.names, nm)
		top.colon = append(top.colon, false)
		top.kids = append(top.kids, g.tree(1))
	}
	var kinds []string
	for range n {
		k := faultKinds[r.IntN(len(faultKinds))]
		kinds = append(kinds, k)
		g.inject(top, k)
	}
	var b strings.Builder
	if g.bom {
		b.WriteString("\uFEFF")
	}
	switch g.wrap {
	case "array":
		b.WriteByte('[')
		g.write(&b, top)
		b.WriteByte(']')
	case "string":
		b.WriteString(`"x"`)
	default:
		g.write(&b, top)
	}
	b.WriteString(g.more)
	doc := []byte(b.String())
	if g.cut > 0 && g.cut < len(doc) {
		doc = doc[:len(doc)-g.cut]
	}
	return doc, kinds
}

// outcome is parley's answer in the model's terms.
func outcome(err error) verdict {
	if err == nil {
		return verdict{ok: true, offset: -1}
	}
	var ce *canon.Error
	if !errors.As(err, &ce) {
		return verdict{class: "unclassified", code: err.Error(), offset: -1}
	}
	return verdict{class: ce.Class, code: ce.Code, offset: int(ce.Offset)}
}

// agrees reports whether parley's answer got matches the model's want: the
// same class, and the same code and offset wherever the model names them
// (for a syntax error, any syntax code).
func agrees(got, want verdict) bool {
	if got.ok || want.ok {
		return got.ok == want.ok
	}
	if got.class != want.class {
		return false
	}
	if isSyntax(want.code) {
		// Syntax errors: parley's finer codes and offsets are its own.
		return isSyntax(got.code)
	}
	return got.code == want.code && (want.offset < 0 || got.offset == want.offset)
}

// isSyntax reports whether code is one of the codes of JSON syntax errors.
func isSyntax(code string) bool {
	switch code {
	case codeSyntax:
		return true
	case canon.ErrDuplicateName.Code, canon.ErrInvalidUTF8.Code, canon.ErrBOM.Code:
		return false
	}
	return strings.HasPrefix(code, "json.")
}

func describe(v verdict) string {
	if v.ok {
		return "accepted"
	}
	return fmt.Sprintf("%s %s at %d", v.class, v.code, v.offset)
}

// TestPrecedence_Model is the differential test: on random documents with
// one to four faults each, parley's id reports the fault the model of
// upstream's order (with parley's limits) decides on. It reports the
// agreement, which must be complete, and how often upstream alone (the
// model without parley's limits) gives the same class.
func TestPrecedence_Model(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 2000
	}
	var dump *json.Encoder
	if *precedenceDump != "" {
		f, err := os.Create(*precedenceDump)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		dump = json.NewEncoder(f)
	}
	r := rand.New(rand.NewPCG(16, 2026))
	c := canon.New(canon.AMD)
	agree, classAgree, upstreamComparable, upstreamAgree := 0, 0, 0, 0
	var failures []string
	for range n {
		doc, kinds := multiFaultDoc(r, 1+r.IntN(4))
		want := model(doc, modelOpts{limits: true, id: true})
		up := model(doc, modelOpts{id: true})
		if want.crash || up.crash {
			t.Fatalf("generated a document upstream cannot answer: %q", clip(doc))
		}
		_, id, err := c.ID(doc)
		got := outcome(err)
		if agrees(got, want) {
			agree++
		} else if len(failures) < 10 {
			failures = append(failures, fmt.Sprintf("%q (%v)\n  parley %s\n  model  %s", clip(doc), kinds, describe(got), describe(want)))
		}
		if got.ok == want.ok && got.class == want.class {
			classAgree++
		}
		// Where parley's own limits do not decide, upstream's class is
		// parley's.
		if up.ok == want.ok && up.class == want.class && up.code == want.code {
			upstreamComparable++
			if got.ok == up.ok && got.class == up.class {
				upstreamAgree++
			}
		}
		if dump != nil {
			line := map[string]any{"input_hex": hex.EncodeToString(doc), "kinds": kinds,
				"upstream_class": string(up.class), "with_limits_class": string(want.class), "parley_class": string(got.class)}
			if err == nil {
				line["parley_id"] = id.String()
			}
			if err := dump.Encode(line); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d random multi-fault documents: parley and the model agree on %d (%.1f%%; class alone %.1f%%); "+
		"on the %d that parley's limits do not decide, parley reports upstream's class for %d (%.1f%%)",
		n, agree, 100*float64(agree)/float64(n), 100*float64(classAgree)/float64(n),
		upstreamComparable, upstreamAgree, 100*float64(upstreamAgree)/float64(upstreamComparable))
	for _, f := range failures {
		t.Error(f)
	}
}

// FuzzPrecedence checks parley's id against the model of upstream's order
// on any input: the same class, and the same code and offset wherever the
// model names them.
func FuzzPrecedence(f *testing.F) {
	seedCorpus(f)
	r := rand.New(rand.NewPCG(16, 1))
	for range 200 {
		doc, _ := multiFaultDoc(r, 1+r.IntN(4))
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want := model(data, modelOpts{limits: true, id: true})
		_, err := canon.ID(data)
		if got := outcome(err); !agrees(got, want) {
			t.Fatalf("%q\nparley %s\nmodel  %s", clip(data), describe(got), describe(want))
		}
	})
}
