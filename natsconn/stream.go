package natsconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/ledger"
)

// Stream says how the engine sets its stream up at start.
type Stream struct {
	// Replicas of the stream when the engine creates it.
	Replicas int
	// Layout is the record's layout the engine creates, and expects.
	Layout ledger.Layout
	// Adopt, on a cluster, takes the layout of the stream the server
	// holds when it is the partitioned one and Layout is not: the
	// cluster's configuration, not the engine's, carries the mapping.
	// Without Adopt (the embedded server, whose mapping the engine
	// installs) a stream of the other layout is refused.
	Adopt bool
	// DataDir is the engine's data directory, and Snapshot where the
	// projection's snapshots of the unpartitioned record are kept in it
	// (Snapshot.<i>-of-<n>; SnapshotName for the partitioned one).
	DataDir, Snapshot string
	// Held, when set, names a snapshot kept elsewhere (an object of the
	// snapshot bucket; "" when there is none), which says a record was
	// folded as the files do.
	Held   func(ctx context.Context) (string, error)
	Logger *slog.Logger
}

// EnsureStream creates or checks the stream (Layout.Ensure), each attempt
// with a short deadline of its own: a cluster that is still electing its
// JetStream leader drops the requests it gets meanwhile, and a request
// that waited for the whole of ctx would miss the leader elected a moment
// later. An unsafe stream or a refusal ends it at once; ctx ends the wait.
//
// A data directory that holds snapshots was folded from a stream, which
// must still be there: an engine started after the stream was deleted
// would otherwise create an empty one and serve it as the record, the
// history it folded gone without a word. It refuses to start instead.
//
// It first finds which layout the server holds (ledger.Detect): both
// layouts, or streams of two partitioned layouts, is refused
// (ledger.ErrLayout);
// one of the other layout than c.Layout too, unless c.Adopt takes it.
// The stream's layout is ledger.LayoutOf its name.
//
// Over several streams (a partitioned layout of more than one), it
// returns every stream of the layout, in order of their index, created
// or checked as one is.
func EnsureStream(ctx context.Context, js jetstream.JetStream, c Stream) ([]jetstream.Stream, error) {
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var st []jetstream.Stream
		var snaps []string
		l, err := layout(actx, js, c)
		if err == nil {
			for k := range l.N() {
				found, _ := filepath.Glob(filepath.Join(c.DataDir, SnapshotNameAt(c.Snapshot, l, k)+".*-of-*"))
				snaps = append(snaps, found...)
			}
		}
		var held string
		if err == nil && len(snaps) == 0 && c.Held != nil {
			held, err = c.Held(actx)
		}
		switch {
		case errors.Is(err, ledger.ErrLayout), errors.Is(err, errOtherLayout):
			cancel()
			return nil, err
		case err != nil:
		case len(snaps) > 0:
			st, err = l.ExistingAll(actx, js)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				cancel()
				return nil, fmt.Errorf("service: the stream %s does not exist, but %s holds snapshots of one (%s): the record this engine folded is gone. Restore the stream (the server's backup, or engine import of the exports), or start on a fresh --data directory", l.Stream(), c.DataDir, filepath.Base(snaps[0]))
			}
		case held != "":
			st, err = l.ExistingAll(actx, js)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				cancel()
				return nil, fmt.Errorf("service: the stream %s does not exist, but the snapshot bucket holds snapshots of one (%s): the record they were folded from is gone. Restore the stream (the server's backup, or engine import of the exports), or remove those snapshots (another --snapshot-prefix, or delete the bucket)", l.Stream(), held)
			}
		default:
			st, err = l.EnsureAll(actx, js, c.Replicas)
		}
		cancel()
		retry := ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders) ||
			errors.Is(err, jetstream.ErrNoStreamResponse) || ledger.IsJetStreamNotAvailable(err))
		if !retry {
			if err != nil && ctx.Err() != nil {
				return nil, fmt.Errorf("%w (the stream did not answer: is JetStream up, with a leader?)", err)
			}
			return st, err
		}
		if attempt%5 == 1 {
			log.Info("waiting for JetStream", "attempt", attempt, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// SnapshotName is the name of the projection's snapshots in the data
// directory for the record's layout: base for the unpartitioned record,
// and base after the stream's name for the partitioned one
// (PARLEY_0000_1023.projection.snapshot), so that a projection folded
// from one stream is never restored over the other (an engine on a
// cluster reads whichever layout it finds).
func SnapshotName(base string, l ledger.Layout) string { return SnapshotNameAt(base, l, 0) }

// SnapshotNameAt is SnapshotName for the stream of index k of the layout:
// each stream of a partitioned layout has its own snapshots, named after
// it.
func SnapshotNameAt(base string, l ledger.Layout, k int) string {
	if !l.Partitioned() {
		return base
	}
	return l.StreamAt(k) + "." + base
}

// errOtherLayout is returned, wrapped, for a stream of the other layout
// than the engine was told, which it does not adopt.
var errOtherLayout = errors.New("service: the record has the other layout")

// layout is the layout EnsureStream sets up: the server's, if it holds a
// stream of one, else c.Layout.
func layout(ctx context.Context, js jetstream.JetStream, c Stream) (ledger.Layout, error) {
	found, ok, err := ledger.Detect(ctx, js)
	switch {
	case err != nil:
		return ledger.Layout{}, err
	case !ok, found == c.Layout:
		return c.Layout, nil
	case c.Adopt && found.Partitioned():
		if c.Logger != nil {
			c.Logger.Info("the cluster holds the partitioned record: reading it", "streams", found.N(), "first", found.Stream())
		}
		return found, nil
	case found.Partitioned() && c.Layout.Partitioned():
		return ledger.Layout{}, fmt.Errorf("%w: the server holds the record %s (%s), and the engine was started with --streams %d: the count of streams is chosen when the record is created", errOtherLayout, found, strings.Join(found.Streams(), ", "), c.Layout.N())
	case found.Partitioned():
		return ledger.Layout{}, fmt.Errorf("%w: the server holds the stream %s (the partitioned record), and the engine was started without --partitioned", errOtherLayout, found.Stream())
	}
	return ledger.Layout{}, fmt.Errorf("%w: the server holds the stream %s (the unpartitioned record), and the engine was started with --partitioned: export its deliberations and import them into a fresh engine started with --partitioned", errOtherLayout, found.Stream())
}
