package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/mcpserver"
	"github.com/parley-engine/parley/service"
)

// server returns an MCP server over nc with options o.
func server(t *testing.T, nc *nats.Conn, o mcpserver.Options) *mcp.Server {
	t.Helper()
	o.Version = "test"
	srv, err := mcpserver.NewWithOptions(nc, o)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	m, isErr := callResult(t, cs, name, args)
	if isErr {
		t.Fatalf("%s: tool error %v", name, m)
	}
	return m
}

// refused calls a tool that must not take effect and returns its
// structured result.
func refused(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	m, isErr := callResult(t, cs, name, args)
	if !isErr {
		t.Fatalf("%s: no error: %v", name, m)
	}
	return m
}

func callResult(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	json.Unmarshal(b, &m)
	if m["outcome"] == nil {
		c, _ := json.Marshal(res.Content)
		t.Fatalf("%s: no verdict in the structured content %s (content %s)", name, b, c)
	}
	return m, res.IsError
}

// An agent, through MCP against a real engine: open a deliberation,
// publish a claim, ask its principal (the result carries binding_moment),
// read the state, verify a closure; over in-memory and streamable HTTP
// transports.
func TestMCP(t *testing.T) {
	ctx := context.Background()
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, _ := nats.Connect(s.NATSURL(), s.Participant())
	defer nc.Close()
	var envs struct {
		Vectors []struct {
			Name  string
			Input map[string]any
		}
	}
	b, _ := os.ReadFile("../binding/testdata/envelopes.json")
	json.Unmarshal(b, &envs)
	env := envs.Vectors[0].Input

	st, ct := mcp.NewInMemoryTransports()
	srv := server(t, nc, mcpserver.Options{Participant: "architect"})
	go srv.Run(ctx, st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	emits := map[string]bool{}
	for _, tl := range tools.Tools {
		emits[tl.Name] = tl.Meta[mcpserver.EmitsBindingMoment] == true
		if tl.OutputSchema == nil {
			t.Errorf("%s has no output schema", tl.Name)
		}
	}
	// One tool per artifact type, whose input schema is the type's draft
	// schema, rendered from the validator's payload rules.
	for _, typ := range events.Types {
		var found *mcp.Tool
		for _, tl := range tools.Tools {
			if tl.Name == mcpserver.PublishToolName(typ) {
				found = tl
			}
		}
		if found == nil {
			t.Fatalf("no tool for %s", typ)
		}
		got, _ := json.Marshal(found.InputSchema)
		want, _ := json.Marshal(mcpserver.DraftInputSchema(typ))
		if string(got) != string(want) {
			t.Errorf("%s: input schema %s, want %s", typ, got, want)
		}
	}
	if len(emits) != 14 || !emits["request_binding"] || emits["get_state"] {
		t.Fatalf("tools %v", emits)
	}

	// The charter names the principal, ceo, whom open_deliberation adds to
	// the participants it lists.
	id := call(t, cs, "open_deliberation", map[string]any{"title": "Share with the booking service?", "participants": []any{"architect", "judge"},
		"principal": "ceo"})["deliberation"].(string)
	pub := call(t, cs, "publish_artifact", map[string]any{"deliberation": id, "participant": "architect",
		"artifact": map[string]any{"artifact_type": "CLAIM", "payload": map[string]any{"statement": "Share the dates only."}, "references": []any{}}})
	if pub["accepted"] != true || pub["outcome"] != "accepted" || pub["position"] == nil || pub["ordinal"].(float64) != 2 {
		t.Fatalf("%v", pub)
	}
	claim := pub["artifact_id"].(string)
	jc := connect(t, server(t, nc, mcpserver.Options{Participant: "judge"}), nil)
	bm := call(t, jc, "request_binding", map[string]any{"deliberation": id, "participant": "judge", "outcome": "Ask the principal what to share.",
		"decides": []any{claim}, "envelope": env})
	got, _ := json.Marshal(bm["binding_moment"])
	want, _ := json.Marshal(env)
	e1, err1 := binding.ParseEnvelope(got)
	e2, _ := binding.ParseEnvelope(want)
	if err1 != nil || e1.Digest != e2.Digest || bm["envelope_digest"] != e2.Digest.String() || bm["principal"] != "ceo" {
		t.Fatalf("binding_moment %s (%v)", got, err1)
	}
	// The engine lists it, open.
	moments, err := s.Queries.Bindings(ctx, id)
	if err != nil || len(moments) != 1 || moments[0].Status != "open" || moments[0].Decision.String() != bm["decision"] || moments[0].Principal != "ceo" {
		t.Fatalf("%+v %v", moments, err)
	}
	// A malformed envelope is withheld (the agent-side veto).
	delete(env, "synopsis")
	if r := refused(t, jc, "request_binding", map[string]any{"deliberation": id, "participant": "judge",
		"outcome": "x", "decides": []any{claim}, "envelope": env}); r["outcome"] != "refused" || r["code"] != "envelope.missing_member" {
		t.Fatalf("a malformed envelope: %v", r)
	}
	// A charter the engine refuses: its code, and no deliberation.
	if r := refused(t, cs, "open_deliberation", map[string]any{"title": "Misspelt", "limits": map[string]any{"max_artifact": 3}}); r["outcome"] != "rejected" ||
		r["code"] != "control.invalid" || r["deliberation"] != nil || r["ordinal"] != nil {
		t.Fatalf("%v", r)
	}
	// Every refusal says why: the validator's code, with nothing published;
	// the engine's rejection, with its position and ordinal.
	if r := refused(t, cs, "publish_artifact", map[string]any{"deliberation": id, "participant": "architect",
		"artifact": map[string]any{"artifact_type": "OBJECTION", "payload": map[string]any{"statement": "No."},
			"references": []any{map[string]any{"artifact_id": claim, "relation": "objects-to"}}}}); r["outcome"] != "refused" ||
		r["code"] != "semantic.missing_blocking" || r["error_class"] != "invalid_artifact" || r["published"] != false {
		t.Fatalf("%v", r)
	}
	if r := refused(t, cs, "publish_objection", map[string]any{"deliberation": id, "participant": "architect",
		"payload": map[string]any{"statement": "No.", "blocking": "yes"}, "references": []any{map[string]any{"artifact_id": claim, "relation": "objects-to"}}}); r["outcome"] != "refused" ||
		r["code"] != "semantic.invalid_blocking" {
		t.Fatalf("%v", r)
	}
	if r := refused(t, cs, "publish_claim", map[string]any{"deliberation": id, "payload": 7}); r["outcome"] != "refused" || r["code"] != "mcp.invalid_argument" {
		t.Fatalf("%v", r)
	}
	// The server speaks as architect: a call naming anyone else is refused.
	if r := refused(t, cs, "publish_claim", map[string]any{"deliberation": id, "participant": "judge", "payload": map[string]any{"statement": "I am the judge."}}); r["outcome"] != "refused" ||
		r["code"] != "mcp.participant_mismatch" || r["published"] != false {
		t.Fatalf("%v", r)
	}
	ghost := "sha256:" + strings.Repeat("0", 64)
	if r := refused(t, cs, "publish_artifact", map[string]any{"deliberation": id, "participant": "architect",
		"artifact": map[string]any{"artifact_type": "CLAIM", "payload": map[string]any{"statement": "Yes."},
			"references": []any{map[string]any{"artifact_id": ghost, "relation": "supports"}}}}); r["outcome"] != "rejected" ||
		r["code"] != "reference.unavailable" || r["published"] != true || r["position"] == nil || r["ordinal"] == nil || r["message"] == "" {
		t.Fatalf("%v", r)
	}
	if r := refused(t, cs, "get_state", map[string]any{"deliberation": "0190a5b1-0000-7000-8000-000000000000"}); r["outcome"] != "error" || r["code"] != "not_found" {
		t.Fatalf("%v", r)
	}
	state := call(t, cs, "get_state", map[string]any{"deliberation": id})
	if state["status"] != "open" || state["artifacts"].(float64) != 2 || state["outcome"] != "ok" {
		t.Fatalf("%v", state)
	}
	cl := call(t, cs, "verify_closure", map[string]any{"deliberation": id, "decision": bm["decision"]})
	if cl["status"] != "provisional" {
		t.Fatalf("%v", cl)
	}

	// Streamable HTTP.
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(h)
	defer hs.Close()
	hc, err := mcp.NewClient(&mcp.Implementation{Name: "agent-http"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	if st := call(t, hc, "get_state", map[string]any{"deliberation": id}); st["status"] != "open" {
		t.Fatalf("%v", st)
	}
}
