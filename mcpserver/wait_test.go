package mcpserver_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/mcpserver"
	"github.com/parley-engine/parley/service"
)

// startEngine starts a real engine (embedded NATS) and connects to it.
func startEngine(t testing.TB) (*service.Service, *nats.Conn) {
	t.Helper()
	return startEngineOn(t, false)
}

// startEngineOn is startEngine on the record's layout, partitioned or not.
func startEngineOn(t testing.TB, partitioned bool) (*service.Service, *nats.Conn) {
	t.Helper()
	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", Partitioned: partitioned})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return s, nc
}

// connect serves srv to a new in-memory client session.
func connect(t *testing.T, srv *mcp.Server, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, ct := mcp.NewInMemoryTransports()
	go srv.Run(ctx, st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// wait_artifacts waits for the next artifacts after an ordinal, answers
// timed_out when none comes, and at once when the deliberation has
// ended; a subscriber to the deliberation's resource is told when it
// moves. On both layouts of the record (docs/SCALING.md).
func TestMCP_WaitArtifacts(t *testing.T) {
	for _, partitioned := range []bool{false, true} {
		t.Run(map[bool]string{false: "unpartitioned", true: "partitioned"}[partitioned], func(t *testing.T) { waitArtifacts(t, partitioned) })
	}
}

func waitArtifacts(t *testing.T, partitioned bool) {
	ctx := context.Background()
	_, nc := startEngineOn(t, partitioned)
	srv := server(t, nc, mcpserver.Options{MaxWait: 20 * time.Second})
	updated := make(chan string, 16)
	cs := connect(t, srv, &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		updated <- req.Params.URI
	}})
	id := call(t, cs, "open_deliberation", map[string]any{"title": "Which cache?"})["deliberation"].(string)

	// Nothing after the open: the wait times out, after its timeout.
	start := time.Now()
	w := call(t, cs, "wait_artifacts", map[string]any{"deliberation": id, "timeout_seconds": 1})
	if w["timed_out"] != true || w["artifacts"] != nil || time.Since(start) < time.Second {
		t.Fatalf("%v after %s", w, time.Since(start))
	}
	uri := mcpserver.DeliberationURI(id)
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}

	// A wait under way returns the claim another participant publishes.
	got := make(chan map[string]any, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait_artifacts", Arguments: map[string]any{"deliberation": id}})
		if err != nil {
			t.Error(err)
			got <- nil
			return
		}
		b, _ := json.Marshal(res.StructuredContent)
		var m map[string]any
		json.Unmarshal(b, &m)
		got <- m
	}()
	c, err := client.New(nc, "alice")
	if err != nil {
		t.Fatal(err)
	}
	claim, _, err := c.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "An LRU of 10,000 entries."}})
	if err != nil {
		t.Fatal(err)
	}
	w = <-got
	arts, _ := w["artifacts"].([]any)
	if len(arts) != 1 || w["outcome"] != "ok" || w["timed_out"] != nil {
		t.Fatalf("%v", w)
	}
	a := arts[0].(map[string]any)
	if a["artifact_id"] != claim.ID.String() || a["participant"] != "alice" || a["ordinal"].(float64) != 2 ||
		a["artifact"].(map[string]any)["payload"].(map[string]any)["statement"] != "An LRU of 10,000 entries." || w["next_after"].(float64) != 2 {
		t.Fatalf("%v", a)
	}
	select {
	case u := <-updated:
		if u != uri {
			t.Fatalf("updated %s", u)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no resource-updated notification")
	}
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	var view map[string]any
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &view); err != nil || view["artifacts"].(float64) != 1 || view["id"] != id {
		t.Fatalf("%s %v", res.Contents[0].Text, err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.DeliberationURI("0190a5b1-0000-7000-8000-000000000000")}); err == nil {
		t.Fatal("an unknown deliberation's resource was read")
	}

	// After the claim, once the deliberation has ended: at once.
	if err := c.Cancel(ctx, id, "enough"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		w = call(t, cs, "wait_artifacts", map[string]any{"deliberation": id, "after": 2, "timeout_seconds": 10})
		if w["status"] == "cancelled" || time.Now().After(deadline) {
			break
		}
	}
	if w["status"] != "cancelled" {
		t.Fatalf("%v", w)
	}
	if r := refused(t, cs, "wait_artifacts", map[string]any{"deliberation": id, "limit": 1000}); r["code"] != "mcp.invalid_argument" {
		t.Fatalf("%v", r)
	}
}
