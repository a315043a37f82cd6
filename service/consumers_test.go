package service_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/health"
	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/metrics"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// A participant creating consumers of the stream without end (each push
// one delivering the whole stream to an inbox it listens on, each pull
// one never pulled, each kept for an hour idle) makes the server hold no
// more than the engine's bound: past it the engine deletes each new one,
// the oldest stay, its own consumer is never touched (it goes on folding
// what the participants publish), and the bound is counted and named in
// /healthz.
func TestConsumers_Bounded(t *testing.T) {
	const bound, made = 8, 40
	s := startWith(t, service.Config{MaxConsumers: bound})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var names []string
	for i := range made {
		name := nuid.Next()
		cfg := map[string]any{"name": name, "deliver_policy": "all", "ack_policy": "none", "inactive_threshold": int64(time.Hour)}
		if i%4 != 3 { // three push consumers in four, and a pull one
			inbox := nats.NewInbox()
			if _, err := nc.Subscribe(inbox, func(*nats.Msg) {}); err != nil {
				t.Fatal(err)
			}
			cfg["deliver_subject"] = inbox
		}
		req, _ := json.Marshal(map[string]any{"stream_name": wire.StreamName, "config": cfg})
		m, err := nc.RequestWithContext(ctx, "$JS.API.CONSUMER.CREATE."+wire.StreamName+"."+name, req)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(m.Data), `"error"`) {
			t.Fatalf("creating consumer %d: %s", i, m.Data)
		}
		names = append(names, name)
	}
	js, _ := jetstream.New(s.Conn())
	stream, err := js.Stream(ctx, wire.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	// The engine's own ordered consumer and the bound's worth of the
	// participant's.
	var left []string
	if !eventually.Within(20*time.Second, func() bool {
		left = left[:0]
		l := stream.ListConsumers(ctx)
		for info := range l.Info() {
			left = append(left, info.Name)
		}
		return l.Err() == nil && len(left) == bound+1
	}) {
		t.Fatalf("the stream holds %d consumers, want the bound %d and the engine's own", len(left), bound)
	}
	for _, n := range names[:bound] {
		if !slices.Contains(left, n) {
			t.Errorf("an old consumer %s was deleted; the newest go first", n)
		}
	}
	// The engine still folds.
	alice, _ := client.New(nc, "alice")
	id, err := alice.Open(ctx, client.Charter{Title: "still folding?"})
	if err != nil {
		t.Fatal(err)
	}
	_, ack, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Yes."}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.WaitPosition(ctx, id, ack.Sequence); err != nil {
		t.Fatalf("the engine's consumer: %v", err)
	}
	// Counted, and named in /healthz.
	resp, err := http.Get("http://" + s.HTTPAddr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var h health.Health
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	var b metrics.Bound
	for _, x := range h.Bounds {
		if x.Name == metrics.CodeConsumers {
			b = x
		}
	}
	if b.Limit != bound || b.Hits < made-bound || !b.Recent || !slices.Contains(h.BoundsHit, metrics.CodeConsumers) {
		t.Errorf("/healthz: bound %+v, hit %v; want a limit of %d and %d hits or more", b, h.BoundsHit, bound, made-bound)
	}
	if n := metric(t, s, "parley_consumers_limited_total"); n < made-bound {
		t.Errorf("parley_consumers_limited_total %v, want %d or more", n, made-bound)
	}
}
