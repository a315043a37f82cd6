package natsconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/wire"
)

// Stream says how the engine sets its stream up at start.
type Stream struct {
	// Replicas of the stream when the engine creates it.
	Replicas int
	// DataDir is the engine's data directory, and Snapshot where the
	// projection's snapshots are kept in it (Snapshot.<i>-of-<n>).
	DataDir, Snapshot string
	// Held, when set, names a snapshot kept elsewhere (an object of the
	// snapshot bucket; "" when there is none), which says a record was
	// folded as the files do.
	Held   func(ctx context.Context) (string, error)
	Logger *slog.Logger
}

// EnsureStream creates or checks the stream (ledger.Ensure), each attempt
// with a short deadline of its own: a cluster that is still electing its
// JetStream leader drops the requests it gets meanwhile, and a request
// that waited for the whole of ctx would miss the leader elected a moment
// later. An unsafe stream or a refusal ends it at once; ctx ends the wait.
//
// A data directory that holds snapshots was folded from a stream, which
// must still be there: an engine started after the stream was deleted
// would otherwise create an empty one and serve it as the record, the
// history it folded gone without a word. It refuses to start instead.
func EnsureStream(ctx context.Context, js jetstream.JetStream, c Stream) (jetstream.Stream, error) {
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	snaps, _ := filepath.Glob(filepath.Join(c.DataDir, c.Snapshot+".*-of-*"))
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var st jetstream.Stream
		var err error
		var held string
		if len(snaps) == 0 && c.Held != nil {
			held, err = c.Held(actx)
		}
		switch {
		case err != nil:
		case len(snaps) > 0:
			st, err = ledger.Existing(actx, js)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				cancel()
				return nil, fmt.Errorf("service: the stream %s does not exist, but %s holds snapshots of one (%s): the record this engine folded is gone. Restore the stream (the server's backup, or engine import of the exports), or start on a fresh --data directory", wire.StreamName, c.DataDir, filepath.Base(snaps[0]))
			}
		case held != "":
			st, err = ledger.Existing(actx, js)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				cancel()
				return nil, fmt.Errorf("service: the stream %s does not exist, but the snapshot bucket holds snapshots of one (%s): the record they were folded from is gone. Restore the stream (the server's backup, or engine import of the exports), or remove those snapshots (another --snapshot-prefix, or delete the bucket)", wire.StreamName, held)
			}
		default:
			st, err = ledger.Ensure(actx, js, c.Replicas)
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
