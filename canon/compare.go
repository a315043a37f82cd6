package canon

import (
	"bytes"
	"unicode/utf8"
)

// compareUTF16 orders two valid UTF-8 strings by their UTF-16 code units, as
// RFC 8785 §3.2.3 requires, without converting them. UTF-8 byte order is code
// point order; the two orders differ only where a supplementary code point
// (a surrogate pair in UTF-16, lead unit D800-DBFF) meets a BMP code point in
// E000-FFFF, which UTF-16 puts after it.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	// Back up to the start of the rune that differs.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	return int(utf16Key(ra)) - int(utf16Key(rb))
}

// utf16Key maps a code point to a value whose order is UTF-16 code unit
// order: BMP code points below the surrogates keep their value,
// supplementary ones keep theirs (they start with a unit D800-DBFF), and BMP
// code points from E000 are moved above every supplementary one.
func utf16Key(r rune) rune {
	if r >= 0xE000 && r <= 0xFFFF {
		return r + 0x200000
	}
	return r
}

// compareUTF8 is the AMD order: unsigned bytes.
func compareUTF8(a, b []byte) int { return bytes.Compare(a, b) }
