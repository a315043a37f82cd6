package projector

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// positions answer as the plain list they stand for: every index, every
// position that is not one of them, the walk, and a snapshot's round trip;
// and they cost a byte or so a message when the messages are near.
func TestPositions_AsAList(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 200 {
		n := r.IntN(700)
		gap := []uint64{1, 3, 200, 1 << 20, 1 << 40}[round%5]
		var want []uint64
		var p positions
		pos := uint64(r.IntN(10) + 1)
		for range n {
			want = append(want, pos)
			p.add(pos)
			pos += 1 + r.Uint64N(gap)
		}
		if got := p.all(); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("round %d: walk %v, want %v", round, got, want)
		}
		for i, s := range want {
			if j, ok := p.index(s); !ok || j != i {
				t.Fatalf("round %d: index(%d) = %d %v, want %d", round, s, j, ok, i)
			}
			if _, ok := p.index(s + 1); ok != slices.Contains(want, s+1) {
				t.Fatalf("round %d: index(%d) found %v", round, s+1, ok)
			}
		}
		if _, ok := p.index(0); ok {
			t.Fatal("index(0) found")
		}
		q, err := p.snap().restore()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(q.all(), p.all()) || q.last != p.last || q.n != p.n {
			t.Fatalf("round %d: restored %v", round, q.all())
		}
		if gap == 1 && n > 0 && len(p.data) > n {
			t.Fatalf("%d bytes for %d near positions", len(p.data), n)
		}
	}
}

// A damaged snapshot of positions is refused, never read past its end.
func FuzzPositionsRestore(f *testing.F) {
	var p positions
	for i := range 300 {
		p.add(uint64(i*3 + 1))
	}
	s := p.snap()
	f.Add(s.Data, uint64(1), uint64(385), 300)
	f.Fuzz(func(t *testing.T, data []byte, a, b uint64, n int) {
		q, err := seqsSnap{Data: data, First: []uint64{a, b, b + 1}, N: n}.restore()
		if err != nil {
			return
		}
		all := q.all()
		if len(all) != n || !slices.IsSorted(all) {
			t.Fatalf("restored %d positions (%d), sorted %v", len(all), n, slices.IsSorted(all))
		}
		for i, s := range all {
			if j, ok := q.index(s); !ok || j != i {
				t.Fatalf("index(%d) = %d %v, want %d", s, j, ok, i)
			}
		}
	})
}
