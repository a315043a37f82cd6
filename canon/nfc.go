package canon

import (
	"sync"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// UnicodeVersion is the Unicode version of the NFC tables in force. Artifact
// ids of text that uses code points assigned after it may differ between
// builds; engine version reports it.
const UnicodeVersion = norm.Version

// stableBMP has one bit per BMP code point: set when the code point, wherever
// it stands in a string, can neither change under NFC nor make its
// neighbours change. Those are the starters (canonical combining class 0)
// that are NFC_Quick_Check=Yes and never combine with a preceding character.
// A string made only of such code points is in NFC, which is the fast path
// for the mostly-precomposed text that artifacts carry. The table is derived
// from x/text's own data on first use, so it follows the Unicode version in
// force.
var (
	stableOnce sync.Once
	stableBMP  [0x10000 / 64]uint64
)

func buildStable() {
	var b [utf8.UTFMax]byte
	for r := rune(0); r < 0x10000; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		n := utf8.EncodeRune(b[:], r)
		p := norm.NFC.Properties(b[:n])
		if p.CCC() == 0 && p.BoundaryBefore() && norm.NFC.IsNormal(b[:n]) {
			stableBMP[r>>6] |= 1 << (r & 63)
		}
	}
}

// isNFC reports whether valid UTF-8 s is in NFC.
func isNFC(s []byte) bool {
	stableOnce.Do(buildStable)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		if r >= 0x10000 || stableBMP[r>>6]&(1<<(r&63)) == 0 {
			return norm.NFC.IsNormal(s)
		}
		i += n
	}
	return true
}
