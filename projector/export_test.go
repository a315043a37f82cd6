package projector

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/parley-engine/parley/canon"
)

// DumpState renders the whole projection, every field of every
// deliberation (unexported ones included: tokens, stall counters, activity,
// pending, judged evidence, indexes…), but the options, in a canonical
// text: maps in key order, pointers followed, times in UTC. Two
// projections with the same state give the same text.
func DumpState(p *Projection) string {
	var b strings.Builder
	dump(&b, reflect.ValueOf(p).Elem(), "projection")
	return b.String()
}

var timeType = reflect.TypeOf(time.Time{})

func dump(b *strings.Builder, v reflect.Value, path string) {
	// Work on an addressable copy that reflection may read, unexported
	// fields included.
	if v.CanAddr() {
		v = reflect.NewAt(v.Type(), v.Addr().UnsafePointer()).Elem()
	} else {
		c := reflect.New(v.Type()).Elem()
		c.Set(v)
		v = c
	}
	if v.Type() == timeType {
		fmt.Fprintf(b, "%s = %s\n", path, v.Interface().(time.Time).UTC().Format(time.RFC3339Nano))
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			fmt.Fprintf(b, "%s = nil\n", path)
			return
		}
		dump(b, v.Elem(), path)
	case reflect.Struct:
		if k, ok := v.Addr().Interface().(interface{ dumpList() any }); ok {
			dump(b, reflect.ValueOf(k.dumpList()), path)
			return
		}
		for i := 0; i < v.NumField(); i++ {
			name := v.Type().Field(i).Name
			switch {
			case name == "opts" || name == "digest" || name == "closures" || name == "kl": // options, caches, the byte bound's bookkeeping
			case name == "index" && v.Type() == reflect.TypeOf(Deliberation{}):
				// The table's layout depends on its history and its seed:
				// its state is what it maps each id to.
				d := v.Addr().Interface().(*Deliberation)
				fmt.Fprintf(b, "%s.index = %d entries\n", path, d.index.n)
				for j, id := range d.nodeIDs {
					k, ok := d.index.get(d.nodeIDs, id)
					fmt.Fprintf(b, "%s.index[%x] = %d %v\n", path, id[:4], k, ok && int(k) == j)
				}
			default:
				dump(b, v.Field(i), path+"."+name)
			}
		}
	case reflect.Map:
		// A nil and an empty map hold the same state.
		keys := v.MapKeys()
		rendered := make([]string, len(keys))
		for i, k := range keys {
			rendered[i] = fmt.Sprint(k.Interface())
		}
		idx := make([]int, len(keys))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, c int) int { return strings.Compare(rendered[a], rendered[c]) })
		fmt.Fprintf(b, "%s = map[%d]\n", path, len(keys))
		for _, i := range idx {
			dump(b, v.MapIndex(keys[i]), path+"["+rendered[i]+"]")
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			fmt.Fprintf(b, "%s = %q\n", path, v.Bytes())
			return
		}
		// A nil and an empty slice hold the same state.
		fmt.Fprintf(b, "%s = [%d]\n", path, v.Len())
		for i := 0; i < v.Len(); i++ {
			dump(b, v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	default:
		fmt.Fprintf(b, "%s = %v\n", path, v.Interface())
	}
}

// ReferenceDigest is the state digest computed the way it was first
// written (digest_reference_test.go), uncached.
func (d *Deliberation) ReferenceDigest() canon.Digest { return d.referenceDigest() }

// ComputeDigest is the state digest computed now, uncached.
func (d *Deliberation) ComputeDigest() canon.Digest { return d.computeDigest(false) }

// ComputeLegacyDigest is the v2 rendering (the kept lists in detail)
// computed now, whatever is kept.
func (d *Deliberation) ComputeLegacyDigest() canon.Digest { return d.computeDigest(true) }

// KeptQueue is the length of the kept ledger's queue and the items it
// counts as kept.
func KeptQueue(p *Projection) (queue, live int) { return len(p.kl.queue) - p.kl.head, p.kl.live }
