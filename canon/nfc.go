package canon

import (
	"bytes"
	"encoding/binary"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// UnicodeVersion is the Unicode version of the NFC tables in force. Artifact
// ids of text that uses code points assigned after it may differ between
// builds; engine version reports it.
const UnicodeVersion = norm.Version

// stableBits has one bit per code point of planes 0 to 3: set when the
// code point, wherever it stands in a string, can neither change under NFC
// nor make its neighbours change. Those are the starters (canonical
// combining class 0) that are NFC_Quick_Check=Yes and never combine with a
// preceding character. A string made only of such code points is in NFC,
// which is the fast path for the precomposed text artifacts carry. Each
// plane's table is derived from x/text's own data on first use, so it
// follows the Unicode version in force. Code points of higher planes (tags,
// private use) always take the slow path.
const stablePlanes = 4

var (
	stableOnce [stablePlanes]sync.Once
	stableBits [stablePlanes][0x10000 / 64]uint64
)

func buildStable(plane int) {
	var b [utf8.UTFMax]byte
	base := rune(plane) << 16
	for lo := rune(0); lo < 0x10000; lo++ {
		r := base | lo
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		n := utf8.EncodeRune(b[:], r)
		p := norm.NFC.Properties(b[:n])
		if p.CCC() == 0 && p.BoundaryBefore() && norm.NFC.IsNormal(b[:n]) {
			stableBits[plane][lo>>6] |= 1 << (lo & 63)
		}
	}
}

func stable(r rune) bool {
	plane := int(r >> 16)
	if plane >= stablePlanes {
		return false
	}
	stableOnce[plane].Do(func() { buildStable(plane) })
	lo := r & 0xFFFF
	return stableBits[plane][lo>>6]&(1<<(lo&63)) != 0
}

// appendNFC appends the NFC form of valid UTF-8 s to dst when it differs
// from s, and reports whether it did; when s is already in NFC, dst is
// returned unchanged. from is a byte offset before which s holds only stable
// code points (0 when unknown). Only the segments around unstable code
// points go through the normalizer: a stable code point starts a segment
// that NFC never merges with what precedes it, so NFC(xy) = NFC(x)NFC(y)
// there.
//
// ok is false when x/text had to insert U+034F COMBINING GRAPHEME JOINER to
// keep a run of more than 30 non-starters stream-safe: that output is not
// plain NFC, other implementations would not produce it, and the caller
// rejects the string rather than let ids silently differ.
func appendNFC(it *norm.Iter, dst, s []byte, from int) (out []byte, changed, ok bool) {
	orig := len(dst)
	// The last stable code point before from starts the first segment.
	seg := from
	if seg > 0 {
		seg--
		for seg > 0 && !utf8.RuneStart(s[seg]) {
			seg--
		}
	}
	done := 0 // bytes of s already in dst
	changed = false
	for i := from; i < len(s); {
		if s[i] < utf8.RuneSelf {
			// Skip ASCII eight bytes at a time; the last byte skipped
			// starts the segment.
			for i+8 <= len(s) && binary.LittleEndian.Uint64(s[i:])&0x8080808080808080 == 0 {
				i += 8
			}
			for i < len(s) && s[i] < utf8.RuneSelf {
				i++
			}
			seg = i - 1
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		if stable(r) {
			seg = i
			i += n
			continue
		}
		// The segment runs from the last stable code point to the next.
		j := i + n
		for j < len(s) && s[j] >= utf8.RuneSelf {
			r, n := utf8.DecodeRune(s[j:])
			if stable(r) {
				break
			}
			j += n
		}
		dst = append(dst, s[done:seg]...)
		start := len(dst)
		it.Init(norm.NFC, s[seg:j])
		for !it.Done() {
			dst = append(dst, it.Next()...)
		}
		if !bytes.Equal(dst[start:], s[seg:j]) {
			changed = true
			if bytes.Count(dst[start:], cgj) != bytes.Count(s[seg:j], cgj) {
				return dst[:orig], false, false
			}
		}
		done, seg, i = j, j, j
	}
	if !changed {
		return dst[:orig], false, true
	}
	return append(dst, s[done:]...), true, true
}

var cgj = []byte("\u034f")
