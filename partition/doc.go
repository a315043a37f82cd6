// Package partition is how parley's record is cut into a fixed number of
// logical partitions, and how the partitions are spread over JetStream
// streams: a function of a deliberation's id that every client computes,
// and that the NATS server computes too, by its own subject mapping.
//
// # The function
//
// A deliberation's partition is
//
//	Of(id) = FNV-1a-32(id) mod Count        (Count = 1024)
//
// over the bytes of the id as it appears in the subject (its canonical
// lowercase UUID form): the 32-bit FNV-1a hash (offset basis 2166136261,
// prime 16777619), reduced modulo 1024. It is exactly what nats-server's
// subject mapping function {{partition(1024,1)}} computes for the
// subject's first wildcard token: the server hashes the named tokens'
// bytes concatenated with no separator, and with one named token that is
// the token itself. A test checks the two agree, on a real server, for
// thousands of ids.
//
// # Mapped subjects
//
// The server rewrites what publishers send (Mappings, MappingBlock):
//
//	parley.<d>.art.<participant>  ->  parley.p.<n>.<d>.art.<participant>
//	parley.<d>.ctl                ->  parley.p.<n>.<d>.ctl
//
// where n = Of(d), so publishers keep publishing on the subjects of
// package wire, unchanged, and the stored subject carries its partition.
// Subject and Original convert between the two forms; Original refuses a
// stored subject whose partition token is not its deliberation's (a
// publish made directly to a mapped subject, with the wrong number).
// A publish made directly to a mapped subject is itself mapped away to
// Refused, where no stream listens and no permission allows publishing,
// so that only the server's mapping puts messages under parley.p.
//
// What the mapping changes for clients, each checked by the tests on a
// real server:
//   - Permissions are checked on the mapped subject, not the published
//     one: a participant's publish permission must name
//     parley.p.*.*.art.<token> (ParticipantPermission).
//   - Nats-Msg-Id deduplication works unchanged (it is per stream, and a
//     subject always maps to the same stream).
//   - Nats-Expected-Last-Subject-Sequence works unchanged (the server
//     compares with the last sequence of the stored, mapped subject).
//   - Nats-Expected-Last-Subject-Sequence-Subject is not mapped: the
//     filter it names must be the mapped one (DeliberationFilter). With
//     the unmapped filter the server finds no message, takes the last
//     sequence as 0, and the condition is checked against nothing.
//   - The stream a publish must land in (Nats-Expected-Stream) is the one
//     holding the partition (Layout.StreamOf), no longer a fixed name.
//
// # Streams
//
// NewLayout(n) spreads the partitions over n streams in contiguous
// ranges: stream k holds partitions [k*Count/n, (k+1)*Count/n), is named
// PARLEY_<first>_<last> (four digits each) and filters the mapped
// subjects of its partitions only (Range.Subjects).
package partition
