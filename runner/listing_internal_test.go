package runner

import (
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/google/uuid"

	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/wire"
)

// shards returns a runner of n shards with no stream, for the indexes.
func shards(n, maxKept int) *Runner {
	r := &Runner{shards: make([]*shard, n)}
	for i := range r.shards {
		r.shards[i] = &shard{i: i, proj: projector.New(projector.Options{MaxKept: maxKept}), locks: map[string]*delibLock{}}
	}
	return r
}

// TestRunner_UnroutedAfter pages through the unrouted rejections of every
// shard, each keeping its own most recent, against Unrouted (which copies
// and sorts them all): the same rejections, the most recent MaxKept of
// all shards', in stream order, each once, at every page size.
func TestRunner_UnroutedAfter(t *testing.T) {
	for _, tc := range []struct{ msgs, maxKept int }{{0, 7}, {5, 7}, {100, 7}, {300, 50}, {40, 1000}} {
		t.Run(strconv.Itoa(tc.msgs)+"-"+strconv.Itoa(tc.maxKept), func(t *testing.T) {
			r := shards(4, tc.maxKept)
			for seq := uint64(1); seq <= uint64(tc.msgs); seq++ {
				subject := wire.ArtifactSubject(uuid.NewString(), "alice")
				if seq%9 == 0 {
					subject = "parley.nope" // no deliberation: shard 0
				}
				s := r.shardOf(wire.DeliberationOf(subject))
				s.proj.Apply(projector.Msg{Seq: seq, Subject: subject, Data: []byte("x")})
			}
			kept, total := r.Unrouted()
			var want []uint64
			codes := map[string]int{}
			for _, k := range kept {
				want = append(want, k.Position)
				codes[k.Code]++
			}
			for _, limit := range []int{1, 3, 7, 10, 1000} {
				var got []uint64
				var after uint64
				for pages := 0; ; pages++ {
					pg := r.UnroutedAfter(after, limit)
					if pg.Total != total || pg.Kept != len(kept) || !maps.Equal(pg.ByCode, codes) {
						t.Fatalf("limit %d: total %d kept %d %v, want %d %d %v", limit, pg.Total, pg.Kept, pg.ByCode, total, len(kept), codes)
					}
					if len(pg.Rejections) > limit || pg.More && len(pg.Rejections) != limit {
						t.Fatalf("limit %d: a page of %d, more %v", limit, len(pg.Rejections), pg.More)
					}
					for _, rj := range pg.Rejections {
						got = append(got, rj.Position)
					}
					if !pg.More {
						break
					}
					after = pg.Rejections[len(pg.Rejections)-1].Position
				}
				if !slices.Equal(got, want) {
					t.Fatalf("limit %d: %v, want %v", limit, got, want)
				}
			}
		})
	}
}

// TestShard_NoteOpened: the index stays in open order, and a walk that
// read it before an entry came out of order keeps what it read.
func TestShard_NoteOpened(t *testing.T) {
	s := &shard{locks: map[string]*delibLock{}}
	at := func() []uint64 {
		var out []uint64
		for _, e := range s.opened {
			out = append(out, e.at)
		}
		return out
	}
	for _, pos := range []uint64{3, 5, 9} {
		s.noteOpened(&projector.Deliberation{ID: strconv.FormatUint(pos, 10), OpenedAt: pos})
	}
	read := s.opened
	s.noteOpened(&projector.Deliberation{ID: "7", OpenedAt: 7})
	s.noteOpened(&projector.Deliberation{ID: "1", OpenedAt: 1})
	s.noteOpened(&projector.Deliberation{ID: "10", OpenedAt: 10})
	if got := at(); !slices.Equal(got, []uint64{1, 3, 5, 7, 9, 10}) {
		t.Errorf("index %v", got)
	}
	if len(read) != 3 || read[0].at != 3 || read[1].at != 5 || read[2].at != 9 {
		t.Errorf("an earlier read changed: %v", read)
	}
}
