package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/audit"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/relay"
	"github.com/parley-engine/parley/signing"
	"github.com/parley-engine/parley/wire"
)

// signedConfig writes a scripted run with sign on (the example scripts,
// two rounds) and loads it.
func signedConfig(t *testing.T, dir string, extra map[string]any) *relay.Config {
	t.Helper()
	ex, err := filepath.Abs("../examples/relay")
	if err != nil {
		t.Fatal(err)
	}
	part := func(id, script string) map[string]any {
		return map[string]any{"id": id, "adapter": "script", "script": filepath.Join(ex, script)}
	}
	c := map[string]any{"title": "Adopt a read-through cache? (signed)", "question": "Should the engine cache the ledger?",
		"rounds": 2, "context": "full-history", "decider": "judge", "sign": true,
		"participants": []any{part("architect", "architect.json"), part("critic", "critic.json"),
			part("verifier", "verifier.json"), part("judge", "judge.json")}}
	for k, v := range extra {
		c[k] = v
	}
	b, _ := json.Marshal(c)
	path := filepath.Join(dir, "relay.json")
	os.WriteFile(path, b, 0o644)
	cfg, err := relay.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A signed run binds a key per participant in its charter, signs every
// artifact it publishes, and writes the public keys and a stream
// recording that audits OK offline, every signature verified again; the
// recording with one signature stripped, its chain recomputed as a forger
// would, does not.
func TestRun_Signed(t *testing.T) {
	dir := t.TempDir()
	cfg := signedConfig(t, dir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runDir := filepath.Join(dir, "run")
	s, err := relay.Run(ctx, cfg, relay.Options{Dir: runDir})
	if err != nil {
		t.Fatal(err)
	}
	if s.Termination != "completed" || !s.ClosureOK || s.FinalDecision == "" || s.InvalidOutputs != 0 {
		t.Fatalf("summary %+v", s)
	}

	// keys.json: a user public key per participant, the summary's.
	var keys struct {
		Deliberation      string
		Keys              map[string]string
		RequireSignatures bool `json:"require_signatures"`
	}
	b, err := os.ReadFile(filepath.Join(runDir, relay.KeysFile))
	if err != nil || json.Unmarshal(b, &keys) != nil {
		t.Fatalf("keys.json: %v %s", err, b)
	}
	if keys.Deliberation != s.Deliberation || !keys.RequireSignatures || len(keys.Keys) != 4 {
		t.Fatalf("keys.json %s", b)
	}
	for id, k := range keys.Keys {
		if !signing.ValidKey(k) || s.Keys[id] != k {
			t.Errorf("%s: key %q, summary %q", id, k, s.Keys[id])
		}
	}
	// No seed is written anywhere in the run directory.
	filepath.WalkDir(runDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(path, filepath.Join(runDir, "engine")) {
			return nil
		}
		if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(`"SU`)) || bytes.Contains(b, []byte("\nSU")) {
			t.Errorf("%s holds what looks like a user seed", path)
		}
		return nil
	})

	// The recording: every participant's artifact signed with its key.
	rec, err := os.ReadFile(filepath.Join(runDir, relay.RecordingFile))
	if err != nil || s.Recording != filepath.Join(runDir, relay.RecordingFile) {
		t.Fatalf("recording %q: %v", s.Recording, err)
	}
	r, err := recording.NewReader(bytes.NewReader(rec))
	if err != nil {
		t.Fatal(err)
	}
	signed := 0
	var first []byte
	for {
		m, err := r.Next()
		if err != nil {
			break
		}
		_, kind, token := wire.Parse(m.Subject)
		if kind != "art" || token == wire.SupervisorToken || token == wire.CheckpointToken {
			continue
		}
		if m.Signature.Key != keys.Keys[token] || m.Signature.Signature == "" {
			t.Errorf("position %d by %s: signature %+v, want key %s", m.Position, token, m.Signature, keys.Keys[token])
		}
		if first == nil {
			first = m.Data
		}
		signed++
	}
	if want := s.Counts["CLAIM"] + s.Counts["REVISION"] + s.Counts["OBJECTION"] + s.Counts["EVIDENCE"] + s.Counts["DECISION"]; signed == 0 || signed != want {
		t.Fatalf("%d signed artifacts, the run has %d", signed, want)
	}
	rep, err := audit.Run(mustReader(t, rec))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.StateDigest != s.StateDigest || len(rep.Rejections) != 0 || rep.Status != "completed" {
		t.Fatalf("audit %+v\n%s", rep, rep.Text())
	}
	// With the engine's key and the run's receipts, and nothing else (no
	// engine): every signature, checkpoint and receipt verifies.
	pub, err := os.ReadFile(filepath.Join(runDir, relay.EngineKeyFile))
	if err != nil || strings.TrimSpace(string(pub)) != s.EngineKey {
		t.Fatalf("engine.pub %q (%v), the summary's %q", pub, err, s.EngineKey)
	}
	receipts, _ := filepath.Glob(filepath.Join(runDir, relay.ReceiptsDir, "*.tlog-proof"))
	if len(receipts) == 0 || len(receipts) != s.Receipts {
		t.Fatalf("%d receipts, the summary says %d", len(receipts), s.Receipts)
	}
	trust := &audit.Trust{EngineKeys: []string{s.EngineKey}}
	for _, f := range receipts {
		b, _ := os.ReadFile(f)
		trust.Receipts = append(trust.Receipts, b)
	}
	rep, err = audit.RunTrusted(mustReader(t, rec), nil, trust)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Log == nil || rep.Log.Receipts != len(receipts) {
		t.Fatalf("audit with the engine's key and %d receipts:\n%s", len(receipts), rep.Text())
	}

	// The first artifact's signature stripped, the chain recomputed.
	r = mustReader(t, rec)
	var forged bytes.Buffer
	w, _ := recording.NewWriter(&forged, recording.Stream, s.Deliberation)
	for {
		m, err := r.Next()
		if err != nil {
			break
		}
		if bytes.Equal(m.Data, first) {
			m.Signature = signing.Headers{}
		}
		if err := w.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	w.StateDigest = r.Trailer().StateDigest
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err = audit.Run(mustReader(t, forged.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	has := func(code string) bool {
		for _, f := range rep.Findings {
			if f.Code == code {
				return true
			}
		}
		return false
	}
	if rep.OK || !has(audit.CodeDigest) || has(audit.CodeChainBroken) || rep.Rejections["signature.missing"] != 1 {
		t.Errorf("stripped signature: audit %+v\n%s", rep.Rejections, rep.Text())
	}
}

func mustReader(t *testing.T, b []byte) *recording.Reader {
	t.Helper()
	r, err := recording.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Sign is refused with a principal (whose resolutions come unsigned
// through the engine's API) and with a fork (whose prefix cannot carry
// signatures for the new deliberation), before anything starts.
func TestRun_SignRefused(t *testing.T) {
	dir := t.TempDir()
	b, _ := json.Marshal(map[string]any{"title": "t", "rounds": 1, "decider": "judge", "principal": "principal", "sign": true,
		"participants": []any{map[string]any{"id": "judge", "adapter": "script", "script": "judge.json"}}})
	os.WriteFile(filepath.Join(dir, "p.json"), b, 0o644)
	if _, err := relay.Load(filepath.Join(dir, "p.json")); err == nil || !strings.Contains(err.Error(), "sign with a principal") {
		t.Errorf("sign with a principal: %v", err)
	}
	cfg := signedConfig(t, dir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	forkDir := filepath.Join(dir, "fork")
	if _, err := relay.Run(ctx, cfg, relay.Options{Dir: forkDir, Fork: &recording.Reader{}, ForkAt: 1}); err == nil || !strings.Contains(err.Error(), "cannot fork") {
		t.Errorf("sign with a fork: %v", err)
	}
	if _, err := os.Stat(forkDir); !os.IsNotExist(err) {
		t.Errorf("a refused run made its directory: %v", err)
	}
}
