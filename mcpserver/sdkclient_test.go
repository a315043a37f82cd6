package mcpserver_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/mcpserver"
)

// sdkClientDir holds the client on the official TypeScript SDK, with its
// package.json and package-lock.json (node_modules is installed outside
// the repository).
const sdkClientDir = "testdata/sdkclient"

// needNode returns the paths of node and npm, or skips the test when one
// is missing, unless PARLEY_REQUIRE_NODE=1 (CI), where it fails.
func needNode(t *testing.T) (node, npm string) {
	t.Helper()
	node, err1 := exec.LookPath("node")
	npm, err2 := exec.LookPath("npm")
	if err1 != nil || err2 != nil {
		if os.Getenv("PARLEY_REQUIRE_NODE") == "1" {
			t.Fatalf("PARLEY_REQUIRE_NODE=1, and node or npm is missing (%v, %v): apt-get install nodejs npm", err1, err2)
		}
		t.Skip("node or npm is missing: install nodejs and npm to run the TypeScript SDK client (PARLEY_REQUIRE_NODE=1 makes this a failure)")
	}
	return node, npm
}

// installSDKClient installs the client's dependencies with npm ci, once per
// package-lock.json, in the user's cache directory (or a temporary one),
// and returns a directory holding the client and its node_modules.
func installSDKClient(t *testing.T, npm string) string {
	t.Helper()
	lock, err := os.ReadFile(filepath.Join(sdkClientDir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := os.ReadFile(filepath.Join(sdkClientDir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(append(pkg, lock...))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "parley-sdkclient", hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		// Install beside, then move into place: a concurrent run never sees
		// half an install.
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		tmp, err := os.MkdirTemp(filepath.Dir(dir), "install-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		os.WriteFile(filepath.Join(tmp, "package.json"), pkg, 0o644)
		os.WriteFile(filepath.Join(tmp, "package-lock.json"), lock, 0o644)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts")
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci: %v\n%s", err, out)
		}
		if err := os.Rename(tmp, dir); err != nil && !os.IsExist(err) {
			if _, serr := os.Stat(filepath.Join(dir, "node_modules")); serr != nil {
				t.Fatalf("install: %v", err)
			}
		}
	}
	// The client runs from a directory of its own, beside the installed
	// node_modules.
	run := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, "node_modules"), filepath.Join(run, "node_modules")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"package.json", "client.mjs"} {
		b, err := os.ReadFile(filepath.Join(sdkClientDir, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(run, f), b, 0o644)
	}
	return run
}

// Done when: an MCP client that is not ours, the official TypeScript SDK,
// runs a deliberation to completion against a real engine through four
// engine mcp servers over streamable HTTP (one per participant, the
// principal's answering a binding moment through elicitation), using only
// the tool schemas it is given; it sees every refusal's code, and waits
// for artifacts instead of polling (testdata/sdkclient/client.mjs checks
// each step).
func TestSDKClient(t *testing.T) {
	node, npm := needNode(t)
	dir := installSDKClient(t, npm)
	s, nc := startEngine(t)
	token := mcpserver.NewToken()
	servers := map[string]string{}
	for _, p := range []string{"architect", "critic", "judge", "ceo"} {
		h, err := mcpserver.HTTPHandler(server(t, nc, mcpserver.Options{Participant: p}), token)
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(h)
		t.Cleanup(hs.Close)
		servers[p] = hs.URL
	}
	cfg, _ := json.Marshal(map[string]any{"token": token, "servers": servers, "envelope": envelope(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs", string(cfg))
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the TypeScript SDK client: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	var seen struct {
		Deliberation string
		Status       string
		Refusals     map[string]string
		Waits        int
		TimedOut     int `json:"timed_out"`
		Elicitations int
		Tools        int
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &seen); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	t.Logf("%s", lines[len(lines)-1])
	for code, outcome := range map[string]string{"semantic.missing_blocking": "refused", "mcp.participant_mismatch": "refused",
		"reference.unavailable": "rejected", "binding.not_principal": "refused"} {
		if seen.Refusals[code] != outcome {
			t.Errorf("refusal %s: %q, want %q", code, seen.Refusals[code], outcome)
		}
	}
	if seen.Status != "completed" || seen.Elicitations != 1 || seen.TimedOut != 0 || seen.Waits < 2 {
		t.Errorf("%+v", seen)
	}
	// The engine agrees.
	v, err := s.Queries.Get(seen.Deliberation)
	if err != nil || v.Status != "completed" {
		t.Fatalf("%+v %v", v, err)
	}
}
