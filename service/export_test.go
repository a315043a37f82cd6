package service

// WaitingReads is the number of reads waiting for their min_position.
func WaitingReads(q *Queries) int64 { return q.waiting.Load() }
