package relay_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/relay"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// killAfter closes the engine when the relay has printed n progress lines.
type killAfter struct {
	mu   sync.Mutex
	n    int
	stop func()
}

func (k *killAfter) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.n++
	if k.n == 4 {
		k.stop()
	}
	return len(p), nil
}

// A relay whose engine is lost mid-run (the NATS server and its stream
// stay) does not hang: once its reads have been retried for their time it
// records a FAILURE relay.engine_unavailable, cancels the deliberation,
// and Run returns an error that says so.
func TestRun_EngineLostFailsClosed(t *testing.T) {
	ns, err := embedded.Start(embedded.Config{Dir: t.TempDir(), Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.Stop(ns)
	url := ns.ClientURL()
	eng, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), NATS: url, HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { eng.Close() }) }
	defer stop()
	cfg, err := relay.Load("../examples/relay/fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sum, err := relay.Run(ctx, cfg, relay.Options{NATS: url, Dir: t.TempDir(), Progress: &killAfter{stop: stop},
		Client: client.Options{Timeout: 200 * time.Millisecond, RetryFor: time.Second}})
	if err == nil || !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "FAILURE "+relay.CodeEngineUnavailable+" recorded") ||
		!strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("run: %+v, %v; want a failed-closed error", sum, err)
	}

	// The record holds the FAILURE and the cancel.
	id := sum0(err)
	nc, _ := nats.Connect(url)
	defer nc.Close()
	js, _ := jetstream.New(nc)
	cons, err := js.OrderedConsumer(ctx, wire.StreamName, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	failures, cancels := 0, 0
	for {
		batch, err := cons.FetchNoWait(500)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			if m.Subject() == wire.ControlSubject(id) && strings.Contains(string(m.Data()), `"cancel"`) {
				cancels++
			}
			if a, err := events.Validate(m.Data()); err == nil && a.Type == events.TypeFailure {
				if f, _ := a.Payload.(*events.Failure); f != nil && f.Code == relay.CodeEngineUnavailable {
					failures++
				}
			}
		}
		if got == 0 {
			break
		}
	}
	if failures != 1 || cancels != 1 {
		t.Fatalf("%d FAILUREs %s and %d cancels in the record, want one each", failures, relay.CodeEngineUnavailable, cancels)
	}
}

// sum0 is the deliberation a failed-closed error names.
func sum0(err error) string {
	s := strings.TrimPrefix(err.Error(), "relay: deliberation ")
	id, _, _ := strings.Cut(s, " ")
	return id
}
