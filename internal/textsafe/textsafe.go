// Package textsafe makes text that participants wrote safe to show: on a
// terminal, in a report, on a web page. Whoever writes a title, a
// statement, a reason or an envelope chooses every character of it, and a
// few characters change what the reader sees rather than showing
// themselves: control characters (a terminal's escape sequences, a
// carriage return that overwrites the line, BEL), the bidirectional
// controls that reorder the text around them (U+202E RIGHT-TO-LEFT
// OVERRIDE makes "…detelpmoc :sutats" read "status: completed"), and the
// other invisible format characters (zero-width spaces and joiners, the
// byte-order mark, tag characters, line and paragraph separators).
//
// Line and Text write each of those as a visible escape, `\x1b` for an
// ASCII control or a byte that is not UTF-8, `\u202e` (or `\U000e0041`)
// for the others, and leave every other character as it is. Their output
// never holds a character that Unsafe reports, nor invalid UTF-8, and they
// are idempotent: the escapes are printable ASCII. JSON does the same
// inside an encoded JSON value, with JSON's own \u escapes, so that the
// value it decodes to is unchanged.
//
// A web page uses Unsafe and Escape to draw the same escapes as marked
// text, inside an isolate (<bdi>), so that right-to-left letters, which
// are shown, cannot reorder what is around them either.
package textsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Unsafe reports whether r must not reach a screen as itself: C0 controls
// (tab and newline included), DEL, C1 controls, the bidirectional controls
// (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), every other
// format character (Unicode category Cf: U+00AD, U+200B–U+200D, U+2060–
// U+2064, U+FEFF, U+FFF9–U+FFFB, the tags U+E0001 and U+E0020–U+E007F…),
// the line and paragraph separators U+2028 and U+2029, and the fillers
// that draw nothing (U+115F, U+1160, U+3164, U+FFA0).
func Unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r < 0xa0:
		return false
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x2028, r == 0x2029, r == 0x115f, r == 0x1160, r == 0x3164, r == 0xffa0:
		return true
	}
	return unicode.Is(unicode.Cf, r)
}

// Escape is the visible form of r: `\x1b` below U+0080, `\u202e` up to
// U+FFFF, `\U000e0041` above.
func Escape(r rune) string {
	switch {
	case r < 0x80:
		return fmt.Sprintf(`\x%02x`, r)
	case r <= 0xffff:
		return fmt.Sprintf(`\u%04x`, r)
	}
	return fmt.Sprintf(`\U%08x`, r)
}

// Line returns s for one line of a terminal: every unsafe character,
// newlines included, and every byte that is not UTF-8 as its escape.
func Line(s string) string { return clean(s, false) }

// Text is Line keeping newlines, for text shown on several lines.
func Text(s string) string { return clean(s, true) }

func clean(s string, keepNL bool) string {
	bad := func(r rune) bool { return Unsafe(r) && !(keepNL && r == '\n') }
	if utf8.ValidString(s) && strings.IndexFunc(s, bad) < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case bad(r):
			b.WriteString(Escape(r))
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// JSON returns the encoded JSON value b with every unsafe character
// outside the ASCII controls (which an encoder already escapes) written as
// a JSON \u escape (a surrogate pair above U+FFFF), and every byte that is
// not UTF-8 as \ufffd: the same value, printable on a terminal. Unsafe
// characters can only stand inside strings of valid JSON, where a \u
// escape means the same character.
func JSON(b []byte) []byte {
	if utf8.Valid(b) && !hasUnsafe(b) {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			out = append(out, `\ufffd`...)
		case r >= 0x7f && Unsafe(r):
			if r > 0xffff {
				hi, lo := surrogates(r)
				out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
			} else {
				out = fmt.Appendf(out, `\u%04x`, r)
			}
		default:
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}

func hasUnsafe(b []byte) bool {
	for _, r := range string(b) {
		if r >= 0x7f && Unsafe(r) {
			return true
		}
	}
	return false
}

func surrogates(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}
