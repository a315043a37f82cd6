package relay_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/relay"
)

// The observed example: an exec participant grounds its EVIDENCE in a
// measurement file (a file read and a grep, observed at its turn), the
// charter requires admissible observations, and the embedded engine
// re-verifies them against the example's root: the deliberation completes.
// With another root, or with unannotated evidence, the final decision does
// not verify.
func TestExample_Observed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	load := func() *relay.Config {
		cfg, err := relay.Load("../examples/relay/observed.json")
		if err != nil {
			t.Fatal(err)
		}
		cfg.WaitTermination = "2s"
		return cfg
	}
	s, err := relay.Run(ctx, load(), relay.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if s.Termination != "completed" || !s.ClosureOK || s.InvalidOutputs != 0 || s.Counts["EVIDENCE"] != 1 {
		t.Fatalf("summary %+v", s)
	}

	inadmissible := func(s *relay.Summary) bool {
		return !s.ClosureOK && len(s.Findings) == 1 && s.Findings[0].Code == closure.CodeInadmissible && s.Termination != "completed"
	}
	// The engine re-verifies against an empty root: the file the
	// annotations name is not there.
	cfg := load()
	cfg.ProvenanceRoots = []string{t.TempDir()}
	if s, err := relay.Run(ctx, cfg, relay.Options{Dir: t.TempDir()}); err != nil || !inadmissible(s) {
		t.Fatalf("%v %+v", err, s)
	}

	// A participant that reports an observation without annotations.
	dir := t.TempDir()
	script := filepath.Join(dir, "bare.json")
	os.WriteFile(script, []byte(`[{"artifact_type":"EVIDENCE","payload":{"content":"p99 is 77 ms, trust me","provenance_class":"TRACE_VERIFIED_OBSERVATION"},
		"references":[{"artifact_id":"@first:CLAIM","relation":"supports"}]}]`), 0o644)
	cfg = load()
	cfg.Participants[1].Adapter, cfg.Participants[1].Command, cfg.Participants[1].Script = "script", nil, script
	if s, err := relay.Run(ctx, cfg, relay.Options{Dir: t.TempDir()}); err != nil || !inadmissible(s) {
		t.Fatalf("%v %+v", err, s)
	}

	// Malformed annotations, or annotations on another type, are invalid
	// output (a FAILURE, then the retry).
	os.WriteFile(script, []byte(`[
		{"artifact_type":"EVIDENCE","payload":{"content":"x","provenance_class":"TRACE_VERIFIED_OBSERVATION"},
		 "references":[{"artifact_id":"@first:CLAIM","relation":"supports"}],"provenance":{"vocabulary":"1.0","annotations":[{"assertion":"x","substrate_class":"substrate.grep","confidence":"high"}]}},
		{"artifact_type":"CLAIM","payload":{"statement":"y"},"references":[],"provenance":{"vocabulary":"1.0","annotations":[]}},
		{"artifact_type":"CLAIM","payload":{"statement":"z"},"references":[]}]`), 0o644)
	cfg = load()
	cfg.Policy = nil
	cfg.Participants[1].Adapter, cfg.Participants[1].Command, cfg.Participants[1].Script = "script", nil, script
	if s, err := relay.Run(ctx, cfg, relay.Options{Dir: t.TempDir()}); err != nil || s.InvalidOutputs != 2 || !s.ClosureOK {
		t.Fatalf("%v %+v", err, s)
	}
}
