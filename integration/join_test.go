package integration

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/relay"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// An engine joins a fleet that is running, on a stream with a long
// history it has to fold first and more of it arriving, while another
// engine leaves: the new one answers reads (the query API is one queue
// group) before its projection has caught up, and every relay still
// completes with a verified closure. At this scale the fleet passes
// without the read-your-writes fixes too (the joined engine catches up
// within the reads' min_position wait); TestClient_PagesReadYourWrites
// and TestQueries_OutcomeFromALaggingReplica pin each fix on its own.
func TestCluster_EngineJoinsDuringFleet(t *testing.T) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	startEngine := func(i int) *service.Service {
		var s *service.Service
		var err error
		for deadline := time.Now().Add(30 * time.Second); ; {
			s, err = service.Start(ctx, service.Config{DataDir: t.TempDir(), NATS: c.urls(i), HTTP: "127.0.0.1:0", Replicas: 3, Logger: slog.New(&levelLog{})})
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	leaving, staying := startEngine(0), startEngine(1)
	defer staying.Close()

	// A history for the joining engine to fold before it has caught up.
	nc, err := nats.Connect(c.urls(2))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(256))
	old := uuid.NewString()
	if _, err := js.Publish(ctx, wire.ControlSubject(old), []byte(`{"op":"open","charter":{"title":"history"}}`)); err != nil {
		t.Fatal(err)
	}
	for i := range 40000 {
		a := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprint("history ", i)}})
		if _, err := js.PublishAsync(wire.ArtifactSubject(old, "historian"), a.Canonical); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("the history was not stored")
	}

	cfg, err := relay.Load("../examples/relay/fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg.WaitTermination = "60s" // a liveness bound (clusterFleet)
	const relays = 8
	var w turns
	sums := make([]*relay.Summary, relays)
	errs := make([]error, relays)
	var wg sync.WaitGroup
	for i := range relays {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[i], errs[i] = relay.Run(ctx, cfg, relay.Options{NATS: c.urls(i), Dir: filepath.Join(t.TempDir(), fmt.Sprint("run-", i)), Progress: &w})
		}()
	}
	for w.n.Load() < int64(relays*12*3)/4 {
		if ctx.Err() != nil {
			t.Fatal("the fleet did not get a quarter of the way")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// One engine leaves and another joins, from nothing, while a flood of
	// history keeps coming, so that the joined engine trails the stream's
	// head for the rest of the run.
	fctx, stopFlood := context.WithCancel(ctx)
	defer stopFlood()
	flooded := make(chan struct{})
	go func() {
		defer close(flooded)
		for i := 0; fctx.Err() == nil; i++ {
			a := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprint("more history ", i)}})
			if _, err := js.PublishAsync(wire.ArtifactSubject(old, "historian"), a.Canonical); err != nil {
				select {
				case <-js.PublishAsyncComplete():
				case <-fctx.Done():
				}
			}
		}
	}()
	leaving.Close()
	joined := startEngine(2)
	defer joined.Close()
	t.Logf("an engine left and one joined after %d turns, at position %d of its projection", w.n.Load(), joined.Runner.Position())
	wg.Wait()
	stopFlood()
	<-flooded
	for i := range relays {
		if errs[i] != nil {
			t.Errorf("relay %d: %v", i, errs[i])
			continue
		}
		if s := sums[i]; s.Termination != "completed" || !s.ClosureOK {
			t.Errorf("relay %d: %s, closure %v", i, s.Termination, s.ClosureOK)
		}
	}
}
