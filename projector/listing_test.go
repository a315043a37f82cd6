package projector_test

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/projector"
	supervisor "github.com/parley-engine/parley/termination"
)

// artifactsAfter is what ArtifactsAfter gives from after: positions and
// admission ordinals, checked against the node at each.
func artifactsAfter(t *testing.T, d *projector.Deliberation, after uint64) (seqs []uint64, ords []int) {
	t.Helper()
	d.ArtifactsAfter(after, func(i int, e api.ArtifactEntry) bool {
		if n, ok := d.Node(e.ArtifactID); !ok || n.Seq != e.Position || n.Participant != e.Participant || string(n.Type) != e.Type {
			t.Fatalf("entry %+v, node %+v", e, n)
		}
		seqs = append(seqs, e.Position)
		ords = append(ords, i)
		return true
	})
	return seqs, ords
}

func TestDeliberation_ArtifactsAfter(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed))
			f := newFeed(t)
			f.ctl(`{"op":"open","charter":{"title":"t"}}`)
			// Objections published before the claim they object to are
			// refused, and admitted when published again after it: the
			// positions have gaps, and the DAG is in stream order.
			held := 0
			for i := range 200 {
				c := claim("c" + strconv.Itoa(i))
				o := objection(c.ID, false)
				if seed > 1 && rng.IntN(3) == 0 {
					f.art("bob", o)
					f.art("alice", c)
					f.art("bob", o)
					held++
				} else {
					f.art("alice", c)
					f.art("bob", o)
				}
			}
			d := f.d()
			if d.Artifacts() != 400 {
				t.Fatalf("%d artifacts", d.Artifacts())
			}
			// The reference: every node's position, sorted.
			var want []uint64
			admission := map[uint64]int{}
			i := 0
			d.Nodes(func(_ canon.Digest, n projector.Node) {
				want = append(want, n.Seq)
				admission[n.Seq] = i
				i++
			})
			if !slices.IsSorted(want) {
				t.Fatalf("admission order is not stream order (%d refused first)", held)
			}
			if _, rejected, _ := d.Rejections(); rejected != held {
				t.Fatalf("%d rejections, %d refused first", rejected, held)
			}
			check := func(d *projector.Deliberation) {
				t.Helper()
				for _, after := range []uint64{0, 1, 2, 3, want[10], want[10] + 1, want[399] - 1, want[399], want[399] + 5} {
					got, ords := artifactsAfter(t, d, after)
					var w []uint64
					for _, s := range want {
						if s > after {
							w = append(w, s)
						}
					}
					if !slices.Equal(got, w) {
						t.Fatalf("after %d: %d positions %v…, want %d %v…", after, len(got), got[:min(5, len(got))], len(w), w[:min(5, len(w))])
					}
					for k, s := range got {
						if ords[k] != admission[s] {
							t.Fatalf("position %d: admitted %d, want %d", s, ords[k], admission[s])
						}
					}
				}
				// fn stops the walk.
				n := 0
				d.ArtifactsAfter(0, func(int, api.ArtifactEntry) bool { n++; return n < 7 })
				if n != 7 {
					t.Errorf("walk went on to %d after fn returned false", n)
				}
			}
			check(d)
			// A snapshot gives the same order.
			var buf bytes.Buffer
			if err := f.p.WriteSnapshot(&buf); err != nil {
				t.Fatal(err)
			}
			p, err := projector.ReadSnapshot(&buf, projector.Options{Rules: supervisor.Rules{}})
			if err != nil {
				t.Fatal(err)
			}
			check(p.Deliberation(delib))
		})
	}
}

func TestDeliberation_Summary(t *testing.T) {
	f := newFeed(t)
	f.ctl(`{"op":"open","charter":{"title":"the title"}}`)
	c := claim("c")
	f.art("alice", c)
	f.art("alice", c) // a duplicate: rejected
	s := f.d().Summary()
	if s.ID != delib || s.Title != "the title" || s.Status != api.StatusOpen || s.OpenedAt != 1 || s.Position != 3 || s.Artifacts != 1 || s.Rejections != 1 {
		t.Errorf("%+v", s)
	}
}
