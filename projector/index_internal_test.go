package projector

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/parley-engine/parley/canon"
)

// The id index against a map, through its growth, with ids absent, with
// ids that share all but their last bytes, and rebuilt at once (build) as
// a snapshot's restore does.
func TestIDIndex_AgainstMap(t *testing.T) {
	var x idIndex
	var ids []canon.Digest
	want := map[canon.Digest]int32{}
	for i := range 5000 {
		var id canon.Digest
		if i%3 == 0 {
			// Ids alike but for their end.
			binary.BigEndian.PutUint32(id[28:], uint32(i))
		} else {
			id = sha256.Sum256(binary.BigEndian.AppendUint32(nil, uint32(i)))
		}
		ids = append(ids, id)
		x.put(ids, int32(i))
		want[id] = int32(i)
		if i%97 == 0 {
			for id, w := range want {
				if got, ok := x.get(ids, id); !ok || got != w {
					t.Fatalf("after %d: get %x = %d %v, want %d", i+1, id[:4], got, ok, w)
				}
			}
		}
	}
	if 4*x.n > 3*len(x.slots) || x.n != len(ids) {
		t.Fatalf("%d entries in %d slots", x.n, len(x.slots))
	}
	for i := range 1000 {
		absent := sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i)))
		if x.has(ids, absent) {
			t.Fatalf("absent id %x found", absent[:4])
		}
	}
	var y idIndex
	y.build(ids)
	for id, w := range want {
		if got, ok := y.get(ids, id); !ok || got != w {
			t.Fatalf("built: get %x = %d %v, want %d", id[:4], got, ok, w)
		}
	}
	var empty idIndex
	if empty.has(nil, ids[0]) {
		t.Fatal("an empty index has an id")
	}
}
