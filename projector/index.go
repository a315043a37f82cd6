package projector

import (
	"hash/maphash"

	"github.com/parley-engine/parley/canon"
)

// idIndex maps an artifact id to its node: an open-addressing table of
// node numbers (plus one; 0 is an empty slot) whose keys are the ids the
// deliberation already keeps in nodeIDs, so that each id is stored once.
// A map[canon.Digest]int32 would store it again with its value, at about
// 50 bytes an artifact; this table costs 4 bytes a slot, at most 3/4 full.
// Slots are chosen by a seeded hash of the whole id, as Go's maps do, so
// that participants who grind ids cannot make long probe sequences.
type idIndex struct {
	slots []int32
	n     int
}

var indexSeed = maphash.MakeSeed()

func (x *idIndex) slot(id *canon.Digest) uint64 {
	return maphash.Bytes(indexSeed, id[:]) & uint64(len(x.slots)-1)
}

// get returns the node of id among ids (the nodes' ids).
func (x *idIndex) get(ids []canon.Digest, id canon.Digest) (int32, bool) {
	if len(x.slots) == 0 {
		return 0, false
	}
	mask := uint64(len(x.slots) - 1)
	for i := x.slot(&id); ; i = (i + 1) & mask {
		v := x.slots[i]
		if v == 0 {
			return 0, false
		}
		if ids[v-1] == id {
			return v - 1, true
		}
	}
}

// has reports whether id is a node's.
func (x *idIndex) has(ids []canon.Digest, id canon.Digest) bool {
	_, ok := x.get(ids, id)
	return ok
}

// put records that node i (whose id is ids[i], not yet in the index) has
// id ids[i].
func (x *idIndex) put(ids []canon.Digest, i int32) {
	if 4*(x.n+1) > 3*len(x.slots) {
		x.grow(ids)
	}
	x.insert(&ids[i], i)
	x.n++
}

func (x *idIndex) insert(id *canon.Digest, i int32) {
	mask := uint64(len(x.slots) - 1)
	j := x.slot(id)
	for x.slots[j] != 0 {
		j = (j + 1) & mask
	}
	x.slots[j] = i + 1
}

func (x *idIndex) grow(ids []canon.Digest) {
	size := max(16, 2*len(x.slots))
	for 4*(x.n+1) > 3*size {
		size *= 2
	}
	old := x.slots
	x.slots = make([]int32, size)
	for _, v := range old {
		if v != 0 {
			x.insert(&ids[v-1], v-1)
		}
	}
}

// build indexes the nodes ids[:n] (a snapshot's), sized for them at once.
func (x *idIndex) build(ids []canon.Digest) {
	x.slots, x.n = nil, 0
	size := 16
	for 4*len(ids) > 3*size {
		size *= 2
	}
	x.slots = make([]int32, size)
	for i := range ids {
		x.insert(&ids[i], int32(i))
	}
	x.n = len(ids)
}
