// Package reclaim gives memory back to the system once a process is quiet.
//
// The embedded NATS server keeps the buffers of the stream's blocks (8 MiB
// each) in pools that only garbage collections empty, two collections
// after their last use, and a quiet process collects seldom (the runtime
// forces one every two minutes). After a burst of large messages the
// engine would so keep, for minutes, gigabytes it no longer uses. A
// Reclaimer notices when no collection has run for a while although the
// memory the runtime holds is above what it held after the last reclaim,
// and then collects twice and returns the free memory to the system, again
// at each quiet look while that gives back much. It costs nothing while the process is busy (collections run on
// their own then) and one collection of the live heap when it acts.
package reclaim

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// Reclaimer watches the runtime's memory (see the package doc).
type Reclaimer struct {
	// Slack is how much more memory than after the last reclaim the
	// runtime may hold before a quiet process is made to give it back.
	Slack    uint64
	samples  []metrics.Sample
	cycles   uint64
	baseline uint64
	fruitful bool // the last reclaim gave back more than the slack
	// Reclaims counts the reclaims, Returned the bytes they gave back
	// (read while Run goes on).
	Reclaims atomic.Uint64
	Returned atomic.Uint64
}

// New returns a Reclaimer with the given slack (0: 16 MiB).
func New(slack uint64) *Reclaimer {
	if slack == 0 {
		slack = 16 << 20
	}
	r := &Reclaimer{Slack: slack, samples: []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}}
	r.cycles, r.baseline = r.read()
	return r
}

// read returns the collections so far and the memory the runtime holds
// (mapped and not returned to the system).
func (r *Reclaimer) read() (cycles, held uint64) {
	metrics.Read(r.samples)
	return r.samples[0].Value.Uint64(), r.samples[1].Value.Uint64() - r.samples[2].Value.Uint64()
}

// Tick looks once. When no collection ran since the last Tick (the
// process is quiet) and either the last reclaim gave back more than the
// slack (memory the server let go of since may be waiting, its caches
// expire over seconds) or the runtime now holds more than the slack above
// what it held after the last reclaim, it collects twice, returns the
// free memory to the system, and reports the bytes given back. A reclaim
// that gives back less than the slack is the last until memory grows
// again: a quiet process with a steady heap pays for none.
func (r *Reclaimer) Tick() (returned uint64, acted bool) {
	cycles, held := r.read()
	quiet := cycles == r.cycles
	r.cycles = cycles
	if !quiet || (!r.fruitful && held <= r.baseline+r.Slack) {
		return 0, false
	}
	runtime.GC()
	debug.FreeOSMemory() // a second collection, then the free memory back
	var after uint64
	r.cycles, after = r.read()
	r.baseline = after
	r.Reclaims.Add(1)
	if held > after {
		returned = held - after
		r.Returned.Add(returned)
	}
	r.fruitful = returned > r.Slack
	return returned, true
}

// Run ticks every period until ctx ends; onReclaim, when set, is told of
// each reclaim.
func (r *Reclaimer) Run(ctx context.Context, period time.Duration, onReclaim func(returned uint64)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, ok := r.Tick(); ok && onReclaim != nil {
				onReclaim(n)
			}
		}
	}
}
