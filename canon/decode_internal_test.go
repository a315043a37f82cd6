package canon

import (
	"testing"
	"unicode/utf8"
)

// decodeRune agrees with utf8.DecodeRune on every three-byte input.
func TestDecodeRune(t *testing.T) {
	var b [3]byte
	for x := 0; x < 1<<24; x++ {
		b[0], b[1], b[2] = byte(x>>16), byte(x>>8), byte(x)
		r, n := decodeRune(b[:])
		wr, wn := utf8.DecodeRune(b[:])
		if r != wr || n != wn {
			t.Fatalf("% x: %U/%d, want %U/%d", b, r, n, wr, wn)
		}
	}
}
