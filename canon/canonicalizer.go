package canon

import (
	"bytes"
	"hash"
	"slices"
	"strconv"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Canonicalizer parses and serializes in one pass over a byte slice. It keeps
// its buffers between calls, so a long-lived Canonicalizer does not allocate
// per document once they have grown. It is not safe for concurrent use; the
// package-level functions draw Canonicalizers from a pool.
type Canonicalizer struct {
	profile Profile
	cfg     config
	cmp     func(a, b []byte) int

	src     []byte
	out     []byte
	members []member
	keys    []byte // names whose output form differs from their value
	str     []byte // decoded string
	nfc     []byte // NFC of str
	tmp     []byte // scratch for reordering members

	// Span in out of the top-level artifact_id member, or idStart < 0,
	// and where its name stood in the input.
	idStart, idEnd int
	idSrcOff       int
	topObject      bool
	topOff         int // where the top-level value starts

	// The first fault that ranks after parsing (docs/ERRORS.md,
	// "Precedence"): an unpaired surrogate in a string value or a string
	// NFC implementations disagree on. surName is set once a member name
	// with an unpaired surrogate has been read; its object reports it when
	// it closes.
	deferred *Error
	surName  bool

	// The top-level members, when the fast path took the last input
	// (fast.go).
	top      []Member
	fastTook bool

	h       hash.Hash
	sum     []byte
	it      norm.Iter
	nfcMemo *nfcMemo
	bmp     stableTable // bmpStable(), once used
}

type member struct {
	key    span   // normalized, unescaped name
	pre    span   // name before NFC when NFC changed it; pre.n < 0 otherwise
	start  int    // member span in out, from the name's opening quote
	end    int    // to the end of the value
	srcOff int    // offset of the name in the input
	sur    *Error // an unpaired surrogate in the name, for when the object closes
}

// span addresses bytes in out (inKeys=false) or in keys (inKeys=true). Spans
// are offsets, not slices, because both buffers grow while parsing.
type span struct {
	off, n int
	inKeys bool
}

// New returns a Canonicalizer for the profile. A zero Profile means AMD.
func New(p Profile, opts ...Option) *Canonicalizer {
	if p != JCS {
		p = AMD
	}
	c := &Canonicalizer{profile: p, cfg: defaultConfig()}
	for _, o := range opts {
		o(&c.cfg)
	}
	if p == JCS {
		c.cmp = compareUTF16
	} else {
		c.cmp = compareUTF8
	}
	return c
}

// Profile returns the profile the Canonicalizer implements.
func (c *Canonicalizer) Profile() Profile { return c.profile }

// Append appends the canonical form of src to dst. On error dst is returned
// unchanged and the error is a *Error.
func (c *Canonicalizer) Append(dst, src []byte) ([]byte, error) {
	if err := c.run(src); err != nil {
		return dst, err
	}
	return append(dst, c.out...), nil
}

// Canonicalize returns the canonical form of src in a new slice.
func (c *Canonicalizer) Canonicalize(src []byte) ([]byte, error) {
	return c.Append(nil, src)
}

func (c *Canonicalizer) keyBytes(s span) []byte {
	if s.inKeys {
		return c.keys[s.off : s.off+s.n]
	}
	return c.out[s.off : s.off+s.n]
}

// run canonicalizes src into c.out.
func (c *Canonicalizer) run(src []byte) error {
	c.src = src
	c.out = c.out[:0]
	c.members = c.members[:0]
	c.keys = c.keys[:0]
	c.idStart, c.idEnd = -1, -1
	c.topObject = false
	c.deferred, c.surName = nil, false
	c.fastTook = false
	defer func() { c.src = nil }()
	if len(src) > c.cfg.maxSize {
		return at(ErrSize, c.cfg.maxSize, "limit "+strconv.Itoa(c.cfg.maxSize)+" bytes")
	}
	if len(src) == 0 {
		return at(ErrEmpty, 0, "")
	}
	if len(src) >= 3 && src[0] == 0xEF && src[1] == 0xBB && src[2] == 0xBF {
		return c.utf8First(at(ErrBOM, 0, ""))
	}
	i := c.ws(0)
	if i == len(src) {
		return at(ErrUnexpectedEnd, i, "no value")
	}
	c.topObject, c.topOff = src[i] == '{', i
	i, err := c.value(i, 0)
	if err != nil {
		return c.utf8First(err)
	}
	i = c.ws(i)
	if i != len(src) {
		return c.utf8First(at(ErrTrailingData, i, ""))
	}
	if c.deferred != nil {
		return c.deferred
	}
	return nil
}

// utf8First returns the error for invalid UTF-8 in the input if there is
// any, and err otherwise: the whole input is decoded before it is parsed
// (docs/ERRORS.md, "Precedence"). The parser validates what it reads, so
// only the part from err's offset on, which it has not read, is scanned;
// this is the one place a rejected input may be read twice.
func (c *Canonicalizer) utf8First(err error) error {
	e := err.(*Error)
	if e.Code == ErrInvalidUTF8.Code {
		return e
	}
	from := max(int(e.Offset), 0)
	if from >= len(c.src) || utf8.Valid(c.src[from:]) {
		return e
	}
	for i := from; i < len(c.src); {
		r, n := utf8.DecodeRune(c.src[i:])
		if r == utf8.RuneError && n <= 1 {
			return at(ErrInvalidUTF8, i, "")
		}
		i += n
	}
	return e
}

func (c *Canonicalizer) ws(i int) int {
	for i < len(c.src) {
		switch c.src[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func (c *Canonicalizer) value(i, depth int) (int, error) {
	src := c.src
	switch b := src[i]; b {
	case '{':
		return c.object(i, depth+1)
	case '[':
		return c.array(i, depth+1)
	case '"':
		next, _, err := c.string(i, false)
		return next, err
	case 't':
		return c.literal(i, "true")
	case 'f':
		return c.literal(i, "false")
	case 'n':
		return c.literal(i, "null")
	case 'N':
		return c.nonFinite(i, "NaN")
	case 'I':
		return c.nonFinite(i, "Infinity")
	default:
		if b == '-' && i+1 < len(src) && src[i+1] == 'I' {
			return c.nonFinite(i, "-Infinity")
		}
		if b == '-' || (b >= '0' && b <= '9') {
			return c.number(i)
		}
		if b >= utf8.RuneSelf {
			if r, n := utf8.DecodeRune(src[i:]); r == utf8.RuneError && n <= 1 {
				return i, at(ErrInvalidUTF8, i, "")
			}
		}
		return i, at(ErrSyntax, i, "unexpected "+quoteByte(b))
	}
}

func quoteByte(b byte) string {
	if b >= 0x20 && b < 0x7F {
		return strconv.QuoteRune(rune(b))
	}
	return "byte 0x" + strconv.FormatUint(uint64(b), 16)
}

func (c *Canonicalizer) literal(i int, lit string) (int, error) {
	src := c.src
	for k := 0; k < len(lit); k++ {
		if i+k >= len(src) {
			return i + k, at(ErrUnexpectedEnd, i+k, "in literal "+lit)
		}
		if src[i+k] != lit[k] {
			return i + k, at(ErrSyntax, i+k, "invalid literal")
		}
	}
	c.out = append(c.out, lit...)
	return i + len(lit), nil
}

// nonFinite classifies the NaN and Infinity tokens some encoders emit as an
// unsupported value (the upstream class) rather than as garbage.
func (c *Canonicalizer) nonFinite(i int, tok string) (int, error) {
	if bytes.HasPrefix(c.src[i:], []byte(tok)) {
		return i, at(ErrNonFinite, i, tok)
	}
	return i, at(ErrSyntax, i, "unexpected "+quoteByte(c.src[i]))
}

func (c *Canonicalizer) number(i int) (int, error) {
	t, e := scanNumber(c.src, i)
	if c.profile == AMD {
		// The upstream parser takes the longest number it can read ("1"
		// of "1.", "1e" and "01", "1.5" of "1.5e") and judges it before
		// it looks at what follows.
		if t.hasFrac && t.fracEnd > t.fracStart {
			return i, at(ErrFraction, i, "")
		}
		if t.hasExp && e == nil {
			return i, at(ErrExponent, i, "")
		}
		if t.intEnd <= t.intStart {
			return i, e // no digits at all
		}
		digits := c.src[t.intStart:t.intEnd]
		if len(digits) > c.cfg.maxIntDigits {
			return i, at(ErrIntegerDigits, i, strconv.Itoa(len(digits))+" digits, limit "+strconv.Itoa(c.cfg.maxIntDigits))
		}
		var v uint64
		for _, d := range digits {
			v = v*10 + uint64(d-'0')
		}
		if v > maxSafe {
			return i, at(ErrIntegerRange, i, "")
		}
		if e != nil {
			return i, e
		}
		if v == 0 {
			c.out = append(c.out, '0') // -0 is written 0
		} else {
			c.out = append(c.out, c.src[i:t.end]...)
		}
		return t.end, nil
	}
	if e != nil {
		return i, e
	}
	v, nonInt, ok := integerValue(c.src, t)
	if !ok {
		if nonInt {
			return i, at(ErrNonInteger, i, "")
		}
		return i, at(ErrIntegerRange, i, "")
	}
	if t.neg && v != 0 {
		c.out = append(c.out, '-')
	}
	c.out = strconv.AppendUint(c.out, v, 10)
	return t.end, nil
}

func (c *Canonicalizer) array(i, depth int) (int, error) {
	if depth > c.cfg.maxDepth {
		return i, at(ErrDepth, i, "limit "+strconv.Itoa(c.cfg.maxDepth))
	}
	src := c.src
	c.out = append(c.out, '[')
	i = c.ws(i + 1)
	if i < len(src) && src[i] == ']' {
		c.out = append(c.out, ']')
		return i + 1, nil
	}
	for {
		if i >= len(src) {
			return i, at(ErrUnexpectedEnd, i, "in array")
		}
		var err error
		if i, err = c.value(i, depth); err != nil {
			return i, err
		}
		i = c.ws(i)
		if i >= len(src) {
			return i, at(ErrUnexpectedEnd, i, "in array")
		}
		switch src[i] {
		case ',':
			c.out = append(c.out, ',')
			i = c.ws(i + 1)
		case ']':
			c.out = append(c.out, ']')
			return i + 1, nil
		default:
			return i, at(ErrSyntax, i, "expected ',' or ']'")
		}
	}
}

func (c *Canonicalizer) object(i, depth int) (int, error) {
	if depth > c.cfg.maxDepth {
		return i, at(ErrDepth, i, "limit "+strconv.Itoa(c.cfg.maxDepth))
	}
	src := c.src
	objStart := len(c.out)
	c.out = append(c.out, '{')
	i = c.ws(i + 1)
	if i < len(src) && src[i] == '}' {
		c.out = append(c.out, '}')
		return i + 1, nil
	}
	base := len(c.members)
	for {
		if i >= len(src) {
			return i, at(ErrUnexpectedEnd, i, "in object")
		}
		if src[i] != '"' {
			return i, at(ErrSyntax, i, "expected a member name")
		}
		start := len(c.out)
		next, m, err := c.string(i, true)
		if err != nil {
			return next, err
		}
		m.start, m.srcOff = start, i
		i = c.ws(next)
		if i >= len(src) {
			return i, at(ErrUnexpectedEnd, i, "in object")
		}
		if src[i] != ':' {
			return i, at(ErrSyntax, i, "expected ':'")
		}
		c.out = append(c.out, ':')
		i = c.ws(i + 1)
		if i >= len(src) {
			return i, at(ErrUnexpectedEnd, i, "in object")
		}
		if i, err = c.value(i, depth); err != nil {
			return i, err
		}
		m.end = len(c.out)
		c.members = append(c.members, m)
		i = c.ws(i)
		if i >= len(src) {
			return i, at(ErrUnexpectedEnd, i, "in object")
		}
		if src[i] == ',' {
			c.out = append(c.out, ',')
			i = c.ws(i + 1)
			continue
		}
		if src[i] == '}' {
			i++
			break
		}
		return i, at(ErrSyntax, i, "expected ',' or '}'")
	}
	c.out = append(c.out, '}')
	err := c.finishObject(objStart, base, depth == 1)
	c.members = c.members[:base]
	return i, err
}

// finishObject puts the members of the object that starts at out[objStart]
// in canonical order and rejects duplicate (and, for AMD, NFC-colliding)
// names. Members are moved as opaque byte spans: nested objects were
// finished before.
//
// The names are judged member by member in input order, as upstream judges
// them: the first member that repeats an earlier name (a duplicate, or an
// NFC collision when the spellings differ) or holds an unpaired surrogate
// is reported.
func (c *Canonicalizer) finishObject(objStart, base int, top bool) error {
	ms := c.members[base:]
	if c.surName {
		for k := range ms {
			if ms[k].sur != nil {
				// Only the members before it can be reported before
				// it; their names are all valid UTF-8.
				if err := c.sortedDuplicate(ms[:k]); err != nil {
					return err
				}
				return ms[k].sur
			}
		}
	}
	sorted := true
	for k := 1; k < len(ms); k++ {
		if c.cmp(c.keyBytes(ms[k-1].key), c.keyBytes(ms[k].key)) >= 0 {
			sorted = false
			break
		}
	}
	if !sorted {
		if err := c.sortedDuplicate(ms); err != nil {
			return err
		}
		if objStart == 0 {
			// The whole output is this object: write it in order into
			// tmp and swap the buffers, one copy instead of two.
			t := append(c.tmp[:0], '{')
			for k := range ms {
				if k > 0 {
					t = append(t, ',')
				}
				m := &ms[k]
				w := len(t)
				t = append(t, c.out[m.start:m.end]...)
				if !m.key.inKeys {
					m.key.off += w - m.start
				}
				m.start, m.end = w, len(t)
			}
			c.out, c.tmp = append(t, '}'), c.out
		} else {
			// Rewrite the member area in sorted order.
			areaStart, areaEnd := objStart+1, len(c.out)-1
			c.tmp = append(c.tmp[:0], c.out[areaStart:areaEnd]...)
			w := areaStart
			for k := range ms {
				if k > 0 {
					c.out[w] = ','
					w++
				}
				m := &ms[k]
				n := copy(c.out[w:], c.tmp[m.start-areaStart:m.end-areaStart])
				// Names that live in out move with their member.
				if !m.key.inKeys {
					m.key.off += w - m.start
				}
				m.start, m.end = w, w+n
				w += n
			}
		}
	}
	if top {
		for _, m := range ms {
			if string(c.keyBytes(m.key)) == "artifact_id" {
				c.idStart, c.idEnd, c.idSrcOff = m.start, m.end, m.srcOff
				break
			}
		}
	}
	return nil
}

// sortedDuplicate sorts ms by name and reports the member whose name
// repeats an earlier one and that comes first in the input, if any.
func (c *Canonicalizer) sortedDuplicate(ms []member) error {
	slices.SortStableFunc(ms, func(a, b member) int {
		return c.cmp(c.keyBytes(a.key), c.keyBytes(b.key))
	})
	// Equal neighbours are duplicates; the stable sort keeps each run of
	// equal names in input order, so the second of a run is its first
	// repetition.
	dup := -1
	for k := 1; k < len(ms); k++ {
		if bytes.Equal(c.keyBytes(ms[k-1].key), c.keyBytes(ms[k].key)) {
			if dup < 0 || max(ms[k-1].srcOff, ms[k].srcOff) < max(ms[dup-1].srcOff, ms[dup].srcOff) {
				dup = k
			}
		}
	}
	if dup > 0 {
		return c.duplicate(ms[dup-1], ms[dup])
	}
	return nil
}

func (c *Canonicalizer) duplicate(a, b member) error {
	first, second := a, b
	if first.srcOff > second.srcOff {
		first, second = second, first
	}
	if c.profile == AMD {
		pa, pb := first.key, second.key
		if first.pre.n >= 0 {
			pa = first.pre
		}
		if second.pre.n >= 0 {
			pb = second.pre
		}
		if !bytes.Equal(c.keyBytes(pa), c.keyBytes(pb)) {
			return at(ErrNFCCollision, second.srcOff, strconv.Quote(string(c.keyBytes(second.key))))
		}
	}
	return at(ErrDuplicateName, second.srcOff, strconv.Quote(string(c.keyBytes(second.key))))
}

// plain marks the bytes that stand for themselves inside a string in both
// input and canonical output: printable ASCII other than '"' and '\'.
var plain = func() (t [256]bool) {
	for b := 0x20; b < 0x80; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// string parses the string at src[i] (a '"'), appends its canonical form to
// out and, for member names, describes the name.
func (c *Canonicalizer) string(i int, isKey bool) (int, member, error) {
	src := c.src
	var m member
	m.pre.n = -1
	// Fast path: a string without escapes needs no decoding, and its input
	// spelling is its output spelling once it is known to hold no control
	// character and only valid UTF-8. The quote and the backslash are found
	// with the vectorized bytes.IndexByte.
	j := i + 1
	if q := bytes.IndexByte(src[j:], '"'); q >= 0 && bytes.IndexByte(src[j:j+q], '\\') < 0 {
		return c.plainString(i, j+q, isKey, m)
	}
	next, nonASCII, lone, err := c.decodeString(i)
	if err != nil {
		return next, m, err
	}
	s := c.str
	if lone != nil {
		// Not UTF-8 and not normalized: the document is refused, but
		// later in the order (docs/ERRORS.md, "Precedence"). A name is
		// judged when its object closes, a value after the whole input is
		// parsed. c.str holds the surrogate in the generalized UTF-8 form,
		// so that names compare as upstream compares them.
		nonASCII = false
		if isKey {
			m.sur, c.surName = lone, true
		} else if c.deferred == nil {
			c.deferred = lone
		}
	}
	if nonASCII && c.profile == AMD {
		var changed bool
		var st nfcStatus
		c.nfc, changed, st, _ = appendNFC(&c.it, c.memo(), c.stableBMP(), c.nfc[:0], s, 0, false)
		if st == nfcNonstarterRun {
			c.nonstarterRun(i)
		}
		if changed {
			if isKey {
				m.pre = span{off: len(c.keys), n: len(s), inKeys: true}
				c.keys = append(c.keys, s...)
			}
			s = c.nfc
		}
	}
	c.out = append(c.out, '"')
	contentStart := len(c.out)
	escaped := c.appendEscaped(s)
	c.out = append(c.out, '"')
	if isKey {
		if escaped {
			m.key = span{off: len(c.keys), n: len(s), inKeys: true}
			c.keys = append(c.keys, s...)
		} else {
			m.key = span{off: contentStart, n: len(s)}
		}
	}
	return next, m, nil
}

// plainString is the fast path of string: src[i] and src[end] are the
// quotes and there is no backslash between them. One scan validates the
// content; under AMD it hands over to the normalizer at the first code
// point that NFC may change, which validates and normalizes the rest
// straight into the output.
func (c *Canonicalizer) plainString(i, end int, isKey bool, m member) (int, member, error) {
	body := c.src[i+1 : end]
	var bmp *stableTable
	if c.profile == AMD {
		bmp = &c.bmp
	}
	k, bad := scanPlain(body, bmp)
	if bad {
		return i + 1 + k, m, c.badByte(i + 1 + k)
	}
	c.out = append(c.out, '"')
	contentStart := len(c.out)
	changed := false
	if k < len(body) {
		var st nfcStatus
		var at int
		c.out, changed, st, at = appendNFC(&c.it, c.memo(), c.stableBMP(), c.out, body, k, true)
		switch st {
		case nfcInvalid:
			return i + 1 + at, m, c.badByte(i + 1 + at)
		case nfcNonstarterRun:
			c.nonstarterRun(i)
		}
	}
	if changed {
		if isKey {
			m.pre = span{off: len(c.keys), n: len(body), inKeys: true}
			c.keys = append(c.keys, body...)
		}
	} else {
		c.out = append(c.out, body...)
	}
	if isKey {
		m.key = span{off: contentStart, n: len(c.out) - contentStart}
	}
	c.out = append(c.out, '"')
	return end + 1, m, nil
}

// nonstarterRun records the string at src[i] as one NFC implementations
// disagree on. It is refused after parsing, like an unpaired surrogate in
// a value; as a name it keeps its decoded form, which makes it a duplicate
// of the same spelling and of nothing else.
func (c *Canonicalizer) nonstarterRun(i int) {
	if c.deferred == nil {
		c.deferred = at(ErrNonstarterRun, i, "")
	}
}

// badByte describes the byte at src[off] that may not stand in a string.
func (c *Canonicalizer) badByte(off int) *Error {
	if b := c.src[off]; b < 0x20 {
		return at(ErrControlChar, off, "U+00"+string(hexDigits[b>>4])+string(hexDigits[b&0xF]))
	}
	return at(ErrInvalidUTF8, off, "")
}

func (c *Canonicalizer) stableBMP() stableTable {
	if c.bmp == nil {
		c.bmp = bmpStable()
	}
	return c.bmp
}

// memo returns the Canonicalizer's memo of normalized segments, made on
// first use.
func (c *Canonicalizer) memo() *nfcMemo {
	if c.nfcMemo == nil {
		c.nfcMemo = new(nfcMemo)
	}
	return c.nfcMemo
}

// appendEscaped writes s with the canonical escapes, reporting whether any
// byte needed one.
func (c *Canonicalizer) appendEscaped(s []byte) bool {
	escaped := false
	last := 0
	for k := 0; k < len(s); k++ {
		b := s[k]
		if b >= 0x20 && b != '"' && b != '\\' {
			continue
		}
		escaped = true
		c.out = append(c.out, s[last:k]...)
		switch b {
		case '"':
			c.out = append(c.out, '\\', '"')
		case '\\':
			c.out = append(c.out, '\\', '\\')
		case '\b':
			c.out = append(c.out, '\\', 'b')
		case '\f':
			c.out = append(c.out, '\\', 'f')
		case '\n':
			c.out = append(c.out, '\\', 'n')
		case '\r':
			c.out = append(c.out, '\\', 'r')
		case '\t':
			c.out = append(c.out, '\\', 't')
		default:
			c.out = append(c.out, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
		}
		last = k + 1
	}
	c.out = append(c.out, s[last:]...)
	return escaped
}

const hexDigits = "0123456789abcdef"

// decodeString decodes the string at src[i] into c.str, validating UTF-8,
// escapes and surrogate pairs. It returns the index after the closing quote
// and, for a string with an unpaired surrogate, the error that describes
// the first one: such a string is still read to its end, because a syntax
// error after it ranks first.
func (c *Canonicalizer) decodeString(i int) (next int, nonASCII bool, lone, err *Error) {
	src := c.src
	buf := c.str[:0]
	defer func() { c.str = buf }()
	j := i + 1
	for {
		run := j
		for j < len(src) && plain[src[j]] {
			j++
		}
		buf = append(buf, src[run:j]...)
		if j >= len(src) {
			return j, nonASCII, lone, at(ErrUnexpectedEnd, j, "in string")
		}
		b := src[j]
		switch {
		case b == '"':
			return j + 1, nonASCII, lone, nil
		case b == '\\':
			r, n, l, e := c.escape(j, lone == nil)
			if e != nil {
				return j, nonASCII, lone, e
			}
			if r >= utf8.RuneSelf {
				nonASCII = true
			}
			if l != nil {
				if lone == nil {
					lone = l
				}
				// Generalized UTF-8: three bytes that no valid UTF-8
				// string holds.
				buf = append(buf, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
			} else {
				buf = utf8.AppendRune(buf, r)
			}
			j += n
		case b < 0x20:
			return j, nonASCII, lone, at(ErrControlChar, j, "U+00"+string(hexDigits[b>>4])+string(hexDigits[b&0xF]))
		default: // b >= 0x80
			r, n := utf8.DecodeRune(src[j:])
			if r == utf8.RuneError && n <= 1 {
				return j, nonASCII, lone, at(ErrInvalidUTF8, j, "")
			}
			nonASCII = true
			buf = append(buf, src[j:j+n]...)
			j += n
		}
	}
}

// escape decodes the escape sequence at src[j] (a '\'), pairing
// surrogates. An unpaired surrogate is returned as itself, with lone
// describing it (or, without describe, set to ErrLoneSurrogate itself); a
// following escape is then read on its own (it may start a pair).
func (c *Canonicalizer) escape(j int, describe bool) (r rune, n int, lone, err *Error) {
	src := c.src
	if j+1 >= len(src) {
		return 0, 0, nil, at(ErrUnexpectedEnd, j+1, "in escape")
	}
	switch src[j+1] {
	case '"':
		return '"', 2, nil, nil
	case '\\':
		return '\\', 2, nil, nil
	case '/':
		return '/', 2, nil, nil
	case 'b':
		return '\b', 2, nil, nil
	case 'f':
		return '\f', 2, nil, nil
	case 'n':
		return '\n', 2, nil, nil
	case 'r':
		return '\r', 2, nil, nil
	case 't':
		return '\t', 2, nil, nil
	case 'u':
		r, err := c.hex4(j + 2)
		if err != nil {
			return 0, 0, nil, err
		}
		if r < 0xD800 || r > 0xDFFF {
			return r, 6, nil, nil
		}
		off, lo := j, rune(-1)
		if k := j + 6; r <= 0xDBFF && k+1 < len(src) && src[k] == '\\' && src[k+1] == 'u' {
			if lo, err = c.hex4(k + 2); err != nil {
				return 0, 0, nil, err
			}
			if lo >= 0xDC00 && lo <= 0xDFFF {
				return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 12, nil, nil
			}
			off = k // the escape that should have been the low half
		}
		if !describe {
			return r, 6, ErrLoneSurrogate, nil
		}
		hex := func(r rune) string { return "\\u" + strconv.FormatInt(int64(r), 16) }
		switch {
		case r >= 0xDC00:
			return r, 6, at(ErrLoneSurrogate, off, "low surrogate "+hex(r)+" without a high one"), nil
		case lo >= 0:
			return r, 6, at(ErrLoneSurrogate, off, "high surrogate "+hex(r)+" followed by "+hex(lo)), nil
		}
		return r, 6, at(ErrLoneSurrogate, off, "high surrogate "+hex(r)+" without a low one"), nil
	}
	return 0, 0, nil, at(ErrInvalidEscape, j, "")
}

func (c *Canonicalizer) hex4(k int) (rune, *Error) {
	src := c.src
	var r rune
	for n := 0; n < 4; n++ {
		if k+n >= len(src) {
			return 0, at(ErrUnexpectedEnd, k+n, "in \\u escape")
		}
		b := src[k+n]
		switch {
		case b >= '0' && b <= '9':
			r = r<<4 | rune(b-'0')
		case b >= 'a' && b <= 'f':
			r = r<<4 | rune(b-'a'+10)
		case b >= 'A' && b <= 'F':
			r = r<<4 | rune(b-'A'+10)
		default:
			return 0, at(ErrInvalidEscape, k-2, "\\u needs four hex digits")
		}
	}
	return r, nil
}
