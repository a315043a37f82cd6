package runner

import "time"

// SetSnapshotWriteHook makes r call f as each shard's snapshot starts
// being written, after its state is frozen.
func SetSnapshotWriteHook(r *Runner, f func(shard int)) { r.writeHook = f }

// ReadWouldWait reports whether a reader of deliberation id would first
// wait for the shard to apply messages it holds back for readers (its
// lock is wanted by the fold).
func ReadWouldWait(r *Runner, id string) bool {
	s := r.shardOf(id)
	s.mu.RLock()
	l := s.locks[id]
	s.mu.RUnlock()
	return l != nil && l.wanted.Load()
}

// SetObjectReadBase sets how long a read of an object may take besides
// the time its size allows, and returns a function that puts it back.
func SetObjectReadBase(d time.Duration) func() {
	old := objectReadBase
	objectReadBase = d
	return func() { objectReadBase = old }
}
