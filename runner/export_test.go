package runner

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
