package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/canon"
)

// runBinding dispatches engine binding check|verify.
func runBinding(ctx context.Context, e *env, args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "check":
			return runBindingCheck(e, args[1:])
		case "verify":
			return runBindingVerify(e, args[1:])
		}
	}
	fmt.Fprintln(e.stderr, "Usage: engine binding check FILE|-")
	fmt.Fprintln(e.stderr, "       engine binding verify --envelope FILE --resolution FILE [--action FILE]")
	return exitUsage
}

// readDoc reads a whole document, refusing one larger than canon's limit.
func readDoc(e *env, path string) ([]byte, error) {
	in, closeIn, err := openInput(e, path)
	if err != nil {
		return nil, err
	}
	defer closeIn()
	b, err := io.ReadAll(io.LimitReader(in, canon.DefaultMaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > canon.DefaultMaxSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, canon.DefaultMaxSize)
	}
	return b, nil
}

func findingsOf(err error) []binding.Finding {
	var m *binding.Malformed
	if errors.As(err, &m) {
		return m.Findings
	}
	return []binding.Finding{{Code: "internal", Message: err.Error()}}
}

func printJSON(e *env, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(e.stdout, "%s\n", b)
}

func runBindingCheck(e *env, args []string) int {
	fs := newFlags(e, "binding check", "FILE|-", `Checks a binding_moment envelope (seed 002 §4-§6), or a tool result carrying
one in its binding_moment member, and prints
{"ok":bool,"envelope_digest":"sha256:...","findings":[{"code","message"}]}.
The digest is that of the envelope's JCS form; a malformed envelope still
gets it when its JSON is inside the profile bounds. Exit status: 0
well-formed, 1 malformed, 2 unreadable input.`)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(e.stderr, "engine binding check: need exactly one FILE argument (- for standard input)")
		return exitUsage
	}
	raw, err := readDoc(e, fs.Arg(0))
	if err != nil {
		fmt.Fprintf(e.stderr, "engine binding check: %v\n", err)
		return exitUsage
	}
	out := struct {
		OK       bool              `json:"ok"`
		Digest   string            `json:"envelope_digest,omitempty"`
		Findings []binding.Finding `json:"findings"`
	}{Findings: []binding.Finding{}}
	env, err := binding.FromToolResult(raw)
	if err == nil {
		out.OK, out.Digest = true, env.Digest.String()
		printJSON(e, out)
		return exitOK
	}
	out.Findings = findingsOf(err)
	if d, derr := binding.Digest(binding.EnvelopeValue(raw)); derr == nil {
		out.Digest = d.String()
	}
	printJSON(e, out)
	return exitRejected
}

func runBindingVerify(e *env, args []string) int {
	var envPath, resPath, actPath string
	fs := newFlags(e, "binding verify", "--envelope FILE --resolution FILE [--action FILE]", `Verifies a resolution against the envelope it names (seed 002 §7.3) and
prints {"ok":bool,"resolution":"option|answer|question|declined",
"authority":bool,"findings":[...]}. ok: the resolution is well-formed and
resolves this envelope. authority: only for an option whose action_digest
is the JCS digest of the action given with --action. Exit status: 0 ok,
1 not ok, 2 unreadable input.`)
	fs.StringVar(&envPath, "envelope", "", "the envelope (or a tool result carrying it)")
	fs.StringVar(&resPath, "resolution", "", "the resolution ({\"binding_moment_resolution\":{...}} or the inner object)")
	fs.StringVar(&actPath, "action", "", "the action about to be performed (JSON)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if envPath == "" || resPath == "" || fs.NArg() != 0 {
		fmt.Fprintln(e.stderr, "engine binding verify: need --envelope FILE and --resolution FILE")
		return exitUsage
	}
	read := func(p string) ([]byte, bool) {
		b, err := readDoc(e, p)
		if err != nil {
			fmt.Fprintf(e.stderr, "engine binding verify: %v\n", err)
			return nil, false
		}
		return b, true
	}
	envRaw, ok1 := read(envPath)
	resRaw, ok2 := read(resPath)
	if !ok1 || !ok2 {
		return exitUsage
	}
	var action []byte
	if actPath != "" {
		var ok bool
		if action, ok = read(actPath); !ok {
			return exitUsage
		}
	}
	fail := func(f []binding.Finding) int {
		printJSON(e, binding.Verdict{Findings: f})
		return exitRejected
	}
	env, err := binding.FromToolResult(envRaw)
	if err != nil {
		return fail(findingsOf(err))
	}
	res, err := binding.ParseResolution(resRaw)
	if err != nil {
		return fail(findingsOf(err))
	}
	v := binding.Verify(env, res, action)
	printJSON(e, v)
	if v.OK {
		return exitOK
	}
	return exitRejected
}
