package mcpserver_test

import (
	"context"
	"encoding/json"
	"os"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parley-engine/parley/mcpserver"
)

func envelope(t *testing.T) map[string]any {
	t.Helper()
	var envs struct {
		Vectors []struct {
			Name  string
			Input map[string]any
		}
	}
	b, err := os.ReadFile("../binding/testdata/envelopes.json")
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(b, &envs)
	return envs.Vectors[0].Input
}

// A binding moment is shown to anyone, and resolved only by a server that
// speaks as the deliberation's principal: through elicitation when its
// client can ask the user (a dismissed form publishes nothing), or with
// the resolution given. The engine judges it: a second resolution is
// rejected with its code.
func TestMCP_ResolveBinding(t *testing.T) {
	_, nc := startEngine(t)
	env := envelope(t)
	opts := env["question"].(map[string]any)["options"].([]any)
	second := opts[1].(map[string]any)["label"].(string)

	judge := connect(t, server(t, nc, mcpserver.Options{Participant: "judge"}), nil)
	id := call(t, judge, "open_deliberation", map[string]any{"title": "Share with the booking service?", "principal": "ceo"})["deliberation"].(string)
	claim := call(t, judge, "publish_claim", map[string]any{"deliberation": id, "payload": map[string]any{"statement": "Share the dates only."}})["artifact_id"]
	bm := call(t, judge, "request_binding", map[string]any{"deliberation": id, "outcome": "Ask the principal.", "decides": []any{claim}, "envelope": env})
	decision := bm["decision"].(string)
	args := map[string]any{"deliberation": id, "decision": decision}

	// The judge sees the moment, and may not resolve it.
	shown := call(t, judge, "resolve_binding", args)
	if shown["outcome"] != "ok" || shown["principal"] != "ceo" || len(shown["options"].([]any)) != len(opts) || shown["artifact_id"] != nil {
		t.Fatalf("%v", shown)
	}
	if r := refused(t, judge, "resolve_binding", map[string]any{"deliberation": id, "decision": decision, "resolution": "option", "option_idx": 0}); r["code"] != "binding.not_principal" {
		t.Fatalf("%v", r)
	}

	// The principal's server, with a client that cannot ask: shown.
	ceoSrv := server(t, nc, mcpserver.Options{Participant: "ceo"})
	plain := connect(t, ceoSrv, nil)
	if r := call(t, plain, "resolve_binding", args); r["outcome"] != "ok" || r["artifact_id"] != nil {
		t.Fatalf("%v", r)
	}
	// With a client that asks its user: dismissed, nothing is published;
	// then the second option is chosen and published.
	var asked atomic.Int32
	var answer atomic.Value
	answer.Store(&mcp.ElicitResult{Action: "cancel"})
	asking := connect(t, ceoSrv, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		if req.Params.Message == "" || req.Params.RequestedSchema == nil {
			t.Errorf("elicitation %+v", req.Params)
		}
		return answer.Load().(*mcp.ElicitResult), nil
	}})
	if r := refused(t, asking, "resolve_binding", args); r["code"] != "mcp.not_resolved" || asked.Load() != 1 {
		t.Fatalf("%v (asked %d)", r, asked.Load())
	}
	answer.Store(&mcp.ElicitResult{Action: "accept", Content: map[string]any{"choice": second}})
	r := call(t, asking, "resolve_binding", args)
	if r["outcome"] != "accepted" || r["resolution"] != "option" || r["artifact_id"] == nil || asked.Load() != 2 {
		t.Fatalf("%v", r)
	}
	w := call(t, judge, "wait_artifacts", map[string]any{"deliberation": id, "after": bm["ordinal"]})
	final := w["artifacts"].([]any)[0].(map[string]any)
	if final["participant"] != "ceo" || final["artifact"].(map[string]any)["payload"].(map[string]any)["outcome"] != second {
		t.Fatalf("%v", final)
	}
	// Resolved once: the engine rejects a second resolution.
	if r := refused(t, plain, "resolve_binding", map[string]any{"deliberation": id, "decision": decision, "resolution": "option", "option_idx": 0}); r["outcome"] != "rejected" || r["code"] != "binding.already_resolved" {
		t.Fatalf("%v", r)
	}
}
