package mcpserver_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/mcpserver"
)

// BenchmarkWaitArtifacts measures the time from another participant's
// publish to a wait_artifacts call (made before it, in-memory transport,
// embedded engine) returning the artifact: how soon an agent that waits
// holds what was published.
func BenchmarkWaitArtifacts(b *testing.B) {
	ctx := context.Background()
	_, nc := startEngine(b)
	srv, err := mcpserver.NewWithOptions(nc, mcpserver.Options{Version: "bench", Participant: "critic"})
	if err != nil {
		b.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	go srv.Run(ctx, st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	c, _ := client.New(nc, "architect")
	id, err := c.Open(ctx, client.Charter{Title: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.State(ctx, id); err != nil { // the open projected
		b.Fatal(err)
	}
	after := 1.0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got := make(chan map[string]any, 1)
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait_artifacts", Arguments: map[string]any{"deliberation": id, "after": after}})
			if err != nil {
				b.Error(err)
				got <- nil
				return
			}
			raw, _ := json.Marshal(res.StructuredContent)
			var m map[string]any
			json.Unmarshal(raw, &m)
			got <- m
		}()
		if _, _, err := c.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "claim " + strconv.Itoa(i)}}); err != nil {
			b.Fatal(err)
		}
		m := <-got
		arts, _ := m["artifacts"].([]any)
		if len(arts) == 0 {
			b.Fatalf("%v", m)
		}
		after = m["next_after"].(float64)
	}
}
