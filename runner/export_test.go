package runner

// SetSnapshotWriteHook makes r call f as each shard's snapshot starts
// being written, after its state is frozen.
func SetSnapshotWriteHook(r *Runner, f func(shard int)) { r.writeHook = f }
