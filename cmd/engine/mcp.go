package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parley-engine/parley/internal/httplimit"
	"github.com/parley-engine/parley/mcpserver"
)

func runMCP(ctx context.Context, e *env, args []string) int {
	var nf natsFlags
	var addr string
	fs := newFlags(e, "mcp", "[--nats URL] [--http ADDR]", `Serves parley's Model Context Protocol tools to agents: open_deliberation,
publish_artifact, get_state, verify_closure and request_binding (which emits
a binding moment: its manifest entry carries emits_binding_moment in _meta,
its result the envelope in binding_moment). Over standard input and output
by default; with --http, streamable HTTP at ADDR (path /mcp). It talks to a
running engine (engine serve) over NATS.`)
	fs.StringVar(&addr, "http", "", "serve streamable HTTP on this address instead of stdio (e.g. 127.0.0.1:8081)")
	nf.register(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	nc, _, err := nf.connect()
	if err != nil {
		fmt.Fprintf(e.stderr, "engine mcp: %v\n", err)
		return exitUsage
	}
	defer nc.Close()
	srv := mcpserver.New(nc, engineVersion())
	if addr == "" {
		t := &mcp.IOTransport{Reader: io.NopCloser(e.stdin), Writer: nopWriteCloser{e.stdout}}
		if err := srv.Run(ctx, t); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			fmt.Fprintf(e.stderr, "engine mcp: %v\n", err)
			return 1
		}
		return exitOK
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(e.stderr, "engine mcp: %v\n", err)
		return exitUsage
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	hs := httplimit.Server(mux, nil) // timeouts, header and body limits
	go func() { <-ctx.Done(); hs.Close() }()
	fmt.Fprintf(e.stderr, "parley mcp: http://%s/mcp\n", ln.Addr())
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(e.stderr, "engine mcp: %v\n", err)
		return 1
	}
	return exitOK
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
