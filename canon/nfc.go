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

// stableTable is one plane's table.
type stableTable = *[0x10000 / 64]uint64

// bmpStable returns plane 0's table, built first if need be. A
// Canonicalizer keeps the pointer, so that its scans read the table with
// no synchronization per code point: the Once that built it happened
// before.
func bmpStable() stableTable {
	stableOnce[0].Do(func() { buildStable(0) })
	return &stableBits[0]
}

// isStable is stable with plane 0's table at hand.
func isStable(bmp stableTable, r rune) bool {
	if r < 0x10000 {
		return bmp[r>>6]&(1<<(r&63)) != 0
	}
	return stable(r)
}

// The word tests of the scans: a uint64 of eight input bytes holds only
// printable ASCII (0x20-0x7F) when printable(w) is zero, only ASCII when
// w&highs is zero.
const ones, highs = 0x0101010101010101, 0x8080808080808080

func printable(w uint64) uint64 { return ((w-ones*0x20)&^w | w) & highs }

// printable32 reports whether the 32 bytes at s[k:] are printable ASCII.
func printable32(s []byte, k int) bool {
	const c = ones * 0x20
	a := binary.LittleEndian.Uint64(s[k:])
	b := binary.LittleEndian.Uint64(s[k+8:])
	d := binary.LittleEndian.Uint64(s[k+16:])
	e := binary.LittleEndian.Uint64(s[k+24:])
	return ((a-c)&^a|a|(b-c)&^b|b|(d-c)&^d|d|(e-c)&^e|e)&highs == 0
}

// scanPlain validates the raw content of a string, s, until the first byte
// that may not stand in a string (a control character or invalid UTF-8:
// bad is true) or, when bmp is not nil, until the first code point that
// NFC may change; it returns that index, or len(s). *bmp is set to
// bmpStable() at the first code point that is not ASCII.
func scanPlain(s []byte, bmp *stableTable) (k int, bad bool) {
	for k < len(s) {
		for k+32 <= len(s) && printable32(s, k) {
			k += 32
		}
		for k+8 <= len(s) && printable(binary.LittleEndian.Uint64(s[k:])) == 0 {
			k += 8
		}
		for k < len(s) && s[k] < utf8.RuneSelf {
			if s[k] < 0x20 {
				return k, true
			}
			k++
			if k&7 == 0 {
				break // back to the word tests
			}
		}
		for k < len(s) && s[k] >= utf8.RuneSelf {
			r, n := decodeRune(s[k:])
			if r == utf8.RuneError && n <= 1 {
				return k, true
			}
			if bmp != nil {
				if *bmp == nil {
					*bmp = bmpStable()
				}
				if !isStable(*bmp, r) {
					return k, false
				}
			}
			k += n
		}
	}
	return k, false
}

// decodeRune is utf8.DecodeRune with the two- and three-byte forms of the
// scripts artifacts carry decoded inline: a lead byte C2-DF with one
// continuation byte, and E1-EC or EE-EF with two, are valid UTF-8 whatever
// the continuation bytes (E0 and ED, which have narrower ranges, and
// everything else go to utf8.DecodeRune).
func decodeRune(s []byte) (rune, int) {
	if len(s) >= 3 {
		b0, b1, b2 := s[0], s[1], s[2]
		if b0 >= 0xC2 && b0 <= 0xDF && b1&0xC0 == 0x80 {
			return rune(b0&0x1F)<<6 | rune(b1&0x3F), 2
		}
		if b0 >= 0xE1 && b0 <= 0xEF && b0 != 0xED && b1&0xC0 == 0x80 && b2&0xC0 == 0x80 {
			return rune(b0&0x0F)<<12 | rune(b1&0x3F)<<6 | rune(b2&0x3F), 3
		}
	}
	return utf8.DecodeRune(s)
}

type nfcStatus uint8

const (
	nfcOK            nfcStatus = iota
	nfcInvalid                 // a control character or invalid UTF-8 at the index returned
	nfcNonstarterRun           // see appendNFC
)

// appendNFC appends the NFC form of s to dst when it differs from s, and
// reports whether it did; when s is already in NFC, dst is returned
// unchanged. from is a byte offset before which s holds only stable code
// points (0 when unknown). Only the segments around unstable code points
// go through the normalizer: a stable code point starts a segment that NFC
// never merges with what precedes it, so NFC(xy) = NFC(x)NFC(y) there.
// The normalized form of short segments is remembered in memo; bmp is
// bmpStable().
//
// With raw set, s is a string's content as it stands in the input and is
// validated as it is read (from on): st is nfcInvalid at the first control
// character or invalid UTF-8 byte. Without it, s must be valid UTF-8.
//
// st is nfcNonstarterRun when x/text had to insert U+034F COMBINING
// GRAPHEME JOINER to keep a run of more than 30 non-starters stream-safe:
// that output is not plain NFC, other implementations would not produce
// it, and the caller refuses the string rather than let ids silently
// differ. The rest of s is still validated.
func appendNFC(it *norm.Iter, memo *nfcMemo, bmp stableTable, dst, s []byte, from int, raw bool) (out []byte, changed bool, st nfcStatus, at int) {
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
	for i := from; i < len(s); {
		if s[i] < utf8.RuneSelf {
			// Skip ASCII, 32 or eight bytes at a time; the last byte
			// skipped starts the segment.
			if raw {
				for i+32 <= len(s) && printable32(s, i) {
					i += 32
				}
				for i+8 <= len(s) && printable(binary.LittleEndian.Uint64(s[i:])) == 0 {
					i += 8
				}
				for i < len(s) && s[i] < utf8.RuneSelf {
					if s[i] < 0x20 {
						return dst[:orig], false, nfcInvalid, i
					}
					i++
				}
			} else {
				for i+8 <= len(s) && binary.LittleEndian.Uint64(s[i:])&highs == 0 {
					i += 8
				}
				for i < len(s) && s[i] < utf8.RuneSelf {
					i++
				}
			}
			seg = i - 1
			continue
		}
		r, n := decodeRune(s[i:])
		if raw && r == utf8.RuneError && n <= 1 {
			return dst[:orig], false, nfcInvalid, i
		}
		if isStable(bmp, r) {
			seg = i
			i += n
			continue
		}
		// The segment runs from the last stable code point to the next.
		j := i + n
		for j < len(s) && s[j] >= utf8.RuneSelf {
			r, n := decodeRune(s[j:])
			if raw && r == utf8.RuneError && n <= 1 {
				return dst[:orig], false, nfcInvalid, j
			}
			if isStable(bmp, r) {
				break
			}
			j += n
		}
		dst = append(dst, s[done:seg]...)
		start := len(dst)
		in := s[seg:j]
		if e := memo.find(in); e != nil {
			dst = append(dst, e.out[:e.m]...)
		} else {
			it.Init(norm.NFC, in)
			for !it.Done() {
				dst = append(dst, it.Next()...)
			}
			if !bytes.Equal(dst[start:], in) && bytes.Count(dst[start:], cgj) != bytes.Count(in, cgj) {
				if raw {
					if k, bad := scanPlain(s[j:], nil); bad {
						return dst[:orig], false, nfcInvalid, j + k
					}
				}
				return dst[:orig], false, nfcNonstarterRun, 0
			}
			memo.put(in, dst[start:])
		}
		if !changed && !bytes.Equal(dst[start:], in) {
			changed = true
		}
		done, seg, i = j, j, j
	}
	if !changed {
		return dst[:orig], false, nfcOK, 0
	}
	return append(dst, s[done:]...), true, nfcOK, 0
}

var cgj = []byte("\u034f")

// nfcMemo remembers the NFC form of recently normalized short segments.
// Decomposed text repeats the same few segments ("e" and U+0301), and a
// lookup costs far less than a pass through the normalizer. It is exact:
// a segment's NFC depends on its bytes alone.
type nfcMemo [256]nfcMemoEntry

type nfcMemoEntry struct {
	n, m    uint8 // lengths of in and out; n == 0 marks an empty entry
	in, out [16]byte
}

func (t *nfcMemo) slot(in []byte) *nfcMemoEntry {
	h := uint32(2166136261) // FNV-1a
	for _, b := range in {
		h = (h ^ uint32(b)) * 16777619
	}
	return &t[(h^h>>8^h>>16)%uint32(len(t))]
}

func (t *nfcMemo) find(in []byte) *nfcMemoEntry {
	if len(in) > len(nfcMemoEntry{}.in) {
		return nil
	}
	e := t.slot(in)
	if int(e.n) != len(in) || !bytes.Equal(e.in[:e.n], in) {
		return nil
	}
	return e
}

func (t *nfcMemo) put(in, out []byte) {
	if len(in) > len(nfcMemoEntry{}.in) || len(out) > len(nfcMemoEntry{}.out) {
		return
	}
	e := t.slot(in)
	e.n, e.m = uint8(len(in)), uint8(len(out))
	copy(e.in[:], in)
	copy(e.out[:], out)
}
