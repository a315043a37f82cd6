package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if !strings.Contains(out.String(), "termination    cancelled") || !strings.Contains(out.String(), "failed closed  estimator") {
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
	if code := Run(context.Background(), []string{"help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "Usage: relay run") {
		t.Errorf("help: %d %q", code, out.String())
	}
}
