package ledger

import (
	"context"
	"errors"
	"fmt"
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
// in the one stream of partition.NewLayout(1), PARLEY_0000_1023, so that
// a position is still one stream's sequence.
//
// Publishers keep publishing on the subjects of package wire either way;
// what changes is the stream's name and subjects, the filter that names
// a deliberation's messages as stored (Filter: in a consumer, and in a
// Nats-Expected-Last-Subject-Sequence-Subject header, which the server
// does not map), and the subjects messages are delivered under (Original
// turns them back into the published ones).
type Layout struct {
	partitioned bool
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

// ErrLayout is returned, wrapped, for streams whose layout the engine
// does not support: both layouts at once, or a partitioned layout of more
// than one stream.
var ErrLayout = errors.New("ledger: not supported yet: one stream")

// LayoutOf returns the layout of the stream named name: PARLEY is the
// unpartitioned one, PARLEY_0000_1023 the partitioned one. Another
// stream of a partitioned layout (PARLEY_<first>_<last>, one of several)
// is ErrLayout; any other name, an error.
func LayoutOf(name string) (Layout, error) {
	switch {
	case name == wire.StreamName:
		return Unpartitioned, nil
	case name == partitionedStream.Name():
		return Partitioned, nil
	case strings.HasPrefix(name, wire.StreamName+"_"):
		return Layout{}, fmt.Errorf("%w: the stream %s holds part of the partitions (only %s, all of them, is supported)", ErrLayout, name, partitionedStream.Name())
	}
	return Layout{}, fmt.Errorf("ledger: %q is not a stream of parley's record", name)
}

// Detect finds which layout the server holds: the stream PARLEY, or
// PARLEY_0000_1023. ok is false when it holds neither. Both at once, or
// another stream of a partitioned layout (several streams), is
// ErrLayout.
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
	switch len(found) {
	case 0:
		return Layout{}, false, nil
	case 1:
		l, err := LayoutOf(found[0])
		return l, err == nil, err
	}
	return Layout{}, false, fmt.Errorf("%w: the server holds the streams %s", ErrLayout, strings.Join(found, ", "))
}

// Partitioned reports whether the layout is the partitioned one.
func (l Layout) Partitioned() bool { return l.partitioned }

// String is "partitioned" or "unpartitioned".
func (l Layout) String() string {
	if l.partitioned {
		return "partitioned"
	}
	return "unpartitioned"
}

// Stream is the name of the stream that holds every deliberation.
func (l Layout) Stream() string {
	if l.partitioned {
		return partitionedStream.Name()
	}
	return wire.StreamName
}

// Subjects are the stream's subjects.
func (l Layout) Subjects() []string {
	if l.partitioned {
		return partitionedStream.Subjects()
	}
	return append([]string(nil), wire.StreamSubjects...)
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

// StreamConfig is the stream's configuration (StreamConfig's, with the
// layout's name and subjects).
func (l Layout) StreamConfig(replicas int) jetstream.StreamConfig {
	cfg := StreamConfig(replicas)
	cfg.Name, cfg.Subjects = l.Stream(), l.Subjects()
	return cfg
}

// Check is the package's Check against the layout's subjects.
func (l Layout) Check(cfg jetstream.StreamConfig) error { return check(cfg, l.Subjects()) }

// Ensure is the package's Ensure for the layout's stream.
func (l Layout) Ensure(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.Stream, error) {
	return ensure(ctx, js, l, replicas, true)
}

// Existing is the package's Existing for the layout's stream.
func (l Layout) Existing(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	return ensure(ctx, js, l, 0, false)
}

// ReaderSubjects are the subjects a Reader of the layout's stream
// publishes on (the package's ReaderSubjects, for its stream).
func (l Layout) ReaderSubjects() []string { return readerSubjects(l.Stream()) }

// Read returns a Reader of the layout's stream: Read's, with filter a
// stored subject filter (Filter), and each message returned with the
// subject it was published on (Original; a misplaced one keeps its
// stored subject).
func (l Layout) Read(ctx context.Context, nc *nats.Conn, filter string, from uint64) (*Reader, error) {
	return read(ctx, nc, l, filter, from)
}

// Locate finds the record's stream by its name, the unpartitioned
// layout's first, and returns it with its layout: what a client that was
// told nothing reads with. It asks only for the streams' info
// ($JS.API.STREAM.INFO.<name>, which participants may ask), not for the
// list of streams. A server that holds neither is
// jetstream.ErrStreamNotFound.
func Locate(ctx context.Context, js jetstream.JetStream) (Layout, jetstream.Stream, error) {
	for _, l := range []Layout{Unpartitioned, Partitioned} {
		s, err := js.Stream(ctx, l.Stream())
		switch {
		case err == nil:
			return l, s, nil
		case !errors.Is(err, jetstream.ErrStreamNotFound):
			return Layout{}, nil, fmt.Errorf("ledger: look up stream %s: %w", l.Stream(), err)
		}
	}
	return Layout{}, nil, fmt.Errorf("ledger: neither %s nor %s: %w", Unpartitioned.Stream(), Partitioned.Stream(), jetstream.ErrStreamNotFound)
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
