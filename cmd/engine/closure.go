package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/termination"
)

func runClosure(ctx context.Context, e *env, args []string) int {
	var decision string
	var at uint64
	var lim closure.Limits
	var maxSize int
	var rootDirs roots
	fs := newFlags(e, "closure", "--decision ID [--at SEQ] [--root DIR]... FILE.jsonl|-", `Verifies a decision's closure (docs/ARCHITECTURE.md) over a recording: an artifact log (one
artifact per line, in stream order; the line number is the position) or a
stream recording (positions are the stream's, as live). Messages that are
not valid artifacts are skipped and counted on standard error (they never
entered a DAG). Prints {"ok":…,"decision":…,"status":…,
"position":…,"closure_size":…,"findings":[…]}. A stream recording's charter
may require admissible provenance (docs/PROVENANCE.md): --root re-verifies
annotations as the engine's --provenance-root does. Exit status: 0 ok, 1 not
ok, 2 for unusable input (no such decision, an unreadable file).`)
	fs.StringVar(&decision, "decision", "", "the DECISION's artifact id (sha256:…)")
	fs.Uint64Var(&at, "at", 0, "verification position (default: the decision's own); later positions also report challenges")
	fs.IntVar(&lim.MaxSize, "max-closure", closure.DefaultLimits.MaxSize, "largest audited set")
	fs.IntVar(&lim.MaxDepth, "max-depth", closure.DefaultLimits.MaxDepth, "most references followed in a row")
	fs.IntVar(&lim.MaxFanout, "max-references", closure.DefaultLimits.MaxFanout, "most references of one artifact")
	fs.IntVar(&maxSize, "max-size", canon.DefaultMaxSize, "largest artifact line, in bytes")
	fs.Var(&rootDirs, "root", "a directory to re-verify provenance annotations against (repeatable)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	rv, err := rootDirs.open()
	if err != nil {
		fmt.Fprintf(e.stderr, "engine closure: %v\n", err)
		return exitUsage
	}
	defer rv.Close()
	verify := rv.verifier()
	d, ok := canon.ParseDigest(decision)
	if !ok {
		fmt.Fprintln(e.stderr, "engine closure: --decision must be sha256:<64 lowercase hex>")
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(e.stderr, "engine closure: need exactly one FILE.jsonl argument (- for standard input)")
		return exitUsage
	}
	in, closeIn, err := openInput(e, fs.Arg(0))
	if err != nil {
		fmt.Fprintf(e.stderr, "engine closure: %v\n", err)
		return exitUsage
	}
	defer closeIn()
	g, skipped, err := readRecording(ctx, in, maxSize, verify)
	if err != nil {
		fmt.Fprintf(e.stderr, "engine closure: %v\n", err)
		return exitUsage
	}
	if skipped > 0 {
		fmt.Fprintf(e.stderr, "engine closure: skipped %d messages that are not valid artifacts (rejections)\n", skipped)
	}
	r := closure.Verify(g, d, at, lim)
	b, _ := json.Marshal(r)
	fmt.Fprintf(e.stdout, "%s\n", b)
	switch {
	case r.OK:
		return exitOK
	case len(r.Findings) > 0 && (r.Findings[0].Code == closure.CodeUnknownDecision || r.Findings[0].Code == closure.CodeNotADecision):
		return exitUsage
	}
	return exitRejected
}

// readRecording reads a recording into a graph: an artifact log into a
// MemGraph (positions are line numbers), a stream recording through the
// projector's fold (positions are stream positions, as live).
func readRecording(ctx context.Context, in io.Reader, maxSize int, verify provenance.Verifier) (closure.Graph, int, error) {
	r, err := recording.NewReader(in)
	if err != nil {
		return nil, 0, err
	}
	v := events.NewValidator(events.WithCanonOptions(canon.WithMaxSize(maxSize)))
	skipped := 0
	if r.Format() == recording.Stream {
		p := projector.New(projector.Options{Validator: v, Rules: termination.Rules{}})
		for {
			if ctx.Err() != nil {
				return nil, 0, ctx.Err()
			}
			m, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, 0, err
			}
			msg := projector.Msg{Seq: m.Position, Subject: m.Subject, Data: m.Data, Time: m.Time, Signature: m.Signature}
			p.Prepare(&msg, verify) // re-verification, as live, before the fold
			if o := p.Apply(msg); o.Rejection != nil {
				skipped++
			}
		}
		d := p.Deliberation(r.Header().Deliberation)
		if d == nil {
			return nil, 0, fmt.Errorf("the recording never opens deliberation %s", r.Header().Deliberation)
		}
		return d, skipped, nil
	}
	g := closure.NewMemGraph()
	for {
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		m, err := r.Next()
		if err == io.EOF {
			return g, skipped, nil
		}
		if err != nil {
			return nil, 0, err
		}
		if len(m.Data) > maxSize {
			skipped++
		} else if a, err := v.ValidateTransient(m.Data); err != nil {
			skipped++
		} else {
			g.Add(a, m.Position)
		}
	}
}
