package canon_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/parley-engine/parley/canon"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/vectors/multifault.json from its generator")

const multiFaultPath = "../testdata/vectors/multifault.json"

// mfFault is one fault placed in a multi-fault vector: its kind, the code
// parley gives it and where, as if it were alone.
type mfFault struct {
	Fault  string `json:"fault"`
	Code   string `json:"code"`
	Offset int    `json:"offset"`
}

type mfVector struct {
	Name         string    `json:"name"`
	Profile      string    `json:"profile"`
	Operation    string    `json:"operation"`
	Input        *string   `json:"input,omitempty"`
	InputHex     string    `json:"input_hex,omitempty"`
	Faults       []mfFault `json:"faults"`
	ParleyLimits bool      `json:"parley_limits,omitempty"`
	ErrorClass   string    `json:"error_class"`
	Code         string    `json:"code"`
	Offset       int       `json:"offset"`
	DecidedBy    string    `json:"decided_by"`
	Note         string    `json:"note,omitempty"`
}

type mfSuite struct {
	Suite   string     `json:"suite"`
	Count   int        `json:"count"`
	Vectors []mfVector `json:"vectors"`
}

// The member-level faults of the pairwise vectors, in the order of the
// vector names.
var mfMemberKinds = []string{
	"fraction", "exponent", "out-of-range", "integer-digits", "non-finite",
	"surrogate-value", "surrogate-name", "duplicate", "collision",
	"invalid-utf8", "syntax", "depth", "nonstarter-run",
}

// parleyLimitKinds are the faults of parley's own limits and rules.
var parleyLimitKinds = []string{"integer-digits", "depth", "nonstarter-run"}

// mfDoc builds one vector's input and records where its faults are.
type mfDoc struct {
	b      []byte
	faults []mfFault
	n      int
}

func (d *mfDoc) raw(s string) { d.b = append(d.b, s...) }

// at records a fault rel bytes past the current end of the input.
func (d *mfDoc) at(kind string, e *canon.Error, rel int) {
	d.faults = append(d.faults, mfFault{kind, e.Code, len(d.b) + rel})
}

func (d *mfDoc) id() int { d.n++; return d.n }

// name writes a fresh member name and its colon.
func (d *mfDoc) name() { d.raw(fmt.Sprintf(`"m%d":`, d.id())) }

// member writes the member or members that carry one fault, in an object
// at nesting level depth (the top level is 1).
func (d *mfDoc) member(kind string, depth int) {
	switch kind {
	case "fraction":
		d.name()
		d.at(kind, canon.ErrFraction, 0)
		d.raw("1.5")
	case "exponent":
		d.name()
		d.at(kind, canon.ErrExponent, 0)
		d.raw("1E+2")
	case "out-of-range":
		d.name()
		d.at(kind, canon.ErrIntegerRange, 0)
		d.raw("-9007199254740992")
	case "integer-digits":
		d.name()
		d.at(kind, canon.ErrIntegerDigits, 0)
		d.raw("12345678901234567")
	case "non-finite":
		d.name()
		d.at(kind, canon.ErrNonFinite, 0)
		d.raw("NaN")
	case "surrogate-value":
		d.name()
		d.at(kind, canon.ErrLoneSurrogate, 1)
		d.raw(`"\ud800"`)
	case "surrogate-name":
		d.at(kind, canon.ErrLoneSurrogate, 1)
		d.raw(fmt.Sprintf(`"\udc00%d":0`, d.id()))
	case "duplicate":
		n := d.id()
		d.raw(fmt.Sprintf(`"d%d":0,`, n))
		d.at(kind, canon.ErrDuplicateName, 0)
		d.raw(fmt.Sprintf(`"d%d":1`, n))
	case "collision":
		n := d.id()
		d.raw(fmt.Sprintf("\"\u00e9%d\":0,", n))
		d.at(kind, canon.ErrNFCCollision, 0)
		d.raw(fmt.Sprintf("\"e\u0301%d\":1", n))
	case "invalid-utf8":
		d.name()
		d.at(kind, canon.ErrInvalidUTF8, 1)
		d.raw("\"\xff\"")
	case "syntax":
		d.name()
		d.at(kind, canon.ErrSyntax, 0)
		d.raw("+1")
	case "depth":
		// 70 levels of arrays; the one that opens level 65 is refused.
		d.name()
		d.at(kind, canon.ErrDepth, canon.DefaultMaxDepth-depth)
		d.raw(strings.Repeat("[", 70) + strings.Repeat("]", 70))
	case "nonstarter-run":
		d.name()
		d.at(kind, canon.ErrNonstarterRun, 0)
		d.raw("\"a" + strings.Repeat("\u0301", 31) + "\"")
	default:
		panic("unknown fault " + kind)
	}
}

func (d *mfDoc) object(depth int, kinds ...string) {
	d.raw("{")
	for i, k := range kinds {
		if i > 0 {
			d.raw(",")
		}
		d.member(k, depth)
	}
	d.raw("}")
}

// multiFaultVectors generates the vectors: every ordered pair of member
// faults in one object; each document-level fault with each member fault;
// each name fault of an enclosing object with each fault of an object
// nested in it; and a few documents with more faults.
func multiFaultVectors(tb testing.TB) []mfVector {
	tb.Helper()
	var vs []mfVector
	add := func(name, note string, d *mfDoc) {
		vs = append(vs, decideVector(tb, name, note, d))
	}
	for _, p := range mfMemberKinds {
		for _, q := range mfMemberKinds {
			d := &mfDoc{}
			d.object(1, p, q)
			add("pair-"+p+"-then-"+q, "", d)
		}
	}
	for _, f := range mfMemberKinds {
		d := &mfDoc{}
		d.at("bom", canon.ErrBOM, 0)
		d.raw("\uFEFF")
		d.object(1, f)
		add("bom-and-"+f, "", d)

		d = &mfDoc{}
		d.at("top-level", canon.ErrTopLevel, 0)
		d.raw("[")
		d.object(2, f)
		d.raw("]")
		add("top-level-array-and-"+f, "", d)

		d = &mfDoc{}
		d.object(1, f)
		d.raw(" ")
		d.at("trailing-data", canon.ErrTrailingData, 0)
		d.raw("x")
		add(f+"-then-trailing-data", "", d)

		d = &mfDoc{}
		d.object(1, f)
		d.b = d.b[:len(d.b)-1] // the closing brace
		d.faults = append(d.faults, mfFault{"truncated", canon.ErrUnexpectedEnd.Code, len(d.b)})
		add(f+"-then-truncated", "", d)
	}
	for _, outer := range []string{"duplicate", "collision", "surrogate-name"} {
		for _, f := range mfMemberKinds {
			d := &mfDoc{}
			d.raw("{")
			switch outer {
			case "duplicate":
				d.raw(`"d0":0,`)
				d.at(outer, canon.ErrDuplicateName, 0)
				d.raw(`"d0":`)
			case "collision":
				d.raw("\"\u00e90\":0,")
				d.at(outer, canon.ErrNFCCollision, 0)
				d.raw("\"e\u03010\":")
			case "surrogate-name":
				d.at(outer, canon.ErrLoneSurrogate, 1)
				d.raw(`"\udc000":`)
			}
			d.object(2, f)
			d.raw("}")
			add("outer-"+outer+"-inner-"+f, "the inner object closes before the outer one", d)
		}
	}

	// The two examples of the issue that fixed this order, and a few
	// documents with more faults.
	d := &mfDoc{}
	d.raw(`{"a":`)
	d.at("surrogate-value", canon.ErrLoneSurrogate, 1)
	d.raw(`"\ud800",`)
	d.at("duplicate", canon.ErrDuplicateName, 0)
	d.raw(`"a":2}`)
	add("example-duplicate-and-surrogate-value", "the duplicate is found when the object closes, the surrogate in a value only after the whole input is parsed", d)

	d = &mfDoc{}
	d.raw(`{"f":`)
	d.at("surrogate-value", canon.ErrLoneSurrogate, 1)
	d.raw(`"\ud800",`)
	d.at("duplicate", canon.ErrDuplicateName, 0)
	d.raw(`"f":`)
	d.at("out-of-range", canon.ErrIntegerRange, 0)
	d.raw(`-9007199254740992,"f":`)
	d.at("fraction", canon.ErrFraction, 0)
	d.raw(`1.5,"f":"`)
	d.at("invalid-utf8", canon.ErrInvalidUTF8, 0)
	d.raw("\xc3\x28\"}")
	add("example-four-faults-and-invalid-utf8", "the whole input is decoded as UTF-8 before it is parsed", d)

	d = &mfDoc{}
	d.raw(`{"a":`)
	d.at("fraction", canon.ErrFraction, 0)
	d.at("broken-exponent", canon.ErrInvalidNumber, 4)
	d.raw(`1.5e}`)
	add("fraction-with-broken-exponent", "the parser reads the longest number it can, 1.5, and refuses it before it reaches the e", d)

	d = &mfDoc{}
	d.raw(`{"a":`)
	d.at("out-of-range", canon.ErrIntegerRange, 0)
	d.at("broken-fraction", canon.ErrInvalidNumber, 17)
	d.raw(`9007199254740992.}`)
	add("out-of-range-with-broken-fraction", "the integer is judged before the dot", d)

	d = &mfDoc{}
	d.at("bom", canon.ErrBOM, 0)
	d.raw("\uFEFF")
	d.object(1, "syntax", "duplicate")
	d.raw("\xed\xa0\x80")
	d.faults = append(d.faults, mfFault{"invalid-utf8", canon.ErrInvalidUTF8.Code, len(d.b) - 3})
	add("bom-syntax-duplicate-invalid-utf8", "invalid UTF-8 anywhere comes first, even after the value", d)

	d = &mfDoc{}
	d.raw("[")
	d.at("top-level", canon.ErrTopLevel, -1)
	d.object(2, "nonstarter-run", "surrogate-value", "duplicate")
	d.raw("]")
	add("top-level-nonstarter-surrogate-duplicate", "", d)

	d = &mfDoc{}
	d.raw("[")
	d.at("top-level", canon.ErrTopLevel, -1)
	d.object(2, "surrogate-value", "nonstarter-run")
	d.raw("]")
	add("top-level-surrogate-then-nonstarter", "faults found after parsing are reported in document order, the top level last", d)

	d = &mfDoc{}
	d.object(1, "surrogate-name", "duplicate", "collision")
	add("surrogate-name-duplicate-collision", "member by member: the surrogate in the first name", d)

	d = &mfDoc{}
	d.object(1, "collision", "duplicate", "surrogate-name")
	add("collision-duplicate-surrogate-name", "member by member: the collision comes first", d)
	return vs
}

// decideVector asks the model which fault decides d and writes the vector.
func decideVector(tb testing.TB, name, note string, d *mfDoc) mfVector {
	tb.Helper()
	v := mfVector{Name: name, Profile: "amd", Operation: "id", Note: note}
	if utf8.Valid(d.b) {
		s := string(d.b)
		v.Input = &s
	} else {
		v.InputHex = hex.EncodeToString(d.b)
	}
	v.Faults = slices.Clone(d.faults)
	slices.SortStableFunc(v.Faults, func(a, b mfFault) int { return a.Offset - b.Offset })
	for _, f := range v.Faults {
		if slices.Contains(parleyLimitKinds, f.Fault) {
			v.ParleyLimits = true
		}
	}
	want := model(d.b, modelOpts{limits: true, id: true})
	if want.ok || want.crash {
		tb.Fatalf("%s: the model accepts %q", name, d.b)
	}
	var by *mfFault
	for i := range v.Faults {
		f := &v.Faults[i]
		if isSyntax(want.code) && isSyntax(f.Code) || f.Code == want.code && f.Offset == want.offset {
			by = f
			break
		}
	}
	if by == nil {
		tb.Fatalf("%s: the model decides %s, which is none of %v: %q", name, describe(want), v.Faults, d.b)
	}
	v.ErrorClass, v.Code, v.Offset, v.DecidedBy = string(want.class), by.Code, by.Offset, by.Fault
	return v
}

func (v mfVector) input(tb testing.TB) []byte {
	if v.Input != nil {
		return []byte(*v.Input)
	}
	b, err := hex.DecodeString(v.InputHex)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// The published multi-fault vectors are what their generator and the model
// say, and parley reports exactly their class, code and offset.
func TestMultiFaultVectors(t *testing.T) {
	vs := multiFaultVectors(t)
	// One vector a line.
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\"suite\":\"parley-multifault-v1\",\"count\":%d,\"vectors\":[\n", len(vs))
	for i, v := range vs {
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		if i < len(vs)-1 {
			b.Truncate(b.Len() - 1)
			b.WriteString(",\n")
		}
	}
	b.WriteString("]}\n")
	if *rewrite {
		if err := os.WriteFile(multiFaultPath, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := readFile(t, multiFaultPath)
	if !bytes.Equal(file, b.Bytes()) {
		t.Fatalf("%s is out of date with its generator; run go test ./canon -run MultiFault -rewrite", multiFaultPath)
	}
	var suite mfSuite
	if err := json.Unmarshal(file, &suite); err != nil {
		t.Fatal(err)
	}
	if suite.Count != len(suite.Vectors) || suite.Count < 100 {
		t.Fatalf("count %d, %d vectors", suite.Count, len(suite.Vectors))
	}
	classes := map[string]int{}
	for _, v := range suite.Vectors {
		classes[v.ErrorClass]++
		t.Run(v.Name, func(t *testing.T) {
			if len(v.Faults) < 2 {
				t.Errorf("%d faults", len(v.Faults))
			}
			_, err := canon.ID(v.input(t))
			var ce *canon.Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v", err)
			}
			if string(ce.Class) != v.ErrorClass || ce.Code != v.Code || int(ce.Offset) != v.Offset {
				t.Errorf("got %s %s at %d, want %s %s at %d (%s)", ce.Class, ce.Code, ce.Offset, v.ErrorClass, v.Code, v.Offset, v.DecidedBy)
			}
		})
	}
	t.Logf("%d vectors: %v", len(suite.Vectors), classes)
}
