package mcpserver

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/service"
)

// A deliberation's watcher lives as long as a session is subscribed: it
// stops at an unsubscribe, and after a session that ended without one
// (under the 2025-11-25 protocol, a session that ends sends no
// unsubscribe; under the newer one, its subscription stream ends with it).
func TestWatchers_Stop(t *testing.T) {
	for _, proto := range []string{"2025-11-25", ""} {
		t.Run("protocol "+proto, func(t *testing.T) { testWatchersStop(t, proto) })
	}
}

func testWatchersStop(t *testing.T, proto string) {
	ctx := context.Background()
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	srv, tl, err := newServer(nc, Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := client.New(nc, "alice")
	id, err := c.Open(ctx, client.Charter{Title: "watched"})
	if err != nil {
		t.Fatal(err)
	}
	watched := func() int {
		tl.watch.mu.Lock()
		defer tl.watch.mu.Unlock()
		return len(tl.watch.m)
	}
	updated := make(chan struct{}, 64)
	session := func() *mcp.ClientSession {
		st, ct := mcp.NewInMemoryTransports()
		go srv.Run(ctx, st)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, &mcp.ClientOptions{ResourceUpdatedHandler: func(context.Context, *mcp.ResourceUpdatedNotificationRequest) {
			updated <- struct{}{}
		}}).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: proto})
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: DeliberationURI(id)}); err != nil {
			t.Fatal(err)
		}
		return cs
	}
	publish := func(s string) {
		if _, _, err := c.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: s}}); err != nil {
			t.Fatal(err)
		}
	}

	a := session()
	eventually.True(t, 10*time.Second, "the subscription to start a watcher", func() bool { return watched() == 1 })
	if err := a.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: DeliberationURI(id)}); err != nil {
		t.Fatal(err)
	}
	// Under the newer protocol, an unsubscribe ends the subscription's
	// stream, and the server unsubscribes as the stream ends.
	eventually.True(t, 10*time.Second, "the unsubscribe to stop the watcher", func() bool { return watched() == 0 })

	b := session()
	publish("one")
	select {
	case <-updated:
	case <-time.After(10 * time.Second):
		t.Fatal("no notification")
	}
	b.Close()
	eventually.True(t, 10*time.Second, "the session to end", func() bool {
		n := 0
		for range srv.Sessions() {
			n++
		}
		return n == 1 // a's, open and unsubscribed
	})
	publish("two")
	eventually.True(t, 10*time.Second, "the watcher to stop", func() bool { return watched() == 0 })
	a.Close()
}
