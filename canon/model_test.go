package canon_test

import (
	"bytes"
	"encoding/binary"
	"math/big"
	"regexp"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/parley-engine/parley/canon"
)

// This file is a model of the order in which the upstream reference
// verifier of the restricted profile finds faults, written from its
// description rather than from parley's parser, to hold parley's order to
// it (docs/ERRORS.md, "Precedence"):
//
//  1. the whole input is decoded as UTF-8 (invalid UTF-8 anywhere), then a
//     byte-order mark is refused;
//  2. the value is parsed in document order: syntax errors, numbers
//     outside the domain as the parser meets them, and each object's
//     member names when it closes (inner objects first), member by member:
//     a duplicate of an earlier name, a surrogate in the name, an NFC
//     collision with an earlier name; then data after the value;
//  3. the parsed value is walked in document order for unpaired surrogates
//     in string values; then a top level that is not an object (ids only).
//
// With limits set, parley's own rules join in where docs/ERRORS.md ranks
// them: the size limit before everything, the depth limit and the integer
// digit limit where the parser meets them, and runs of more than 30
// non-starters with the unpaired surrogates of step 3 (such a member name
// takes part in duplicate checks by its decoded form and in no NFC
// collision). Without limits the model is upstream alone.
//
// The parser is deliberately naive: recursive, building a tree, stopping
// at the first fault with a panic.

// verdict is the model's answer for one document: accepted, or the fault
// that decides its class.
type verdict struct {
	ok     bool
	class  canon.Class
	code   string // parley's code, or codeSyntax for a syntax error
	offset int    // -1 when the model does not say (syntax errors)
	crash  bool   // upstream would not answer (a Python integer over 4300 digits)
}

// codeSyntax stands for any of parley's json.* syntax codes: the model
// knows a syntax error is there, not which of parley's finer codes and
// offsets describe it.
const codeSyntax = "json.*"

type modelOpts struct {
	limits bool // parley's own limits and rules
	id     bool // the id operation: the top level must be an object
}

type mstr struct {
	runes   []rune // lone surrogates kept as their code points
	off     int    // offset of the opening quote
	loneOff int    // offset of the first unpaired surrogate, or -1
}

type mval struct {
	kind  byte // '{' '[' '"' or 's' for any other scalar
	str   mstr
	names []mstr
	vals  []*mval
}

type mstop struct{ v verdict }

type mparser struct {
	b    []byte
	i    int
	opts modelOpts
}

func fault(class canon.Class, code string, off int) verdict {
	return verdict{class: class, code: code, offset: off}
}

func (p *mparser) stop(v verdict) { panic(mstop{v}) }

func (p *mparser) syntax() {
	// At the end of the input parley always says unexpected end; elsewhere
	// the model leaves the finer code open.
	if p.i >= len(p.b) {
		p.stop(fault(canon.MalformedInput, canon.ErrUnexpectedEnd.Code, len(p.b)))
	}
	p.stop(fault(canon.MalformedInput, codeSyntax, -1))
}

// model returns what the model decides for doc.
func model(doc []byte, opts modelOpts) (v verdict) {
	if opts.limits && len(doc) > canon.DefaultMaxSize {
		return fault(canon.UnsupportedValue, canon.ErrSize.Code, canon.DefaultMaxSize)
	}
	for i := 0; i < len(doc); {
		r, n := utf8.DecodeRune(doc[i:])
		if r == utf8.RuneError && n == 1 {
			return fault(canon.MalformedInput, canon.ErrInvalidUTF8.Code, i)
		}
		i += n
	}
	if bytes.HasPrefix(doc, []byte("\uFEFF")) {
		return fault(canon.MalformedInput, canon.ErrBOM.Code, 0)
	}
	if len(doc) == 0 {
		return fault(canon.MalformedInput, canon.ErrEmpty.Code, 0)
	}
	defer func() {
		if r := recover(); r != nil {
			s, ok := r.(mstop)
			if !ok {
				panic(r)
			}
			v = s.v
		}
	}()
	p := &mparser{b: doc, opts: opts}
	p.ws()
	top := p.i
	if p.i >= len(doc) {
		p.syntax()
	}
	tree := p.value(0)
	p.ws()
	if p.i != len(doc) {
		p.stop(fault(canon.MalformedInput, canon.ErrTrailingData.Code, p.i))
	}
	p.walk(tree)
	if opts.id && tree.kind != '{' {
		p.stop(fault(canon.UnsupportedValue, canon.ErrTopLevel.Code, top))
	}
	return verdict{ok: true, offset: -1}
}

func (p *mparser) ws() {
	for p.i < len(p.b) && strings.IndexByte(" \t\n\r", p.b[p.i]) >= 0 {
		p.i++
	}
}

func (p *mparser) value(depth int) *mval {
	if p.i >= len(p.b) {
		p.syntax()
	}
	rest := p.b[p.i:]
	switch {
	case rest[0] == '"':
		return &mval{kind: '"', str: p.str()}
	case rest[0] == '{':
		return p.object(depth + 1)
	case rest[0] == '[':
		return p.array(depth + 1)
	case bytes.HasPrefix(rest, []byte("null")):
		p.i += 4
	case bytes.HasPrefix(rest, []byte("true")):
		p.i += 4
	case bytes.HasPrefix(rest, []byte("false")):
		p.i += 5
	case bytes.HasPrefix(rest, []byte("NaN")), bytes.HasPrefix(rest, []byte("Infinity")), bytes.HasPrefix(rest, []byte("-Infinity")):
		p.stop(fault(canon.UnsupportedValue, canon.ErrNonFinite.Code, p.i))
	default:
		p.number()
	}
	return &mval{kind: 's'}
}

// numberRE is the JSON number grammar, matched greedily: an optional part
// that is not complete ("1.", "1e") is left for the next token.
var numberRE = regexp.MustCompile(`^-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?`)

func (p *mparser) number() {
	m := numberRE.FindSubmatchIndex(p.b[p.i:])
	if m == nil {
		p.syntax()
	}
	start := p.i
	tok := string(p.b[p.i : p.i+m[1]])
	p.i += m[1]
	switch {
	case m[2] >= 0:
		p.stop(fault(canon.UnsupportedValue, canon.ErrFraction.Code, start))
	case m[4] >= 0:
		p.stop(fault(canon.UnsupportedValue, canon.ErrExponent.Code, start))
	}
	digits := strings.TrimPrefix(tok, "-")
	if p.opts.limits && len(digits) > canon.DefaultMaxIntegerDigits {
		p.stop(fault(canon.UnsupportedValue, canon.ErrIntegerDigits.Code, start))
	}
	if len(digits) > 4300 {
		p.stop(verdict{crash: true, offset: -1})
	}
	n, _ := new(big.Int).SetString(tok, 10)
	if n.CmpAbs(big.NewInt(1<<53-1)) > 0 {
		p.stop(fault(canon.UnsupportedValue, canon.ErrIntegerRange.Code, start))
	}
}

func (p *mparser) hex4(at int) rune {
	var r rune
	for k := at; k < at+4; k++ {
		if k >= len(p.b) {
			p.i = len(p.b)
			p.syntax()
		}
		switch c := p.b[k]; {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			p.stop(fault(canon.MalformedInput, canon.ErrInvalidEscape.Code, at-2))
		}
	}
	return r
}

func (p *mparser) str() mstr {
	s := mstr{off: p.i, loneOff: -1}
	lone := func(off int) {
		if s.loneOff < 0 {
			s.loneOff = off
		}
	}
	p.i++
	for {
		if p.i >= len(p.b) {
			p.syntax()
		}
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return s
		case c < 0x20:
			p.stop(fault(canon.MalformedInput, canon.ErrControlChar.Code, p.i))
		case c == '\\':
			esc := p.i
			if p.i+1 >= len(p.b) {
				p.i = len(p.b)
				p.syntax()
			}
			if k := strings.IndexByte(`"\/bfnrt`, p.b[p.i+1]); k >= 0 {
				s.runes = append(s.runes, rune("\"\\/\b\f\n\r\t"[k]))
				p.i += 2
				continue
			}
			if p.b[p.i+1] != 'u' {
				p.stop(fault(canon.MalformedInput, canon.ErrInvalidEscape.Code, esc))
			}
			r := p.hex4(p.i + 2)
			p.i += 6
			switch {
			case r >= 0xD800 && r <= 0xDBFF && bytes.HasPrefix(p.b[p.i:], []byte(`\u`)):
				if lo := p.hex4(p.i + 2); lo >= 0xDC00 && lo <= 0xDFFF {
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					p.i += 6
				} else {
					lone(p.i) // the escape that should have been the low half
				}
			case r >= 0xD800 && r <= 0xDFFF:
				lone(esc)
			}
			s.runes = append(s.runes, r)
		default:
			r, n := utf8.DecodeRune(p.b[p.i:])
			s.runes = append(s.runes, r)
			p.i += n
		}
	}
}

func (p *mparser) depth(d int) {
	if p.opts.limits && d > canon.DefaultMaxDepth {
		p.stop(fault(canon.UnsupportedValue, canon.ErrDepth.Code, p.i))
	}
}

func (p *mparser) array(d int) *mval {
	p.depth(d)
	v := &mval{kind: '['}
	p.i++
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return v
	}
	for {
		v.vals = append(v.vals, p.value(d))
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return v
		}
		if p.i >= len(p.b) || p.b[p.i] != ',' {
			p.syntax()
		}
		p.i++
		p.ws()
	}
}

func (p *mparser) object(d int) *mval {
	p.depth(d)
	v := &mval{kind: '{'}
	p.i++
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return v
	}
	for {
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			p.syntax()
		}
		name := p.str()
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			p.syntax()
		}
		p.i++
		p.ws()
		v.names = append(v.names, name)
		v.vals = append(v.vals, p.value(d))
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			break
		}
		if p.i >= len(p.b) || p.b[p.i] != ',' {
			p.syntax()
		}
		p.i++
		p.ws()
	}
	// The object has closed: its names, member by member.
	raw, normalized := map[string]bool{}, map[string]bool{}
	for _, name := range v.names {
		key := runeKey(name.runes)
		if raw[key] {
			p.stop(fault(canon.MalformedInput, canon.ErrDuplicateName.Code, name.off))
		}
		raw[key] = true
		if name.loneOff >= 0 {
			p.stop(fault(canon.UnsupportedValue, canon.ErrLoneSurrogate.Code, name.loneOff))
		}
		nfc := "n" + norm.NFC.String(string(name.runes))
		if p.nonstarterRun(name) {
			nfc = "r" + key
		}
		if normalized[nfc] {
			p.stop(fault(canon.NormalizationCollision, canon.ErrNFCCollision.Code, name.off))
		}
		normalized[nfc] = true
	}
	return v
}

// runeKey encodes runes injectively, lone surrogates included.
func runeKey(rs []rune) string {
	b := make([]byte, 0, 4*len(rs))
	for _, r := range rs {
		b = binary.BigEndian.AppendUint32(b, uint32(r))
	}
	return string(b)
}

// nonstarterRun is parley's rule: x/text had to insert U+034F to keep a
// run of non-starters stream-safe, so NFC implementations differ on it.
func (p *mparser) nonstarterRun(s mstr) bool {
	if !p.opts.limits || s.loneOff >= 0 {
		return false
	}
	t := string(s.runes)
	return strings.Count(norm.NFC.String(t), "\u034f") != strings.Count(t, "\u034f")
}

// walk is step 3: string values in document order.
func (p *mparser) walk(v *mval) {
	switch v.kind {
	case '"':
		if v.str.loneOff >= 0 {
			p.stop(fault(canon.UnsupportedValue, canon.ErrLoneSurrogate.Code, v.str.loneOff))
		}
		if p.nonstarterRun(v.str) {
			p.stop(fault(canon.UnsupportedValue, canon.ErrNonstarterRun.Code, v.str.off))
		}
	case '[':
		for _, e := range v.vals {
			p.walk(e)
		}
	case '{':
		for k, e := range v.vals {
			if p.nonstarterRun(v.names[k]) {
				p.stop(fault(canon.UnsupportedValue, canon.ErrNonstarterRun.Code, v.names[k].off))
			}
			p.walk(e)
		}
	}
}
