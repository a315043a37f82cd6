package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/relay"
)

// A fake Anthropic Messages API speaking the real wire format.
func TestAnthropicAdapter(t *testing.T) {
	t.Setenv("PARLEY_TEST_ANTHROPIC", "sk-ant-test")
	var got map[string]any
	var key string
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if r.URL.Path != "/v1/messages" {
			http.Error(w, "no such path "+r.URL.Path, 404)
			return
		}
		json.NewDecoder(r.Body).Decode(&got)
		key = r.Header.Get("X-Api-Key")
		if key == "" {
			key = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		w.Header().Set("Content-Type", "application/json")
		if calls == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(529)
			w.Write([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"overloaded"}}`))
			return
		}
		text := "```json\n" + `{"artifact_type":"CLAIM","payload":{"statement":"A cache halves p99."},"references":[]}` + "\n```"
		json.NewEncoder(w).Encode(map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
			"content": []any{map[string]any{"type": "text", "text": text}}, "stop_reason": "end_turn", "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": 200, "output_tokens": 30}})
	}))
	defer srv.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "judge.json"), []byte(`[{"artifact_type":"DECISION","payload":{"outcome":"adopt","status":"final","objection_dispositions":[],"unresolved_issues":[]},"references":[{"artifact_id":"@last:CLAIM","relation":"decides"}]}]`), 0o644)
	cfg := `{"title":"anthropic","question":"cache?","rounds":1,"decider":"judge","participants":[
	  {"id":"claude","adapter":"anthropic","base_url":"` + srv.URL + `","model":"claude-test","api_key_env":"PARLEY_TEST_ANTHROPIC","max_tokens":512},
	  {"id":"judge","adapter":"script","script":"judge.json"}]}`
	os.WriteFile(filepath.Join(dir, "c.json"), []byte(cfg), 0o644)
	c, err := relay.Load(filepath.Join(dir, "c.json"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := relay.Run(ctx, c, relay.Options{Dir: dir, Progress: logWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Termination != "completed" || s.Tokens != 230 || s.InvalidOutputs != 0 {
		t.Fatalf("summary %+v", s)
	}
	if key != "sk-ant-test" || got["model"] != "claude-test" || got["max_tokens"] != float64(512) {
		t.Errorf("request %v key %q", got, key)
	}
}

func TestHuman(t *testing.T) {
	var out bytes.Buffer
	h := relay.NewHuman(strings.NewReader("objection\nThe sample is too small.\ny\n"), &out)
	claim := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "x"}})
	res, err := h.Take(context.Background(), relay.Turn{Round: 2, Participant: "pat", Role: "REVIEWER", Question: "cache?",
		Context: []relay.ContextArtifact{{Position: 3, Participant: "a", Artifact: claim.Canonical}}})
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	json.Unmarshal(res.Output, &d)
	p := d["payload"].(map[string]any)
	refs := d["references"].([]any)
	if d["artifact_type"] != "OBJECTION" || p["blocking"] != true || refs[0].(map[string]any)["artifact_id"] != claim.ID.String() {
		t.Errorf("draft %s", res.Output)
	}
	if !strings.Contains(out.String(), "round 2, pat (REVIEWER)") {
		t.Errorf("shown %q", out.String())
	}
}

// logWriter sends a run's progress to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
