package relay_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/relay"
)

// Record a run against a model server, then replay it with the server gone:
// the same artifacts (the same final decision id), no network. A changed
// request is a miss that says what changed.
func TestCassette_RoundTrip(t *testing.T) {
	t.Setenv("PARLEY_TEST_KEY", "sk-test-123")
	fake := &fakeOpenAI{}
	srv := httptest.NewServer(fake)
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir, srv.URL)
	cfg, err := relay.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cas := filepath.Join(dir, "cassette")
	rec, err := relay.Run(ctx, cfg, relay.Options{Dir: filepath.Join(dir, "run1"), Record: cas})
	if err != nil || rec.Termination != "completed" {
		t.Fatalf("%v %+v", err, rec)
	}
	srv.Close()
	files, _ := filepath.Glob(filepath.Join(cas, "*.json"))
	if len(files) != 2 { // the model's call and the judge's
		t.Fatalf("%d recordings", len(files))
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if strings.Contains(string(b), "sk-test-123") || strings.Contains(strings.ToLower(string(b)), "authorization") {
			t.Errorf("%s holds a secret", f)
		}
	}
	t.Setenv("PARLEY_TEST_KEY", "") // no key needed to replay
	cfg, _ = relay.Load(cfgPath)
	rep, err := relay.Run(ctx, cfg, relay.Options{Dir: filepath.Join(dir, "run2"), Replay: cas})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FinalDecision != rec.FinalDecision || rep.Termination != "completed" || rep.Tokens != rec.Tokens {
		t.Errorf("replay %+v\nrecord %+v", rep, rec)
	}
	// A changed request misses, and says where.
	b, _ := os.ReadFile(cfgPath)
	os.WriteFile(cfgPath, []byte(strings.Replace(string(b), `"temperature":0.2`, `"temperature":0.9`, 1)), 0o644)
	cfg, _ = relay.Load(cfgPath)
	_, err = relay.Run(ctx, cfg, relay.Options{Dir: filepath.Join(dir, "run3"), Replay: cas})
	if err == nil || !strings.Contains(err.Error(), "no recording of model") || !strings.Contains(err.Error(), "temperature (recorded 0.2, now 0.9)") {
		t.Errorf("miss: %v", err)
	}
}
