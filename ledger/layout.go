package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/partition"
	"github.com/parley-engine/parley/wire"
)

// Layout is how the record is stored (docs/SCALING.md). Unpartitioned,
// the default: the one stream PARLEY holds the subjects as published
// (wire). Partitioned: the server's subject mapping
// (partition.MappingBlock) stores parley.<d>.art.<p> as
// parley.p.<n>.<d>.art.<p> and parley.<d>.ctl as parley.p.<n>.<d>.ctl,
// in the streams of partition.NewLayout(n): PARLEY_0000_1023 alone
// (Partitioned), or n streams of contiguous ranges of partitions
// (PartitionedOver).
//
// Publishers keep publishing on the subjects of package wire either way;
// what changes is the streams' names and subjects, the filter that names
// a deliberation's messages as stored (Filter: in a consumer, and in a
// Nats-Expected-Last-Subject-Sequence-Subject header, which the server
// does not map), the subjects messages are delivered under (Original
// turns them back into the published ones), and, over several streams,
// what a position is (Position).
type Layout struct {
	partitioned bool
	// streams is the number of streams of a partitioned layout, 0 for
	// one (so that the zero Layout is Unpartitioned and Partitioned is
	// one stream).
	streams int
}

// The two layouts of one stream.
var (
	Unpartitioned = Layout{}
	Partitioned   = Layout{partitioned: true}
)

// partitionedStream is the one stream of the partitioned layout.
var partitionedStream = func() partition.Range {
	l, err := partition.NewLayout(1)
	if err != nil {
		panic(err) // 1 is always a valid stream count
	}
	return l.Streams()[0]
}()

// PositionBits is how many low bits of a position are a stream's
// sequence: a position is k<<PositionBits | sequence, k the index of its
// stream in the layout (0 in a layout of one stream, where a position is
// the stream's sequence). With at most 1,024 streams a position stays
// below 2^53, a number every JSON reader holds exactly.
const PositionBits = 43

// MaxSequence is the largest stream sequence a position holds.
const MaxSequence = 1<<PositionBits - 1

// ErrLayout is returned, wrapped, for streams that form no layout the
// engine supports: both layouts at once, streams of two partitioned
// layouts, or a count of streams that is not a power of two.
var ErrLayout = errors.New("ledger: not one layout of the record")

// PartitionedOver is the partitioned layout over n streams, n a power of
// two from 1 to partition.Count (so that every stream holds as many
// partitions, and a stream's name says the layout it belongs to).
func PartitionedOver(n int) (Layout, error) {
	if n < 1 || n > partition.Count || n&(n-1) != 0 {
		return Layout{}, fmt.Errorf("%w: %d streams (want a power of two from 1 to %d)", ErrLayout, n, partition.Count)
	}
	if n == 1 {
		return Partitioned, nil
	}
	return Layout{partitioned: true, streams: n}, nil
}

// ranges is the partitions' assignment to the layout's streams.
func (l Layout) ranges() partition.Layout {
	pl, err := partition.NewLayout(l.N())
	if err != nil {
		panic(err) // N is always 1..Count
	}
	return pl
}

// N is the number of streams: 1, or the n of PartitionedOver.
func (l Layout) N() int { return max(l.streams, 1) }

// LayoutOf returns the layout of the stream named name: PARLEY is the
// unpartitioned one; PARLEY_<first>_<last> one of the n streams of
// PartitionedOver(n), n = 1024 / (last - first + 1) (PARLEY_0000_1023:
// Partitioned). Another name is an error.
func LayoutOf(name string) (Layout, error) {
	l, _, err := layoutOf(name)
	return l, err
}

// layoutOf is LayoutOf with the index of the stream in its layout.
func layoutOf(name string) (Layout, int, error) {
	if name == wire.StreamName {
		return Unpartitioned, 0, nil
	}
	rest, ok := strings.CutPrefix(name, wire.StreamName+"_")
	a, b, ok2 := strings.Cut(rest, "_")
	first, err1 := strconv.Atoi(a)
	last, err2 := strconv.Atoi(b)
	if !ok || !ok2 || err1 != nil || err2 != nil || len(a) != 4 || len(b) != 4 || first < 0 || last < first || last >= partition.Count {
		return Layout{}, 0, fmt.Errorf("ledger: %q is not a stream of parley's record", name)
	}
	size := last - first + 1
	l, err := PartitionedOver(partition.Count / size)
	if err != nil || partition.Count%size != 0 || first%size != 0 {
		return Layout{}, 0, fmt.Errorf("%w: the stream %s holds partitions %d to %d, not a range of a layout of equal streams", ErrLayout, name, first, last)
	}
	return l, first / size, nil
}

// Detect finds which layout the server holds: the stream PARLEY, or the
// streams of a partitioned layout. ok is false when it holds none. Both
// layouts at once, or streams of two partitioned layouts, is ErrLayout.
// Streams of the layout that are missing (a creation interrupted) are
// not an error: Ensure creates them.
func Detect(ctx context.Context, js jetstream.JetStream) (l Layout, ok bool, err error) {
	names := js.StreamNames(ctx)
	var found []string
	for n := range names.Name() {
		if n == wire.StreamName || strings.HasPrefix(n, wire.StreamName+"_") {
			found = append(found, n)
		}
	}
	if err := names.Err(); err != nil {
		return Layout{}, false, fmt.Errorf("ledger: list the streams: %w", err)
	}
	if len(found) == 0 {
		return Layout{}, false, nil
	}
	slices.Sort(found)
	for i, name := range found {
		fl, err := LayoutOf(name)
		if err != nil {
			return Layout{}, false, err
		}
		if i > 0 && fl != l {
			return Layout{}, false, fmt.Errorf("%w: the server holds the streams %s", ErrLayout, strings.Join(found, ", "))
		}
		l = fl
	}
	return l, true, nil
}

// Partitioned reports whether the layout is the partitioned one.
func (l Layout) Partitioned() bool { return l.partitioned }

// String is "unpartitioned", "partitioned", or "partitioned over <n>
// streams".
func (l Layout) String() string {
	switch {
	case !l.partitioned:
		return "unpartitioned"
	case l.streams > 1:
		return fmt.Sprintf("partitioned over %d streams", l.streams)
	}
	return "partitioned"
}

// Stream is the name of the layout's first stream: the one that holds
// every deliberation in a layout of one stream. Over several streams,
// StreamOf names a deliberation's and Streams every one.
func (l Layout) Stream() string { return l.StreamAt(0) }

// Streams are the names of the layout's streams, in order of their
// index.
func (l Layout) Streams() []string {
	out := make([]string, l.N())
	for k := range out {
		out[k] = l.StreamAt(k)
	}
	return out
}

// StreamAt is the name of the stream of index k (0 <= k < N).
func (l Layout) StreamAt(k int) string {
	if !l.partitioned {
		return wire.StreamName
	}
	if l.streams <= 1 {
		return partitionedStream.Name()
	}
	return l.ranges().Streams()[k].Name()
}

// Index is the index of the stream holding deliberation (0 in a layout
// of one stream).
func (l Layout) Index(deliberation string) int {
	if l.streams <= 1 {
		return 0
	}
	return l.ranges().StreamOf(partition.Of(deliberation))
}

// StreamOf is the name of the stream holding deliberation.
func (l Layout) StreamOf(deliberation string) string { return l.StreamAt(l.Index(deliberation)) }

// IndexOf is the index of the stream named name in the layout; ok is
// false for a stream that is not one of the layout's.
func (l Layout) IndexOf(name string) (k int, ok bool) {
	fl, k, err := layoutOf(name)
	if err != nil || fl != l {
		return 0, false
	}
	return k, true
}

// Position is the position of sequence seq of the stream of index k:
// k<<PositionBits | seq (seq itself in a layout of one stream).
func (l Layout) Position(k int, seq uint64) uint64 {
	return uint64(k)<<PositionBits | seq&MaxSequence
}

// Split is the stream index and sequence of a position (Position's
// inverse). A position whose index is not one of the layout's streams
// gives ok false.
func (l Layout) Split(position uint64) (k int, seq uint64, ok bool) {
	k = int(position >> PositionBits)
	return k, position & MaxSequence, k < l.N()
}

// Sequence is the stream sequence of a position (its low PositionBits).
func Sequence(position uint64) uint64 { return position & MaxSequence }

// PositionOf is the position of sequence seq of the stream named stream;
// ok is false for a stream that is not one of the layout's.
func (l Layout) PositionOf(stream string, seq uint64) (uint64, bool) {
	k, ok := l.IndexOf(stream)
	if !ok {
		return 0, false
	}
	return l.Position(k, seq), true
}

// Subjects are the first stream's subjects (SubjectsAt(0)).
func (l Layout) Subjects() []string { return l.SubjectsAt(0) }

// SubjectsAt are the subjects of the stream of index k.
func (l Layout) SubjectsAt(k int) []string {
	if !l.partitioned {
		return append([]string(nil), wire.StreamSubjects...)
	}
	if l.streams <= 1 {
		return partitionedStream.Subjects()
	}
	return l.ranges().Streams()[k].Subjects()
}

// Filter is the subject filter of everything stored for deliberation:
// wire.DeliberationFilter, or its mapped form
// (partition.DeliberationFilter). A consumer of one deliberation and a
// Nats-Expected-Last-Subject-Sequence-Subject header name it.
func (l Layout) Filter(deliberation string) string {
	if l.partitioned {
		return partition.DeliberationFilter(deliberation)
	}
	return wire.DeliberationFilter(deliberation)
}

// Stored is the subject a message published on subject is stored under:
// subject itself, or its mapped form for an artifact or control subject
// of the partitioned layout.
func (l Layout) Stored(subject string) string {
	if l.partitioned {
		if m, ok := partition.Subject(subject); ok {
			return m
		}
	}
	return subject
}

// Original is the subject a stored message was published on: stored
// itself, or, partitioned, the subject partition.Original recovers. A
// stored subject of the partitioned layout that is not the mapping's
// output (partition.ErrMisplaced, partition.ErrNotMapped) is returned
// unchanged with the error: it names no deliberation of package wire,
// and the fold rejects it as any malformed subject.
func (l Layout) Original(stored string) (string, error) {
	if !l.partitioned {
		return stored, nil
	}
	s, _, err := partition.Original(stored)
	if err != nil {
		return stored, err
	}
	return s, nil
}

// StreamConfig is the first stream's configuration (StreamConfigAt(0,
// replicas)).
func (l Layout) StreamConfig(replicas int) jetstream.StreamConfig {
	return l.StreamConfigAt(0, replicas)
}

// StreamConfigAt is the configuration of the stream of index k
// (StreamConfig's, with the stream's name and subjects).
func (l Layout) StreamConfigAt(k, replicas int) jetstream.StreamConfig {
	cfg := StreamConfig(replicas)
	cfg.Name, cfg.Subjects = l.StreamAt(k), l.SubjectsAt(k)
	return cfg
}

// Check is the package's Check against the first stream's subjects.
func (l Layout) Check(cfg jetstream.StreamConfig) error { return l.CheckAt(0, cfg) }

// CheckAt is the package's Check against the subjects of the stream of
// index k.
func (l Layout) CheckAt(k int, cfg jetstream.StreamConfig) error { return check(cfg, l.SubjectsAt(k)) }

// Ensure is the package's Ensure for the layout's first stream.
func (l Layout) Ensure(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.Stream, error) {
	return ensure(ctx, js, l, 0, replicas, true)
}

// Existing is the package's Existing for the layout's first stream.
func (l Layout) Existing(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	return ensure(ctx, js, l, 0, 0, false)
}

// EnsureAll is Ensure for every stream of the layout, in order of their
// index: a missing one is created, an existing one checked.
func (l Layout) EnsureAll(ctx context.Context, js jetstream.JetStream, replicas int) ([]jetstream.Stream, error) {
	return l.all(ctx, js, replicas, true)
}

// ExistingAll is Existing for every stream of the layout.
func (l Layout) ExistingAll(ctx context.Context, js jetstream.JetStream) ([]jetstream.Stream, error) {
	return l.all(ctx, js, 0, false)
}

func (l Layout) all(ctx context.Context, js jetstream.JetStream, replicas int, create bool) ([]jetstream.Stream, error) {
	out := make([]jetstream.Stream, l.N())
	for k := range out {
		s, err := ensure(ctx, js, l, k, replicas, create)
		if err != nil {
			return nil, err
		}
		out[k] = s
	}
	return out, nil
}

// ReaderSubjects are the subjects a Reader of the layout's streams
// publishes on (the package's ReaderSubjects, for each stream).
func (l Layout) ReaderSubjects() []string {
	var out []string
	for _, name := range l.Streams() {
		out = append(out, readerSubjects(name)...)
	}
	return slices.Compact(out)
}

// Read returns a Reader of the layout's record: Read's, with filter a
// stored subject filter (Filter), and each message returned with the
// subject it was published on (Original; a misplaced one keeps its
// stored subject). A deliberation's filter reads the stream that holds
// it. Over several streams, a filter of every message ("") reads every
// stream at once, each in its order (a deliberation's messages are in
// one stream, so they come in order), and from must be 0: a position
// names one stream's sequence. From is a position of the layout.
func (l Layout) Read(ctx context.Context, nc *nats.Conn, filter string, from uint64) (*Reader, error) {
	if l.N() == 1 {
		return read(ctx, nc, l, 0, filter, from)
	}
	if p, ok := filterPartition(filter); ok {
		k := l.ranges().StreamOf(p)
		if from > 0 {
			fk, _, _ := l.Split(from)
			if fk != k {
				return nil, fmt.Errorf("ledger: read %s from position %d: the position is in stream %s, not %s", filter, from, l.StreamAt(fk), l.StreamAt(k))
			}
		}
		return read(ctx, nc, l, k, filter, from)
	}
	if from > 0 {
		return nil, fmt.Errorf("ledger: read %q from position %d: over %d streams a read of more than one deliberation starts at the beginning", filter, from, l.N())
	}
	return readAll(ctx, nc, l, filter)
}

// filterPartition is the partition a stored filter names
// (parley.p.<n>.…), if it names one.
func filterPartition(filter string) (int, bool) {
	rest, ok := strings.CutPrefix(filter, partition.Prefix)
	if !ok {
		return 0, false
	}
	tok, _, _ := strings.Cut(rest, ".")
	p, err := strconv.Atoi(tok)
	if err != nil || p < 0 || p >= partition.Count || strconv.Itoa(p) != tok {
		return 0, false
	}
	return p, true
}

// locateLayouts are the layouts Locate tries, in order: PARLEY, then the
// partitioned layouts of 1, 2, 4, … streams, by their first stream.
var locateLayouts = func() []Layout {
	out := []Layout{Unpartitioned}
	for n := 1; n <= partition.Count; n *= 2 {
		l, _ := PartitionedOver(n)
		out = append(out, l)
	}
	return out
}()

// InfoSubjects are the stream-info requests Locate makes: what a client
// that was told nothing needs permission for.
func InfoSubjects() []string {
	out := make([]string, len(locateLayouts))
	for i, l := range locateLayouts {
		out[i] = "$JS.API.STREAM.INFO." + l.Stream()
	}
	return out
}

// Locate finds the record's layout by its first stream's name, the
// unpartitioned layout's first, then the partitioned layouts' of 1, 2,
// 4, … streams, and returns it with that stream: what a client that was
// told nothing reads with. It asks only for the streams' info
// ($JS.API.STREAM.INFO.<name>, which participants may ask), not for the
// list of streams. A server that holds none is
// jetstream.ErrStreamNotFound.
func Locate(ctx context.Context, js jetstream.JetStream) (Layout, jetstream.Stream, error) {
	for _, l := range locateLayouts {
		s, err := js.Stream(ctx, l.Stream())
		switch {
		case err == nil:
			return l, s, nil
		case !errors.Is(err, jetstream.ErrStreamNotFound):
			return Layout{}, nil, fmt.Errorf("ledger: look up stream %s: %w", l.Stream(), err)
		}
	}
	return Layout{}, nil, fmt.Errorf("ledger: neither %s nor a partitioned record's first stream (%s, …): %w", Unpartitioned.Stream(), Partitioned.Stream(), jetstream.ErrStreamNotFound)
}

// LocateFor is Locate, returning the stream that holds deliberation
// (the first stream in a layout of one).
func LocateFor(ctx context.Context, js jetstream.JetStream, deliberation string) (Layout, jetstream.Stream, error) {
	l, s, err := Locate(ctx, js)
	if err != nil || l.N() == 1 {
		return l, s, err
	}
	name := l.StreamOf(deliberation)
	s, err = js.Stream(ctx, name)
	if err != nil {
		return Layout{}, nil, fmt.Errorf("ledger: look up stream %s: %w", name, err)
	}
	return l, s, nil
}

// LocateConn is Locate over a connection: the record's layout, for a
// Reader of it (Layout.Read).
func LocateConn(ctx context.Context, nc *nats.Conn) (Layout, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return Layout{}, err
	}
	l, _, err := Locate(ctx, js)
	return l, err
}

// GetMsg reads the message at a position of the record from its
// streams (the layout's, in order of their index; one for a layout of
// one stream, where a position is the stream's sequence). The message's
// Sequence is the position. A position of no stream given is
// jetstream.ErrMsgNotFound.
func GetMsg(ctx context.Context, streams []jetstream.Stream, position uint64) (*jetstream.RawStreamMsg, error) {
	if len(streams) == 1 {
		return streams[0].GetMsg(ctx, position)
	}
	k := int(position >> PositionBits)
	if k >= len(streams) {
		return nil, jetstream.ErrMsgNotFound
	}
	m, err := streams[k].GetMsg(ctx, Sequence(position))
	if err != nil {
		return nil, err
	}
	m.Sequence = position
	return m, nil
}

// MsgPosition is the position of a message delivered from a stream of the
// record (its metadata): the stream's sequence, with the stream's index
// in a partitioned layout of several streams (Layout.Position).
func MsgPosition(meta *nats.MsgMetadata) uint64 {
	l, k, err := layoutOf(meta.Stream)
	if err != nil {
		return meta.Sequence.Stream
	}
	return l.Position(k, meta.Sequence.Stream)
}
