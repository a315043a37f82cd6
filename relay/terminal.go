package relay

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// inert makes text that carries participants' words safe to print on a
// terminal: control characters (C0, DEL, C1: escape sequences, BEL,
// carriage returns) and the bidirectional overrides and isolates that
// reorder what a terminal shows are written as visible \x.. or \u....
// escapes, as are bytes that are not UTF-8; newlines stay when keepNL.
func inert(s string, keepNL bool) string {
	bad := func(r rune) bool {
		switch {
		case r == '\n':
			return !keepNL
		case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
			return true
		case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return true
		}
		return false
	}
	if utf8.ValidString(s) && strings.IndexFunc(s, bad) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case bad(r) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case bad(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
