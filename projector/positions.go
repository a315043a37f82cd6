package projector

import (
	"encoding/binary"
	"errors"
	"sort"
)

// positions are the stream positions of a deliberation's messages, in
// increasing order, kept compactly: in blocks of posBlock, each the first
// position in full and the rest as the varint differences from the one
// before. A deliberation's messages are usually near one another in the
// stream, so a message costs one to three bytes here instead of eight (a
// flood of junk into one deliberation, one). It is append-only, so a
// frozen copy (cut) shares it with the fold.
type positions struct {
	data  []byte   // the differences, block after block
	first []uint64 // each block's first position
	off   []int    // each block's first difference in data
	n     int
	last  uint64
}

const posBlock = 128

func (p *positions) add(seq uint64) {
	if p.n%posBlock == 0 {
		p.first = append(p.first, seq)
		p.off = append(p.off, len(p.data))
	} else {
		p.data = binary.AppendUvarint(p.data, seq-p.last)
	}
	p.n++
	p.last = seq
}

// len is the number of positions.
func (p *positions) len() int { return p.n }

// lastPos is the last position (0: none).
func (p *positions) lastPos() uint64 { return p.last }

// index returns the index of seq (0 for the first position) and whether
// seq is one of the positions.
func (p *positions) index(seq uint64) (int, bool) {
	b := sort.Search(len(p.first), func(i int) bool { return p.first[i] > seq }) - 1
	if b < 0 {
		return 0, false
	}
	c := p.cursorAt(b)
	for c.pos < seq && c.next() {
	}
	return c.i, c.pos == seq
}

// cursor walks the positions in order.
type posCursor struct {
	p   *positions
	i   int // the index of pos (-1: before the first)
	pos uint64
	off int
}

func (p *positions) cursor() posCursor { return posCursor{p: p, i: -1} }

func (p *positions) cursorAt(block int) posCursor {
	return posCursor{p: p, i: block * posBlock, pos: p.first[block], off: p.off[block]}
}

// next moves to the next position; false at the end.
func (c *posCursor) next() bool {
	if c.i+1 >= c.p.n {
		return false
	}
	c.i++
	if c.i%posBlock == 0 {
		b := c.i / posBlock
		c.pos, c.off = c.p.first[b], c.p.off[b]
		return true
	}
	d, k := binary.Uvarint(c.p.data[c.off:])
	c.off += k
	c.pos += d
	return true
}

// all returns every position (tests, and readers that want them whole).
func (p *positions) all() []uint64 {
	out := make([]uint64, 0, p.n)
	for c := p.cursor(); c.next(); {
		out = append(out, c.pos)
	}
	return out
}

// seqsSnap is positions as a snapshot holds them.
type seqsSnap struct {
	Data  []byte
	First []uint64
	N     int
}

func (p *positions) snap() seqsSnap { return seqsSnap{Data: cut(p.data), First: cut(p.first), N: p.n} }

// restore rebuilds positions from a snapshot's, checking that they are
// what add makes (increasing, whole blocks), so that a damaged snapshot
// is refused, not read past its end.
func (s seqsSnap) restore() (positions, error) {
	p := positions{data: s.Data, first: s.First, n: s.N}
	if s.N < 0 || len(s.First) != (s.N+posBlock-1)/posBlock {
		return positions{}, errors.New("positions: blocks do not match the count")
	}
	p.off = make([]int, len(s.First))
	off, prev := 0, uint64(0)
	for i := range s.N {
		if i%posBlock == 0 {
			b := i / posBlock
			if i > 0 && s.First[b] <= prev {
				return positions{}, errors.New("positions: not increasing")
			}
			p.off[b], prev = off, s.First[b]
			continue
		}
		d, k := binary.Uvarint(s.Data[off:])
		if k <= 0 || d == 0 || prev+d < prev {
			return positions{}, errors.New("positions: a damaged difference")
		}
		off += k
		prev += d
	}
	if off != len(s.Data) {
		return positions{}, errors.New("positions: bytes past the last")
	}
	p.last = prev
	return p, nil
}
