package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/parley-engine/parley/internal/suggest"
)

// Exit codes.
const (
	exitOK       = 0 // everything accepted
	exitRejected = 1 // some input rejected
	exitUsage    = 2 // bad arguments, unreadable input
	// exitNoVerdict: open, publish and control published the message
	// but the engine's verdict did not come in time.
	exitNoVerdict = 3
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *env, args []string) int
}

// env is what a command reads and writes.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// commands are listed by use: the engine, then the commands that take
// part in a deliberation, then its records, then the documents.
func commands() []command {
	return []command{
		{"serve", "run the engine: embedded NATS (or --nats), the stream, the projector and the query API", runServe},
		{"witness", "cosign an engine's checkpoints once the log the stream holds reproduces them", runWitness},
		{"watch", "show a deliberation live, a line per message, until it ends (or --json)", runWatch},
		{"open", "open a deliberation on a live engine; wait for the verdict on its charter", runOpen},
		{"publish", "seal or check an artifact, publish it as a participant; wait for the verdict", runPublish},
		{"control", "suspend, resume or cancel a deliberation, or announce a round; wait for the verdict", runControl},
		{"bind", "resolve a deliberation's binding moment in the terminal (arrow-key picker)", runBind},
		{"keygen", "generate an nkeys user key pair to sign artifacts with (engine publish --key)", runKeygen},
		{"mcp", "serve the MCP tools to agents (stdio, or --http) against a running engine", runMCP},
		{"export", "write a deliberation of a live engine as a recording (stream or log)", runExport},
		{"import", "publish a stream recording into a live engine (resumable)", runImport},
		{"receipt", "fetch receipts (signed proofs that messages are in the record) from a live engine", runReceipt},
		{"audit", "audit a recording offline: ids, rules, fold, closures, supervisor, chain, and with --trusted-key signatures, checkpoints, receipts", runAudit},
		{"closure", "verify a decision's closure over a recording (one artifact per line)", runClosure},
		{"provenance", "check provenance annotations (seed 003), re-verified against --root; observe a substrate", runProvenance},
		{"binding", "check a binding-moment envelope, verify a resolution (seed 002)", runBinding},
		{"id", "compute the artifact id of a document (AMD profile)", runID},
		{"canon", "print the canonical form of a document (AMD profile, or --jcs)", runCanon},
		{"verify", "verify an artifact: profile, identifier and semantics", runVerify},
		{"seal", "seal an artifact: insert its artifact_id and print the bytes to publish", runSeal},
		{"jcs", "compute the JCS digest of a document (RFC 8785 with the profile bounds)", runJCS},
		{"version", "print the version, Go version, Unicode version of NFC and protocol", runVersion},
	}
}

// groupStarts are the commands that begin a group of the usage.
var groupStarts = map[string]string{"serve": "The engine", "watch": "Deliberating", "export": "Records", "binding": "Documents and ids"}

// Run runs the engine command line with args (without the program name) and
// returns the exit code.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, e, args[1:])
		}
	}
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	msg := fmt.Sprintf("engine: unknown command %q", args[0])
	if c := suggest.Closest(args[0], names); c != "" {
		msg += fmt.Sprintf(": did you mean %q?", c)
	}
	fmt.Fprintf(stderr, "%s (engine help lists the commands)\n", msg)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: engine <command> [flags] [FILE|-]")
	fmt.Fprintln(w)
	for i, c := range commands() {
		if g, ok := groupStarts[c.name]; ok {
			if i > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "%s:\n", g)
		}
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "engine <command> -h" for a command's flags.`)
}

// newFlags returns a FlagSet whose usage names the command.
func newFlags(e *env, name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: engine %s %s\n\n%s\n", name, synopsis, strings.TrimSpace(about))
		var any bool
		fs.VisitAll(func(*flag.Flag) { any = true })
		if any {
			fmt.Fprintln(fs.Output(), "\nFlags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parse parses flags, mapping -h to exit 0 (the command's usage) and
// errors to exitUsage, with one line that says what was wrong, the flag
// most likely meant, and where the flags are listed; ok is false when the
// command should return code.
func parse(fs *flag.FlagSet, args []string) (code int, ok bool) {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return exitOK, false
	}
	fmt.Fprintf(out, "engine %s: %s (engine %s -h lists its flags)\n", fs.Name(), suggest.FlagError(fs, err), fs.Name())
	return exitUsage, false
}
