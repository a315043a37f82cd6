package mcpserver_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/mcpserver"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// A get_state after a publish_artifact carries the position the publish
// was acknowledged at (min_position), though each tool call has its own
// client: with several engines, the state read is never older than the
// server's own write.
func TestMCP_ReadYourWrites(t *testing.T) {
	ctx := context.Background()
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, _ := nats.Connect(s.NATSURL(), s.Participant())
	defer nc.Close()
	// A plain subscriber beside the engine's queue group (the operator
	// user may subscribe to the API) sees each state request, and answers
	// none.
	var mu sync.Mutex
	var mins []uint64
	c := s.Credentials()
	watch, err := nats.Connect(s.NATSURL(), nats.UserInfo(c.NATSUser, c.NATSPassword))
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	if _, err := watch.Subscribe(wire.MicroPrefix+".deliberation", func(m *nats.Msg) {
		var req struct {
			MinPosition uint64 `json:"min_position"`
		}
		json.Unmarshal(m.Data, &req)
		mu.Lock()
		mins = append(mins, req.MinPosition)
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}

	st, ct := mcp.NewInMemoryTransports()
	go server(t, nc, mcpserver.Options{Participant: "architect"}).Run(ctx, st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	id := call(t, cs, "open_deliberation", map[string]any{"title": "t"})["deliberation"].(string)
	pub := call(t, cs, "publish_artifact", map[string]any{"deliberation": id, "participant": "architect",
		"artifact": map[string]any{"artifact_type": "CLAIM", "payload": map[string]any{"statement": "s"}, "references": []any{}}})
	pos := uint64(pub["position"].(float64))
	mu.Lock()
	mins = nil
	mu.Unlock()
	state := call(t, cs, "get_state", map[string]any{"deliberation": id})
	if state["artifacts"].(float64) != 1 {
		t.Fatalf("%v", state)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(mins)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(mins) == 0 || mins[len(mins)-1] < pos {
		t.Fatalf("get_state asked with min_position %v, want at least %d (the publish's)", mins, pos)
	}
}
