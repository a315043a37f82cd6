package service_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/readmodel"
)

// lagging is a stream whose direct reads come from a replica that has
// stored nothing after behind (a follower catching up).
type lagging struct {
	jetstream.Stream
	behind uint64
}

func (l lagging) GetMsg(ctx context.Context, seq uint64, opts ...jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error) {
	if seq > l.behind {
		return nil, jetstream.ErrMsgNotFound
	}
	return l.Stream.GetMsg(ctx, seq, opts...)
}

// A verdict asked of an engine whose projection has applied the message,
// but whose read of it was answered by a replica that has not stored it
// yet, is "ask again" (503 unavailable, which clients retry), never "not
// found" (which made a relay give up a charter it had just opened). A
// position past the projection is still not found.
func TestQueries_OutcomeFromALaggingReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := start(t, t.TempDir())
	defer s.Close()
	c, _ := client.New(dial(t, s), "alice")
	id := uuid.NewString()
	ack, err := c.Control(ctx, id, client.Control{Op: "open", Charter: &client.Charter{Title: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Runner.WaitFor(ctx, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	q := readmodel.New(readmodel.Config{Runner: s.Runner, Stream: lagging{s.Stream, ack.Sequence - 1}})
	var ae *api.Error
	if _, err := q.Outcome(ctx, id, ack.Sequence, ""); !errors.As(err, &ae) || ae.Kind != api.KindUnavailable {
		t.Fatalf("a projected position the replica lacks: %v, want unavailable", err)
	}
	if _, err := q.Outcome(ctx, id, ack.Sequence+1000, ""); !errors.As(err, &ae) || ae.Kind != api.KindNotFound {
		t.Fatalf("a position past the projection: %v, want not found", err)
	}
	good := readmodel.New(readmodel.Config{Runner: s.Runner, Stream: s.Stream})
	if o, err := good.Outcome(ctx, id, ack.Sequence, ""); err != nil || !o.Took() {
		t.Fatalf("from the stream itself: %+v %v", o, err)
	}
}
