package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/internal/httplimit"
	"github.com/parley-engine/parley/mcpserver"
	"github.com/parley-engine/parley/wire"
)

// mcpTokenFile is the name of engine mcp --http's token file in the data
// directory.
const mcpTokenFile = "mcp-token"

func runMCP(ctx context.Context, e *env, args []string) int {
	var nf natsFlags
	var addr, token, tokenFile, participant, keyPath string
	var remote bool
	var maxWait time.Duration
	fs := newFlags(e, "mcp", "[--participant TOKEN] [--key FILE] [--nats URL] [--max-wait D] [--http ADDR [--http-token T] [--token-file FILE] [--allow-remote]]", `Serves parley's Model Context Protocol tools to agents (docs/AGENTS.md):
open_deliberation, publish_<type> (one per artifact type, its input schema
the type's payload rules), publish_artifact, wait_artifacts (waits for the
next artifacts after an ordinal), get_state, verify_closure, request_binding
(emits a binding moment: its manifest entry carries emits_binding_moment in
_meta) and resolve_binding; and each deliberation as the resource
parley://deliberations/<id>, with notifications to subscribers. Every
result carries the engine's verdict: outcome, code, message, position,
ordinal. Over standard input and output by default; with --http,
streamable HTTP at ADDR (path /mcp). It talks to a running engine (engine
serve) over NATS, with the NATS credentials given.

The server speaks as one participant: --participant, else the NATS --user
when it is a participant token, else "mcp". A call that names another
participant is refused (mcp.participant_mismatch). With --key FILE (an
nkeys user seed, "SU…", alone or in a NATS credentials file; engine keygen)
it signs every artifact it publishes.

Over HTTP every request needs "Authorization: Bearer <token>" (401
otherwise): whoever reaches the port would otherwise publish as the NATS
user. The token is --http-token (or PARLEY_MCP_TOKEN), or else one drawn at
start and written to --token-file (mode 0600, removed at stop); it is
printed only when standard output is a terminal. ADDR must be a loopback
address unless --allow-remote is given.`)
	fs.StringVar(&addr, "http", "", "serve streamable HTTP on this address instead of stdio (e.g. 127.0.0.1:8081)")
	fs.StringVar(&token, "http-token", "", "the bearer token of --http, at least 16 characters (or PARLEY_MCP_TOKEN; default: one drawn at start)")
	fs.StringVar(&tokenFile, "token-file", filepath.Join(defaultDataDir, mcpTokenFile), "where a drawn token is written, mode 0600")
	fs.BoolVar(&remote, "allow-remote", false, "let --http listen on an address beyond loopback (put TLS in front: the token crosses the network)")
	fs.StringVar(&participant, "participant", "", "the participant token the server speaks as (default: the NATS --user when it is a token, else mcp)")
	fs.StringVar(&keyPath, "key", "", "sign every artifact with this nkeys user seed (a file holding the seed alone, or a NATS credentials file)")
	fs.DurationVar(&maxWait, "max-wait", mcpserver.DefaultMaxWait, "the longest wait_artifacts waits")
	nf.participant = true
	nf.register(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if participant == "" && wire.ValidToken(nf.user) && !strings.HasPrefix(nf.user, "_") {
		participant = nf.user
	}
	if participant == "" {
		participant = mcpserver.DefaultParticipant
	}
	if !wire.ValidToken(participant) {
		fmt.Fprintf(e.stderr, "engine mcp: --participant %q is not a participant token ([A-Za-z0-9][A-Za-z0-9_-]{0,63})\n", participant)
		return exitUsage
	}
	if maxWait <= 0 {
		fmt.Fprintf(e.stderr, "engine mcp: --max-wait %s: give a positive duration\n", maxWait)
		return exitUsage
	}
	var key nkeys.KeyPair
	if keyPath != "" {
		kp, err := readSigningKey(keyPath)
		if err != nil {
			fmt.Fprintf(e.stderr, "engine mcp: --key %s: %v\n", keyPath, err)
			return exitUsage
		}
		key = kp
	}
	if addr != "" && !remote && !mcpserver.IsLoopback(addr) {
		fmt.Fprintf(e.stderr, "engine mcp: --http %s is not a loopback address: give --allow-remote to listen there (and put TLS in front)\n", addr)
		return exitUsage
	}
	if token == "" {
		token = os.Getenv("PARLEY_MCP_TOKEN")
	}
	given := token != ""
	if addr != "" && given && len(token) < mcpserver.MinTokenLen {
		fmt.Fprintf(e.stderr, "engine mcp: the HTTP token needs at least %d characters\n", mcpserver.MinTokenLen)
		return exitUsage
	}
	nc, _, err := nf.connect()
	if err != nil {
		fmt.Fprintf(e.stderr, "engine mcp: %v\n", err)
		return exitUsage
	}
	defer nc.Close()
	srv, err := mcpserver.NewWithOptions(nc, mcpserver.Options{Version: engineVersion(), Participant: participant, SigningKey: key, MaxWait: maxWait})
	if err != nil {
		fmt.Fprintf(e.stderr, "engine mcp: %v\n", err)
		return exitUsage
	}
	if addr == "" {
		t := &mcp.IOTransport{Reader: io.NopCloser(e.stdin), Writer: nopWriteCloser{e.stdout}}
		if err := srv.Run(ctx, t); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			fmt.Fprintf(e.stderr, "engine mcp: %v\n", err)
			return 1
		}
		return exitOK
	}
	if !given {
		token = mcpserver.NewToken()
	}
	h, err := mcpserver.HTTPHandler(srv, token)
	if err != nil {
		fmt.Fprintf(e.stderr, "engine mcp: %v\n", err)
		return exitUsage
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(e.stderr, "engine mcp: %v\n", err)
		return exitUsage
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && !remote && !ta.IP.IsLoopback() {
		// localhost that a hosts file maps elsewhere.
		ln.Close()
		fmt.Fprintf(e.stderr, "engine mcp: --http %s listens on %s, beyond loopback: give --allow-remote to listen there\n", addr, ln.Addr())
		return exitUsage
	}
	where := "the token given with --http-token or PARLEY_MCP_TOKEN"
	if !given {
		if err := writeSecretFile(tokenFile, []byte(token+"\n")); err != nil {
			ln.Close()
			fmt.Fprintf(e.stderr, "engine mcp: --token-file: %v\n", err)
			return 1
		}
		defer os.Remove(tokenFile)
		where = "the token is in " + tokenFile + " (mode 0600)"
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	hs := httplimit.Server(mux, nil) // timeouts, header and body limits
	go func() { <-ctx.Done(); hs.Close() }()
	fmt.Fprintf(e.stdout, "parley mcp: http://%s/mcp, Authorization: Bearer <token>; %s\n", ln.Addr(), where)
	if !ln.Addr().(*net.TCPAddr).IP.IsLoopback() {
		fmt.Fprintf(e.stdout, "parley mcp: listening beyond loopback (--allow-remote): the token crosses the network in clear without TLS in front\n")
	}
	if !given && isTerminal(e.stdout) {
		fmt.Fprintf(e.stdout, "parley mcp: token %s\n", token)
	}
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(e.stderr, "engine mcp: %v\n", err)
		return 1
	}
	return exitOK
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
