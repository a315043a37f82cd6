package main

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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
		done <- Run(ctx, []string{"mcp", "--nats", s.NATSURL()}, inR, outW, &errb)
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
