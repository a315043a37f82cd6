package canon

import (
	"bytes"
	"encoding/binary"
	"unicode/utf8"
)

// The fast path of ID and Verify. Almost every artifact a participant
// publishes is already in canonical form, and of a plain shape: no
// whitespace, no escapes, names in order, integers only. For such an input
// the canonical form is the input itself, and checking that it is takes
// one scan with no output to write. fast recognizes exactly the inputs of
// that shape that the full parser (run) accepts unchanged; for anything
// else (whitespace, an escape, a code point NFC may change, a name out of
// order or repeated, a fraction, a limit reached, any error) it says no,
// and the full parser decides, with its errors in its order. Under the
// tests, every input is judged both ways and must agree
// (TestFast_AgreesWithFullParser, FuzzFastPath).

// fastOff disables the fast path (tests compare both ways).
var fastOff bool

// Member is where one member of the top-level object stands in the
// canonical bytes: its name, without the quotes, is [NameStart, NameEnd),
// its value [ValueStart, ValueEnd).
type Member struct{ NameStart, NameEnd, ValueStart, ValueEnd int }

// TopMembers returns the members of the top-level object of the last ID
// or Verify, in order, as spans of the canonical bytes it returned, when
// the fast path took the input; otherwise nil (the members are then read
// from the bytes). Valid until the Canonicalizer's next call.
func (c *Canonicalizer) TopMembers() []Member {
	if !c.fastTook {
		return nil
	}
	return c.top
}

// fast reports whether src is a top-level AMD object the full parser would
// accept and write out unchanged, with the top-level artifact_id member's
// span (if any) in c.idStart, c.idEnd and c.idSrcOff, as run leaves them
// (offsets in src, which is the canonical form).
func (c *Canonicalizer) fast(src []byte) bool {
	c.fastTook = false
	if fastOff || c.profile != AMD || len(src) == 0 || len(src) > c.cfg.maxSize || src[0] != '{' {
		return false
	}
	c.idStart, c.idEnd, c.idSrcOff = -1, -1, 0
	c.top = c.top[:0]
	i, ok := c.fastObject(src, 0, 1, true)
	c.fastTook = ok && i == len(src)
	return c.fastTook
}

func (c *Canonicalizer) fastValue(src []byte, i, depth int) (int, bool) {
	if i >= len(src) {
		return i, false
	}
	switch b := src[i]; {
	case b == '{':
		return c.fastObject(src, i, depth+1, false)
	case b == '[':
		return c.fastArray(src, i, depth+1)
	case b == '"':
		return c.fastString(src, i)
	case b == 't':
		return fastLiteral(src, i, "true")
	case b == 'f':
		return fastLiteral(src, i, "false")
	case b == 'n':
		return fastLiteral(src, i, "null")
	case b == '-' || b >= '0' && b <= '9':
		return c.fastNumber(src, i)
	}
	return i, false
}

func (c *Canonicalizer) fastObject(src []byte, i, depth int, top bool) (int, bool) {
	if depth > c.cfg.maxDepth {
		return i, false
	}
	i++
	if i < len(src) && src[i] == '}' {
		return i + 1, true
	}
	var prev []byte
	for first := true; ; first = false {
		if i >= len(src) || src[i] != '"' {
			return i, false
		}
		start := i
		next, ok := c.fastString(src, i)
		if !ok {
			return i, false
		}
		// A plain name is its own decoded and normalized form: the order
		// and the uniqueness run checks are the order of the bytes.
		key := src[i+1 : next-1]
		if !first && c.cmp(prev, key) >= 0 {
			return i, false
		}
		prev = key
		if next >= len(src) || src[next] != ':' {
			return next, false
		}
		if i, ok = c.fastValue(src, next+1, depth); !ok {
			return i, false
		}
		if top {
			c.top = append(c.top, Member{start + 1, next - 1, next + 1, i})
			if string(key) == "artifact_id" {
				c.idStart, c.idEnd, c.idSrcOff = start, i, start
			}
		}
		if i >= len(src) {
			return i, false
		}
		switch src[i] {
		case ',':
			i++
		case '}':
			return i + 1, true
		default:
			return i, false
		}
	}
}

func (c *Canonicalizer) fastArray(src []byte, i, depth int) (int, bool) {
	if depth > c.cfg.maxDepth {
		return i, false
	}
	i++
	if i < len(src) && src[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = c.fastValue(src, i, depth); !ok {
			return i, false
		}
		if i >= len(src) {
			return i, false
		}
		switch src[i] {
		case ',':
			i++
		case ']':
			return i + 1, true
		default:
			return i, false
		}
	}
}

// fastString accepts the string at src[i] when it has no escape and its
// content is valid UTF-8 with no control character and no code point NFC
// may change: what plainString writes out as it is, with nothing deferred.
func (c *Canonicalizer) fastString(src []byte, i int) (int, bool) {
	// Printable ASCII other than the quote and the backslash, eight bytes
	// at a time, then byte by byte to the quote; the first byte of
	// anything else (not ASCII, mostly) hands over to the general scan.
	k := i + 1
	for k+8 <= len(src) {
		w := binary.LittleEndian.Uint64(src[k:])
		if printable(w)|zeroByte(w^(ones*'"'))|zeroByte(w^(ones*'\\')) != 0 {
			break
		}
		k += 8
	}
	for ; k < len(src); k++ {
		switch b := src[k]; {
		case b == '"':
			return k + 1, true
		case b == '\\' || b < 0x20:
			return i, false
		case b >= utf8.RuneSelf:
			return c.fastStringRest(src, i, k)
		}
	}
	return i, false
}

// zeroByte has the high bit of each byte of w that is zero set (and
// possibly of bytes above a zero one: only whether it is 0 is used).
func zeroByte(w uint64) uint64 { return (w - ones) &^ w & highs }

// fastStringRest goes on with the string at src[i] from src[k], the first
// byte that is not ASCII.
func (c *Canonicalizer) fastStringRest(src []byte, i, k int) (int, bool) {
	q := bytes.IndexByte(src[k:], '"')
	if q < 0 {
		return i, false
	}
	body := src[k : k+q]
	if bytes.IndexByte(body, '\\') >= 0 {
		return i, false
	}
	if n, bad := scanPlain(body, &c.bmp); bad || n < len(body) {
		return i, false
	}
	return k + q + 1, true
}

func fastLiteral(src []byte, i int, lit string) (int, bool) {
	if len(src)-i < len(lit) || string(src[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// fastNumber accepts an integer in its canonical spelling (0, or an
// optional minus and digits without a leading zero), within the limits,
// followed by what may follow a value inside a container.
func (c *Canonicalizer) fastNumber(src []byte, i int) (int, bool) {
	j := i
	if src[j] == '-' {
		j++
	}
	if j >= len(src) {
		return i, false
	}
	switch d := src[j]; {
	case d == '0':
		if j > i {
			return i, false // -0 is written 0
		}
		j++
	case d >= '1' && d <= '9':
		start := j
		var v uint64
		for j < len(src) && src[j] >= '0' && src[j] <= '9' {
			v = v*10 + uint64(src[j]-'0')
			j++
			if j-start > 16 {
				return i, false // past 2^53 whatever the digits
			}
		}
		if j-start > c.cfg.maxIntDigits || v > maxSafe {
			return i, false
		}
	default:
		return i, false
	}
	if j < len(src) {
		switch src[j] {
		case ',', '}', ']':
			return j, true
		}
	}
	return i, false
}
