// Package lease is how engines own partitions of the record: one key per
// partition in a JetStream key-value bucket, whose revision is the
// owner's fencing token.
//
// # Acquire, renew, expire
//
// An engine acquires partition p by creating its key (Leases.Acquire: a
// KV Create, which succeeds only when the key is absent, deleted, or
// expired). It holds the lease while it renews it (Leases.Renew: a KV
// Update conditional on the revision it holds); each renewal is a new
// revision. A renewal conditional on a revision that is not the key's
// last one fails: the renewer's lease is lost (ErrLost), and it must stop
// acting for the partition.
//
// A lease whose renewals stop expires by the bucket's MaxAge (the TTL of
// Config): the server removes the key's last revision TTL after it was
// written, and a contender polling the key (Leases.Wait) then acquires it.
// A takeover therefore happens at most TTL after the last renewal, plus
// the time the server takes to expire the message and the contender's
// poll (measured in the tests, docs/SCALING.md). The bucket has no delete
// markers (see Bucket).
//
// Why the bucket's MaxAge, and not a per-key TTL or an expiry time in the
// value: MaxAge is one policy, set on the bucket, that every lease obeys
// and no client can lengthen; it is judged by the server's clock alone
// (the time stamp the stream leader gave the message), so the engines'
// clocks need not agree; and every renewal, being a new message, restarts
// it. A per-message TTL (Nats-TTL) would have to ride on every renewal,
// which the KV Update of nats.go does not send, and each client could
// choose its own. An expiry time in the value would make each contender
// compare it with its own clock, and poll.
//
// # Fencing
//
// The revision is a fencing token: it only grows (it is the bucket's
// stream sequence), and each acquisition and renewal makes a new one. An
// owner paused past its TTL (a long GC pause, a partition from the
// servers) comes back with a revision that is no longer the key's last:
// its next renewal fails, and so does Leases.Check (a KV Get that
// compares revisions).
//
// Neither makes a single write safe alone: between a successful check and
// the write, the lease may expire and a new owner act. A write that must
// happen once (a deliberation's TERMINATION) is made safe by Guarded:
//
//  1. renew the lease (the KV update is the barrier: a stale owner stops
//     here);
//  2. publish conditional on the last sequence of the deliberation's
//     subjects the owner has read (Nats-Expected-Last-Subject-Sequence
//     with -Subject naming the deliberation's filter), stamped with the
//     lease (the Parley-Lease header: partition and revision).
//
// Step 2 is what makes a second TERMINATION impossible: a new owner
// reads the partition's record to its end before it acts, so it either
// sees the stale owner's TERMINATION (and writes none), or writes its own
// first, after which the stale owner's publish, conditional on a last
// sequence that is no longer the last, is refused (ErrConflict). Step 1
// makes that race rare: only a write delayed past TTL after a successful
// renewal can reach step 2 stale.
package lease
