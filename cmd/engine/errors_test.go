package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-engine/parley/service"
)

// Every failure is one line on standard error that names the next step:
// the command or flag most likely meant, the engine to start, the flag
// that moves a taken address.
func TestRun_ErrorsNameTheNextStep(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().String()
	const id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"pubish"}, []string{`engine: unknown command "pubish": did you mean "publish"?`, "engine help"}},
		{[]string{"serv"}, []string{`did you mean "serve"?`}},
		{[]string{"publish", "--deliberaton", id, "--as", "a", "-"}, []string{"engine publish: unknown flag --deliberaton: did you mean --deliberation?", "engine publish -h"}},
		{[]string{"watch", "--jsn", id}, []string{"unknown flag --jsn: did you mean --json?"}},
		{[]string{"control", "--deliberation", id, "cancle"}, []string{`"cancle": did you mean cancel?`}},
		{[]string{"watch", "--nats", "nats://127.0.0.1:1", id}, []string{"engine watch: connect to nats://127.0.0.1:1", "is engine serve running?"}},
		{[]string{"control", "--nats", "nats://127.0.0.1:1", "--deliberation", id, "round", "1"}, []string{"is engine serve running?"}},
		{[]string{"bind", "--http", "http://127.0.0.1:1", id}, []string{"no engine answers at http://127.0.0.1:1: is engine serve running?"}},
		{[]string{"serve", "--data", t.TempDir(), "--listen", busy, "--http", "127.0.0.1:0"}, []string{busy + " (the embedded NATS server) is in use", "--listen"}},
		{[]string{"serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--http", busy}, []string{busy + " (the HTTP API) is in use", "--http"}},
		{[]string{"serve", "--log-level", "loud"}, []string{`--log-level "loud": give debug, info, warn or error`}},
		{[]string{"serve", "--snapshot-store", "s3"}, []string{`--snapshot-store "s3": give files or jetstream`}},
	} {
		code, out, errs := run(t, "", c.args...)
		if code == 0 || out != "" || strings.Count(errs, "\n") != 1 || strings.Contains(errs, "Usage:") {
			t.Errorf("%v: exit %d, want a failure on one line:\n%s%s", c.args, code, out, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: %q lacks %q", c.args, errs, w)
			}
		}
	}
	// engine -h: the engine first, then by use.
	_, out, _ := run(t, "", "-h")
	if i, j, k := strings.Index(out, "  serve "), strings.Index(out, "  publish "), strings.Index(out, "  id "); i < 0 || i > j || j > k {
		t.Errorf("engine -h is not ordered by use:\n%s", out)
	}
}

// A mistyped deliberation id is refused before anything is published: the
// engine's record of messages for no deliberation stays empty. --force
// publishes all the same, and the engine records the rejection.
func TestPublish_UnknownDeliberation(t *testing.T) {
	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const typo = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	claim := `{"protocol_version":"0.1","artifact_type":"CLAIM","payload":{"statement":"x"},"references":[]}`
	unrouted := func() int {
		t.Helper()
		resp, err := http.Get("http://" + s.HTTPAddr() + "/api/v1/rejections")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r struct {
			Total int `json:"total"`
		}
		json.NewDecoder(resp.Body).Decode(&r)
		return r.Total
	}
	for _, args := range [][]string{
		{"publish", "--nats", s.NATSURL(), "--data", s.DataDir(), "--deliberation", typo, "--as", "alice", "-"},
		{"control", "--nats", s.NATSURL(), "--data", s.DataDir(), "--deliberation", typo, "round", "1"},
	} {
		code, out, errs := run(t, claim, args...)
		if code != exitUsage || out != "" || !strings.Contains(errs, `"code":"deliberation.unknown"`) || !strings.Contains(errs, "--force") {
			t.Errorf("%v: exit %d %q %q", args, code, out, errs)
		}
	}
	out := filepath.Join(t.TempDir(), "rec.jsonl")
	if code, _, errs := run(t, "", "export", "--nats", s.NATSURL(), "--data", s.DataDir(), "--deliberation", typo, "--out", out); code != 1 ||
		!strings.Contains(errs, "holds no deliberation "+typo+": check the id") {
		t.Errorf("export: exit %d %s", code, errs)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("export of no deliberation left %s behind: %v", out, err)
	}
	if n := unrouted(); n != 0 {
		t.Fatalf("%d messages for no deliberation recorded after the refusals", n)
	}
	code, _, errs := run(t, claim, "publish", "--force", "--nats", s.NATSURL(), "--data", s.DataDir(), "--deliberation", typo, "--as", "alice", "-")
	if code != exitRejected || !strings.Contains(errs, `"outcome":"rejected"`) || unrouted() != 1 {
		t.Fatalf("--force: exit %d %s", code, errs)
	}
	// An opened deliberation is published to as before.
	code, id, errs := run(t, "", "open", "--nats", s.NATSURL(), "--data", s.DataDir(), "--title", "t", "--quiet")
	if code != 0 {
		t.Fatalf("open: %d %s", code, errs)
	}
	if code, _, errs := run(t, claim, "publish", "--nats", s.NATSURL(), "--data", s.DataDir(), "--deliberation", strings.TrimSpace(id), "--as", "alice", "-"); code != 0 {
		t.Fatalf("publish: %d %s", code, errs)
	}
	// Without credentials a command that reads the stream is refused, and
	// told why (not a timeout).
	code, _, errs = run(t, "", "export", "--nats", s.NATSURL(), "--deliberation", strings.TrimSpace(id), "--out", out)
	if code != 1 || !strings.Contains(errs, "a client without credentials may not read the stream") {
		t.Errorf("export without credentials: exit %d: %s", code, errs)
	}
}
