package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/relay"
)

func TestExample_TwelveRound(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 12 rounds with a go run participant")
	}
	cfg, err := relay.Load("../examples/relay/twelve-round.json")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	s, err := relay.Run(ctx, cfg, relay.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if s.Termination != "completed" || !s.ClosureOK || s.Rounds != 12 || s.FinalDecision == "" || s.InvalidOutputs != 0 {
		t.Fatalf("summary %+v", s)
	}
	want := map[events.Type]int{events.TypeClaim: 1, events.TypeRevision: 11, events.TypeObjection: 12, events.TypeEvidence: 12, events.TypeDecision: 1, events.TypeTermination: 1}
	for k, n := range want {
		if s.Counts[k] != n {
			t.Errorf("%s: %d, want %d", k, s.Counts[k], n)
		}
	}
	if s.ObjectionsDisposed != 4 || s.Participants["critic"] != 12 {
		t.Errorf("summary %+v", s)
	}
	report, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || !strings.Contains(string(report), "| termination | **completed** (#51, ") {
		t.Errorf("report: %v %s", err, report)
	}
}

func TestExample_FullHistoryStress(t *testing.T) {
	cfg, err := relay.Load("../examples/relay/full-history-stress.json")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	s, err := relay.Run(ctx, cfg, relay.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if s.Termination != "cancelled" || s.InvalidOutputs != 3 || s.Counts[events.TypeFailure] != 3 || s.Counts[events.TypeTermination] != 1 || s.FailedClosed == "" {
		t.Fatalf("summary %+v", s)
	}
	raw, _ := filepath.Glob(filepath.Join(dir, "invalid", "*-attempt-?.txt"))
	causes, _ := filepath.Glob(filepath.Join(dir, "invalid", "*.cause.txt"))
	if len(raw) != 3 || len(causes) != 3 {
		t.Errorf("kept %d raw answers, %d causes", len(raw), len(causes))
	}
	// A failed run lists every FAILURE, with its reason.
	report, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	for _, f := range s.Failures {
		if !strings.Contains(string(report), fmt.Sprintf("| %d | estimator | `%s` | ", f.Ordinal, f.Code)) || f.Reason == "" {
			t.Errorf("report.md lacks FAILURE %+v", f)
		}
	}
	if len(s.Failures) != 3 {
		t.Errorf("failures %+v", s.Failures)
	}
}

// fakeOpenAI speaks the Chat Completions wire format; each request takes
// the next behaviour.
type fakeOpenAI struct {
	mu       sync.Mutex
	behave   []string
	requests []map[string]any
	auth     []string
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req map[string]any
	json.NewDecoder(r.Body).Decode(&req)
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	b := "ok"
	if len(f.behave) > 0 {
		b, f.behave = f.behave[0], f.behave[1:]
	}
	f.mu.Unlock()
	if rf, _ := req["response_format"].(map[string]any); b == "no-schema" && rf["type"] == "json_schema" {
		f.mu.Lock()
		f.behave = append([]string{"no-schema"}, f.behave...) // stays refused
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		w.Write([]byte(`{"error":{"message":"response_format json_schema is not supported","type":"invalid_request_error"}}`))
		return
	}
	if r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "no such path "+r.URL.Path, 404)
		return
	}
	content := `{"artifact_type":"CLAIM","payload":{"statement":"A cache halves p99.","content":"","provenance_class":"","blocking":false,"outcome":"","status":"","objection_dispositions":[],"unresolved_issues":[]},"references":[]}`
	finish := "stop"
	switch b {
	case "429":
		w.Header().Set("Retry-After", "0")
		http.Error(w, `{"error":{"message":"rate limited","type":"rate_limit"}}`, http.StatusTooManyRequests)
		return
	case "500":
		http.Error(w, `{"error":{"message":"boom"}}`, 500)
		return
	case "drop":
		hj, _ := w.(http.Hijacker)
		conn, _, _ := hj.Hijack()
		conn.Close()
		return
	case "slow":
		time.Sleep(2 * time.Second) // a slow model: the subject
	case "malformed":
		content = "Sure! Here is my claim: caches are good."
	case "length":
		content, finish = `{"artifact_type":"CLAIM","payload":{"statement":"A cache`, "length"
	}
	resp := map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "fake-model-2026", "system_fingerprint": "fp_fake",
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 120, "completion_tokens": 40, "total_tokens": 160},
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}

func writeConfig(t *testing.T, dir, baseURL string) string {
	t.Helper()
	judge := `[{"artifact_type":"DECISION","payload":{"outcome":"adopt","status":"final","objection_dispositions":{"@all-blocking":"addressed","rationale":"r"},"unresolved_issues":[]},"references":[{"artifact_id":"@last:CLAIM","relation":"decides"}]}]`
	os.WriteFile(filepath.Join(dir, "judge.json"), []byte(judge), 0o644)
	cfg := `{"title":"openai","question":"cache?","rounds":1,"decider":"judge","max_retries":3,
	  "participants":[
	    {"id":"model","role":"ARCHITECT","adapter":"openai","base_url":"` + baseURL + `/v1","model":"gpt-test","api_key_env":"PARLEY_TEST_KEY","temperature":0.2,"seed":7,"timeout":"1s","price":{"input_per_mtok_usd":2.5,"output_per_mtok_usd":10}},
	    {"id":"judge","adapter":"script","script":"judge.json"}]}`
	path := filepath.Join(dir, "config.json")
	os.WriteFile(path, []byte(cfg), 0o644)
	return path
}

func TestOpenAIAdapter(t *testing.T) {
	t.Setenv("PARLEY_TEST_KEY", "sk-test-123")
	cases := []struct {
		name    string
		behave  []string
		invalid int
	}{
		{"structured output", nil, 0},
		{"429 then ok (SDK backoff)", []string{"429"}, 0},
		{"500 then ok", []string{"500"}, 0},
		{"malformed content, then ok", []string{"malformed"}, 1},
		{"cut off, then ok", []string{"length"}, 1},
		{"slow then ok", []string{"slow"}, 1},
		{"dropped then ok", []string{"drop"}, 0},
		{"no json_schema: json_object fallback", []string{"no-schema"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeOpenAI{behave: tc.behave}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			dir := t.TempDir()
			cfg, err := relay.Load(writeConfig(t, dir, srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := relay.Run(ctx, cfg, relay.Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if s.Termination != "completed" || !s.ClosureOK || s.InvalidOutputs != tc.invalid {
				t.Fatalf("summary %+v", s)
			}
			if s.Tokens < 160 || s.CostUSDMicros < 700 {
				t.Errorf("usage: %d tokens, %d micro-USD", s.Tokens, s.CostUSDMicros)
			}
			fake.mu.Lock()
			defer fake.mu.Unlock()
			req := fake.requests[len(fake.requests)-1]
			rf, _ := req["response_format"].(map[string]any)
			js, _ := rf["json_schema"].(map[string]any)
			wantType := "json_schema"
			if strings.HasPrefix(tc.name, "no json_schema") {
				wantType, js = "json_object", map[string]any{"name": "parley_artifact", "strict": true}
			}
			if rf["type"] != wantType || js["name"] != "parley_artifact" || js["strict"] != true || req["model"] != "gpt-test" || req["seed"] != float64(7) {
				t.Errorf("request %v", req)
			}
			if fake.auth[0] != "Bearer sk-test-123" {
				t.Errorf("auth %q", fake.auth[0])
			}
		})
	}
}

// The model's provenance and usage travel on the artifact; no prompt does.
func TestOpenAIAdapter_Provenance(t *testing.T) {
	t.Setenv("PARLEY_TEST_KEY", "sk-test-123")
	fake := &fakeOpenAI{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	cfg, _ := relay.Load(writeConfig(t, dir, srv.URL))
	s, err := relay.Run(context.Background(), cfg, relay.Options{Dir: dir})
	if err != nil || s.Termination != "completed" {
		t.Fatalf("%v %+v", err, s)
	}
	if s.Tokens != 160 || s.CostUSDMicros != 120*25/10+40*10 {
		t.Errorf("usage %d tokens, %d micro-USD", s.Tokens, s.CostUSDMicros)
	}
	// The claim carries parley.model and parley.usage, and no prompt.
	claim := lastArtifact(t, dir)
	ext, _ := claim["extensions"].(map[string]any)
	model, _ := ext["parley.model"].(map[string]any)
	usage, _ := ext["parley.usage"].(map[string]any)
	if model["response_model"] != "fake-model-2026" || model["system_fingerprint"] != "fp_fake" || model["finish_reason"] != "stop" ||
		!strings.HasPrefix(model["request_hash"].(string), "sha256:") || usage["input_tokens"] != float64(120) {
		t.Errorf("extensions %v", ext)
	}
	b, _ := json.Marshal(claim)
	if strings.Contains(string(b), "auditable deliberation") || strings.Contains(string(b), "sk-test") {
		t.Error("the prompt or the key leaked into the artifact")
	}
	_ = closure.CodeHidden
}

// lastArtifact reads the CLAIM from the run's artifact log.
func lastArtifact(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "record.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var a map[string]any
		json.Unmarshal([]byte(line), &a)
		if a["artifact_type"] == "CLAIM" {
			return a
		}
	}
	t.Fatal("no CLAIM in the record")
	return nil
}

func TestLoad_Errors(t *testing.T) {
	dir := t.TempDir()
	for name, cfg := range map[string]string{
		"unknown field":   `{"title":"t","rounds":1,"participants":[{"id":"a","adapter":"script","script":"x"}],"colour":"red"}`,
		"no rounds":       `{"title":"t","participants":[{"id":"a","adapter":"script","script":"x"}]}`,
		"bad context":     `{"title":"t","rounds":1,"context":"everything","participants":[{"id":"a","adapter":"script","script":"x"}]}`,
		"bad token":       `{"title":"t","rounds":1,"participants":[{"id":"_a","adapter":"script","script":"x"}]}`,
		"twice":           `{"title":"t","rounds":1,"participants":[{"id":"a","adapter":"script","script":"x"},{"id":"a","adapter":"script","script":"x"}]}`,
		"bad adapter":     `{"title":"t","rounds":1,"participants":[{"id":"a","adapter":"telepathy"}]}`,
		"openai no url":   `{"title":"t","rounds":1,"participants":[{"id":"a","adapter":"openai","model":"m"}]}`,
		"unknown decider": `{"title":"t","rounds":1,"decider":"z","participants":[{"id":"a","adapter":"script","script":"x"}]}`,
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		os.WriteFile(p, []byte(cfg), 0o644)
		if _, err := relay.Load(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A key is read from the environment only; an empty one is an error.
func TestOpenAIAdapter_MissingKey(t *testing.T) {
	t.Setenv("PARLEY_TEST_KEY", "")
	dir := t.TempDir()
	cfg, _ := relay.Load(writeConfig(t, dir, "http://127.0.0.1:1"))
	if _, err := relay.Run(context.Background(), cfg, relay.Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "PARLEY_TEST_KEY") {
		t.Errorf("err = %v", err)
	}
}
