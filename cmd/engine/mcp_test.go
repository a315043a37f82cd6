package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/service"
)

// engine mcp over its standard input and output, against a real engine.
func TestRun_MCPStdio(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		var errb bytes.Buffer
		done <- Run(ctx, []string{"mcp", "--nats", s.NATSURL(), "--data", s.DataDir()}, inR, outW, &errb)
		outW.Close()
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "open_deliberation", Arguments: map[string]any{"title": "over stdio"}})
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	id := res.StructuredContent.(map[string]any)["deliberation"].(string)
	if v, err := s.Queries.Get(id); err != nil || v.Title != "over stdio" {
		t.Fatalf("%+v %v", v, err)
	}
	cs.Close()
	inW.Close()
	if code := <-done; code != 0 {
		t.Errorf("exit %d", code)
	}
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// Attack: engine mcp --http publishes with the NATS credentials it was
// given; a local process that reaches its port without the token calls a
// tool. It is refused with 401 and nothing reaches the stream; with the
// token (drawn at start, in the token file with mode 0600, never on
// standard output when that is not a terminal) the same call works. An
// address beyond loopback is refused without --allow-remote.
func TestRun_MCPHTTPNeedsToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		var out, errb bytes.Buffer
		if code := Run(ctx, []string{"mcp", "--nats", s.NATSURL(), "--data", s.DataDir(), "--http", addr}, nil, &out, &errb); code != exitUsage ||
			!strings.Contains(errb.String(), "--allow-remote") {
			t.Errorf("--http %s: exit %d, %s", addr, code, errb.String())
		}
	}

	tokenFile := filepath.Join(t.TempDir(), "data", "mcp-token")
	mctx, stop := context.WithCancel(ctx)
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	var errb bytes.Buffer
	go func() {
		done <- Run(mctx, []string{"mcp", "--nats", s.NATSURL(), "--data", s.DataDir(), "--http", "127.0.0.1:0", "--token-file", tokenFile}, nil, outW, &errb)
		outW.Close()
	}()
	var printed strings.Builder
	lines := bufio.NewScanner(outR)
	if !lines.Scan() {
		t.Fatalf("engine mcp printed nothing: %s", errb.String())
	}
	first := lines.Text()
	printed.WriteString(first + "\n")
	rest := make(chan struct{})
	go func() {
		for lines.Scan() {
			printed.WriteString(lines.Text() + "\n")
		}
		close(rest)
	}()
	addr, _, ok := strings.Cut(strings.TrimPrefix(first, "parley mcp: http://"), "/mcp")
	if !ok || !strings.Contains(first, tokenFile) {
		t.Fatalf("first line %q", first)
	}
	endpoint := "http://" + addr + "/mcp"
	st, err := os.Stat(tokenFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", st, err)
	}
	b, _ := os.ReadFile(tokenFile)
	token := strings.TrimSpace(string(b))
	if len(token) < 32 {
		t.Fatalf("token %q", token)
	}
	before, err := s.Stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Without the token, or with another: 401, and no tool runs.
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"open_deliberation","arguments":{"title":"forged"}}}`
	for _, auth := range []string{"", "Bearer ", "Bearer " + strings.Repeat("0", len(token)), "Basic " + token, token} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(call))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Code string }
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || body.Code != "unauthorized" {
			t.Errorf("Authorization %q: %d %q", auth, resp.StatusCode, body.Code)
		}
	}
	// An MCP client without the token cannot even connect.
	if cs, err := mcp.NewClient(&mcp.Implementation{Name: "intruder"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, nil); err == nil {
		cs.Close()
		t.Error("an MCP client without the token connected")
	}
	if after, err := s.Stream.Info(ctx); err != nil || after.State.LastSeq != before.State.LastSeq {
		t.Fatalf("the stream moved without the token: %v %d -> %d", err, before.State.LastSeq, after.State.LastSeq)
	}

	// With it: the tool runs.
	hc := &http.Client{Transport: bearer{token, http.DefaultTransport}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "open_deliberation", Arguments: map[string]any{"title": "with the token"}})
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	id := res.StructuredContent.(map[string]any)["deliberation"].(string)
	if v, err := s.Queries.Get(id); err != nil || v.Title != "with the token" {
		t.Fatalf("%+v %v", v, err)
	}
	cs.Close()
	stop()
	if code := <-done; code != 0 {
		t.Errorf("exit %d: %s", code, errb.String())
	}
	<-rest
	if strings.Contains(printed.String(), token) || strings.Contains(errb.String(), token) {
		t.Errorf("the token was printed to a pipe:\n%s%s", printed.String(), errb.String())
	}
	if _, err := os.Stat(tokenFile); !os.IsNotExist(err) {
		t.Errorf("the token file outlives the server: %v", err)
	}
}

// engine mcp --participant alice --key FILE speaks as alice and signs
// every artifact: a charter that requires alice's signature admits its
// claim, and wait_artifacts shows it as alice's. A call naming another
// participant is refused; a --participant that is not a token, or a
// --key that is not a seed, stops it at start.
func TestRun_MCPParticipantAndKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kp, _ := nkeys.CreateUser()
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	keyFile := filepath.Join(t.TempDir(), "alice.nk")
	os.WriteFile(keyFile, seed, 0o600)
	for _, bad := range [][]string{{"--participant", "_supervisor"}, {"--key", filepath.Join(t.TempDir(), "none")}, {"--max-wait", "0s"}} {
		var errb bytes.Buffer
		if code := Run(ctx, append([]string{"mcp", "--nats", s.NATSURL(), "--data", s.DataDir()}, bad...), strings.NewReader(""), io.Discard, &errb); code != exitUsage {
			t.Errorf("%v: exit %d (%s)", bad, code, errb.String())
		}
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		var errb bytes.Buffer
		done <- Run(ctx, []string{"mcp", "--nats", s.NATSURL(), "--data", s.DataDir(), "--participant", "alice", "--key", keyFile}, inR, outW, &errb)
		outW.Close()
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tool := func(name string, args map[string]any) (map[string]any, bool) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res.StructuredContent.(map[string]any), res.IsError
	}
	open, isErr := tool("open_deliberation", map[string]any{"title": "signed", "participants": []any{"alice"}, "keys": map[string]any{"alice": pub}, "require_signatures": true})
	if isErr {
		t.Fatalf("%v", open)
	}
	id := open["deliberation"].(string)
	if r, isErr := tool("publish_claim", map[string]any{"deliberation": id, "payload": map[string]any{"statement": "Signed by alice."}}); isErr || r["outcome"] != "accepted" {
		t.Fatalf("%v", r)
	}
	if r, isErr := tool("publish_claim", map[string]any{"deliberation": id, "participant": "bob", "payload": map[string]any{"statement": "As bob."}}); !isErr || r["code"] != "mcp.participant_mismatch" {
		t.Fatalf("%v", r)
	}
	w, _ := tool("wait_artifacts", map[string]any{"deliberation": id})
	if arts := w["artifacts"].([]any); len(arts) != 1 || arts[0].(map[string]any)["participant"] != "alice" {
		t.Fatalf("%v", w)
	}
	cs.Close()
	inW.Close()
	if code := <-done; code != 0 {
		t.Errorf("exit %d", code)
	}
}
