package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRun_Fleet(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"run", "--parallel", "5", "--json", "--dir", dir, "../../examples/relay/fleet.json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res struct {
		Runs, Completed int
		Summaries       []struct {
			Termination string `json:"termination"`
			ClosureOK   bool   `json:"closure_ok"`
		}
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Runs != 5 || res.Completed != 5 {
		t.Fatalf("%v %s", err, out.String())
	}
	for i := 1; i <= 5; i++ {
		for _, f := range []string{"report.md", "dag.svg", "record.jsonl", "summary.json"} {
			if _, err := os.Stat(filepath.Join(dir, "run-00"+string(rune('0'+i)), f)); err != nil {
				t.Errorf("run %d: %v", i, err)
			}
		}
	}
}

func TestRun_Single(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"run", "--progress", "--dir", t.TempDir(), "../../examples/relay/full-history-stress.json"}, &out, &errb); code != 1 {
		t.Errorf("stress run: exit %d", code)
	}
	if !strings.Contains(out.String(), "  termination     cancelled\n") || !strings.Contains(out.String(), "  failed closed   estimator") ||
		!strings.Contains(out.String(), "  run directory   ") || strings.Contains(out.String(), "map[") {
		t.Errorf("stdout %q", out.String())
	}
	if !strings.Contains(errb.String(), "invalid output (attempt 3)") {
		t.Errorf("progress %q", errb.String())
	}
}

func TestRun_Usage(t *testing.T) {
	var out, errb bytes.Buffer
	for _, args := range [][]string{nil, {"fly"}, {"run"}, {"run", "--record", "a", "--replay", "b", "x.json"}, {"run", "/nonexistent.json"}} {
		if code := Run(context.Background(), args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d", args, code)
		}
	}
	if code := Run(context.Background(), []string{"help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "relay run [--nats URL") {
		t.Errorf("help: %d %q", code, out.String())
	}
}

// A charter the engine refuses stops the run at once, with the engine's
// reason: the misspelt limit goes through the relay's configuration (which
// passes limits on as they are) and is refused by the engine's projector.
func TestRun_CharterRefused(t *testing.T) {
	examples, err := filepath.Abs("../../examples/relay")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(examples, "fleet.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, p := range cfg["participants"].([]any) {
		p := p.(map[string]any)
		p["script"] = filepath.Join(examples, p["script"].(string))
	}
	dir := t.TempDir()
	for _, tt := range []struct {
		name   string
		limits map[string]any
		want   string
		args   []string
	}{
		{"misspelt", map[string]any{"max_artifactz": 3}, `unknown field "max_artifactz"`, nil},
		{"negative", map[string]any{"max_rounds": -1}, "limits.max_rounds is negative", nil},
		{"fleet", map[string]any{"max_artifactz": 3}, `unknown field "max_artifactz"`, []string{"--parallel", "2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg["limits"] = tt.limits
			b, _ := json.Marshal(cfg)
			path := filepath.Join(dir, tt.name+".json")
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			args := append(append([]string{"run", "--quiet", "--dir", filepath.Join(dir, tt.name)}, tt.args...), path)
			code := Run(ctx, args, &out, &errb)
			if ctx.Err() != nil {
				t.Fatal("the run waited for its context to end")
			}
			if code != 2 || !strings.Contains(errb.String(), "refused the charter") || !strings.Contains(errb.String(), "control.invalid") ||
				!strings.Contains(errb.String(), tt.want) {
				t.Errorf("exit %d, stderr %q", code, errb.String())
			}
		})
	}
}
