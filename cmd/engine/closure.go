package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
)

func runClosure(ctx context.Context, e *env, args []string) int {
	var decision string
	var at uint64
	var lim closure.Limits
	var maxSize int
	fs := newFlags(e, "closure", "--decision ID [--at SEQ] FILE.jsonl|-", `Verifies a decision's closure (DESIGN §5) over a recording: one artifact per
line, in stream order; the line number is the artifact's position. Lines
that are not valid artifacts are skipped and counted on standard error
(they never entered a DAG). Prints {"ok":…,"decision":…,"status":…,
"position":…,"closure_size":…,"findings":[…]}. Exit status: 0 ok, 1 not ok,
2 for unusable input (no such decision, an unreadable file).`)
	fs.StringVar(&decision, "decision", "", "the DECISION's artifact id (sha256:…)")
	fs.Uint64Var(&at, "at", 0, "verification position (default: the decision's own); later positions also report challenges")
	fs.IntVar(&lim.MaxSize, "max-closure", closure.DefaultLimits.MaxSize, "largest audited set")
	fs.IntVar(&lim.MaxDepth, "max-depth", closure.DefaultLimits.MaxDepth, "most references followed in a row")
	fs.IntVar(&lim.MaxFanout, "max-references", closure.DefaultLimits.MaxFanout, "most references of one artifact")
	fs.IntVar(&maxSize, "max-size", canon.DefaultMaxSize, "largest artifact line, in bytes")
	if code, ok := parse(fs, args); !ok {
		return code
	}
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
	g, skipped, err := readRecording(ctx, in, maxSize)
	if err != nil {
		fmt.Fprintf(e.stderr, "engine closure: %v\n", err)
		return exitUsage
	}
	if skipped > 0 {
		fmt.Fprintf(e.stderr, "engine closure: skipped %d lines that are not valid artifacts\n", skipped)
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

// readRecording reads a JSONL recording into a graph, streaming: only the
// graph, not the bodies, is kept.
func readRecording(ctx context.Context, in io.Reader, maxSize int) (*closure.MemGraph, int, error) {
	g := closure.NewMemGraph()
	v := events.NewValidator(events.WithCanonOptions(canon.WithMaxSize(maxSize)))
	r := bufio.NewReaderSize(in, 64<<10)
	skipped := 0
	var line []byte
	for n := uint64(1); ; n++ {
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		line = line[:0]
		over, eof := false, false
		for {
			chunk, err := r.ReadSlice('\n')
			if !over {
				if len(line)+len(chunk) > maxSize+1 {
					over = true
				} else {
					line = append(line, chunk...)
				}
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err == io.EOF {
				eof = true
			} else if err != nil {
				return nil, 0, fmt.Errorf("read line %d: %w", n, err)
			}
			break
		}
		if eof && len(line) == 0 && !over {
			return g, skipped, nil
		}
		if len(line) > 0 && line[len(line)-1] == '\n' {
			line = line[:len(line)-1]
		}
		if over {
			skipped++
		} else if a, err := v.ValidateTransient(line); err != nil {
			skipped++
		} else {
			g.Add(a, n)
		}
		if eof {
			return g, skipped, nil
		}
	}
}
