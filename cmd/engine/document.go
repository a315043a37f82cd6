package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
)

// docFlags are the flags every document command shares.
type docFlags struct {
	jsonl    bool
	maxSize  int
	maxDepth int
}

func (f *docFlags) register(fs interface {
	BoolVar(*bool, string, bool, string)
	IntVar(*int, string, int, string)
}) {
	fs.BoolVar(&f.jsonl, "jsonl", false, "treat every input line (split on \\n only) as one document and print one result object per line")
	fs.IntVar(&f.maxSize, "max-size", canon.DefaultMaxSize, "largest document in bytes")
	fs.IntVar(&f.maxDepth, "max-depth", canon.DefaultMaxDepth, "deepest nesting of arrays and objects")
}

func (f *docFlags) canonOptions() []canon.Option {
	return []canon.Option{canon.WithMaxSize(f.maxSize), canon.WithMaxDepth(f.maxDepth)}
}

// processor handles one document: it appends a result object to dst (for
// canon without --jsonl, the raw canonical bytes). ok reports acceptance.
type processor func(dst, doc []byte) (out []byte, ok bool)

const docAbout = `FILE is a path, or - for standard input. Without --jsonl the result goes
to standard output and a rejection to standard error; with --jsonl every
result goes to standard output, one per input line, in order, in constant
memory. Exit status: 0 when every document is accepted, 1 when one is
rejected, 2 for bad arguments or unreadable input.`

func runID(ctx context.Context, e *env, args []string) int {
	var f docFlags
	fs := newFlags(e, "id", "[--jsonl] [--max-size N] [--max-depth N] FILE|-",
		"Prints {\"ok\":true,\"artifact_id\":\"sha256:...\"}: the SHA-256 of the AMD canonical form\nwith the top-level artifact_id removed.\n\n"+docAbout)
	f.register(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	c := canon.New(canon.AMD, f.canonOptions()...)
	return runDocuments(ctx, e, fs.Args(), f, false, func(dst, doc []byte) ([]byte, bool) {
		_, id, err := c.ID(doc)
		if err != nil {
			return appendError(dst, err), false
		}
		dst = append(dst, `{"ok":true,"artifact_id":"`...)
		dst = id.AppendText(dst)
		return append(dst, `"}`...), true
	})
}

func runCanon(ctx context.Context, e *env, args []string) int {
	var f docFlags
	var jcs bool
	fs := newFlags(e, "canon", "[--jcs] [--jsonl] [--max-size N] [--max-depth N] FILE|-",
		"Prints the canonical bytes, with no newline (with --jsonl, {\"ok\":true,\"canonical\":\"...\"}).\nThe AMD profile by default; --jcs for RFC 8785 with the profile bounds.\n\n"+docAbout)
	f.register(fs)
	fs.BoolVar(&jcs, "jcs", false, "canonicalize with JCS instead of the AMD profile")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	p := canon.AMD
	if jcs {
		p = canon.JCS
	}
	c := canon.New(p, f.canonOptions()...)
	return runDocuments(ctx, e, fs.Args(), f, !f.jsonl, func(dst, doc []byte) ([]byte, bool) {
		out, err := c.Append(dst, doc)
		if err != nil {
			return appendError(dst, err), false
		}
		if !f.jsonl {
			return out, true
		}
		canonical := out[len(dst):]
		// Quote it after the prefix; the canonical bytes are valid UTF-8.
		tmp := append([]byte(nil), canonical...)
		dst = append(dst, `{"ok":true,"canonical":`...)
		return append(canon.AppendString(dst, tmp), '}'), true
	})
}

func runVerify(ctx context.Context, e *env, args []string) int {
	var f docFlags
	var profileOnly bool
	fs := newFlags(e, "verify", "[--profile-only] [--jsonl] [--max-size N] [--max-depth N] FILE|-",
		"Verifies an artifact: the canonical profile, the artifact_id (present, of the form\nsha256:<64 lowercase hex>, equal to the recomputed id) and the artifact\nsemantics of protocol 0.1. --profile-only stops after the identifier, like the\nupstream verifier. Prints {\"ok\":true,\"artifact_id\":...,\"artifact_type\":...}.\n\n"+docAbout)
	f.register(fs)
	fs.BoolVar(&profileOnly, "profile-only", false, "check the canonical profile and the identifier only")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	c := canon.New(canon.AMD, f.canonOptions()...)
	v := events.NewValidator(events.WithCanonOptions(f.canonOptions()...))
	return runDocuments(ctx, e, fs.Args(), f, false, func(dst, doc []byte) ([]byte, bool) {
		if profileOnly {
			_, id, err := c.Verify(doc)
			if err != nil {
				return appendError(dst, err), false
			}
			dst = append(dst, `{"ok":true,"artifact_id":"`...)
			return append(id.AppendText(dst), `"}`...), true
		}
		a, err := v.Validate(doc)
		if err != nil {
			return appendError(dst, err), false
		}
		dst = append(dst, `{"ok":true,"artifact_id":"`...)
		dst = a.ID.AppendText(dst)
		dst = append(dst, `","artifact_type":`...)
		return append(canon.AppendString(dst, []byte(a.Type)), '}'), true
	})
}

func runSeal(ctx context.Context, e *env, args []string) int {
	var f docFlags
	fs := newFlags(e, "seal", "[--jsonl] [--max-size N] [--max-depth N] FILE|-",
		"Seals an artifact: computes the artifact_id of the document (any artifact_id it\nhas is replaced), checks the artifact semantics, and prints the canonical bytes\nwith the id in place, with no newline (with --jsonl, {\"ok\":true,\"artifact\":\"...\",\n\"artifact_id\":\"...\"}): what a participant publishes.\n\n"+docAbout)
	f.register(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	c := canon.New(canon.AMD, f.canonOptions()...)
	v := events.NewValidator(events.WithCanonOptions(f.canonOptions()...))
	return runDocuments(ctx, e, fs.Args(), f, !f.jsonl, func(dst, doc []byte) ([]byte, bool) {
		a, err := seal(c, v, doc)
		if err != nil {
			return appendError(dst, err), false
		}
		if !f.jsonl {
			return append(dst, a.Canonical...), true
		}
		dst = append(dst, `{"ok":true,"artifact":`...)
		dst = canon.AppendString(dst, a.Canonical)
		dst = append(dst, `,"artifact_id":"`...)
		return append(a.ID.AppendText(dst), `"}`...), true
	})
}

// seal computes the artifact_id of doc (replacing any it has), puts it in
// place and checks the artifact: what engine seal prints.
func seal(c *canon.Canonicalizer, v *events.Validator, doc []byte) (*events.Artifact, error) {
	canonical, id, err := c.ID(doc)
	if err != nil {
		return nil, err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(canonical, &members); err != nil {
		return nil, err
	}
	members["artifact_id"] = json.RawMessage(`"` + id.String() + `"`)
	sealed, _ := json.Marshal(members)
	return v.Validate(sealed)
}

func runJCS(ctx context.Context, e *env, args []string) int {
	var f docFlags
	fs := newFlags(e, "jcs", "[--jsonl] [--max-size N] [--max-depth N] FILE|-",
		"Prints {\"ok\":true,\"digest\":\"sha256:...\",\"canonical_length\":N}: the SHA-256 of the\nRFC 8785 canonical form under the profile bounds (the binding-moment envelope\nand action digest).\n\n"+docAbout)
	f.register(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	c := canon.New(canon.JCS, f.canonOptions()...)
	return runDocuments(ctx, e, fs.Args(), f, false, func(dst, doc []byte) ([]byte, bool) {
		b, d, err := c.Digest(doc)
		if err != nil {
			return appendError(dst, err), false
		}
		dst = append(dst, `{"ok":true,"digest":"`...)
		dst = d.AppendText(dst)
		dst = append(dst, `","canonical_length":`...)
		return append(strconv.AppendInt(dst, int64(len(b)), 10), '}'), true
	})
}

// appendError appends the error object.
func appendError(dst []byte, err error) []byte {
	var class, code, msg, path string
	offset := int64(-1)
	var ce *canon.Error
	var ee *events.Error
	switch {
	case errors.As(err, &ce):
		class, code, msg, offset = string(ce.Class), ce.Code, ce.Msg, ce.Offset
	case errors.As(err, &ee):
		class, code, msg, path = ee.Class, ee.Code, ee.Msg, ee.Path
	default:
		class, code, msg = "internal", "internal", err.Error()
	}
	dst = append(dst, `{"ok":false,"error_class":`...)
	dst = canon.AppendString(dst, []byte(class))
	dst = append(dst, `,"code":`...)
	dst = canon.AppendString(dst, []byte(code))
	dst = append(dst, `,"message":`...)
	dst = canon.AppendString(dst, []byte(msg))
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, offset, 10)
	if path != "" {
		dst = append(dst, `,"path":`...)
		dst = canon.AppendString(dst, []byte(path))
	}
	return append(dst, '}')
}

// runDocuments reads FILE and runs p on it, or on each of its lines. raw
// output (canon's) is written without a trailing newline.
func runDocuments(ctx context.Context, e *env, args []string, f docFlags, raw bool, p processor) int {
	if len(args) != 1 {
		fmt.Fprintln(e.stderr, "engine: need exactly one FILE argument (- for standard input)")
		return exitUsage
	}
	in, closeIn, err := openInput(e, args[0])
	if err != nil {
		fmt.Fprintf(e.stderr, "engine: %v\n", err)
		return exitUsage
	}
	defer closeIn()
	if f.jsonl {
		return streamLines(ctx, e, in, f.maxSize, p)
	}
	doc, err := io.ReadAll(io.LimitReader(in, int64(f.maxSize)+1))
	if err != nil {
		fmt.Fprintf(e.stderr, "engine: read %s: %v\n", args[0], err)
		return exitUsage
	}
	out, ok := p(nil, doc)
	if !ok {
		e.stderr.Write(append(out, '\n'))
		return exitRejected
	}
	if !raw {
		out = append(out, '\n')
	}
	if _, err := e.stdout.Write(out); err != nil {
		fmt.Fprintf(e.stderr, "engine: write: %v\n", err)
		return exitUsage
	}
	return exitOK
}

func openInput(e *env, path string) (io.Reader, func(), error) {
	if path == "-" {
		return e.stdin, func() {}, nil
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	return fh, func() { fh.Close() }, nil
}

// streamLines runs p on every line of in: split on '\n' only, the line's
// bytes exactly (the terminator excluded). Memory stays bounded by the size
// limit whatever the input: a longer line is skipped to its end and
// reported as limit.size.
func streamLines(ctx context.Context, e *env, in io.Reader, maxSize int, p processor) int {
	r := bufio.NewReaderSize(in, 64<<10)
	w := bufio.NewWriterSize(e.stdout, 64<<10)
	defer w.Flush()
	var lines, bytesRead atomic.Int64
	stopProgress := startProgress(e, &lines, &bytesRead)
	defer stopProgress()

	code := exitOK
	line := make([]byte, 0, 64<<10)
	out := make([]byte, 0, 64<<10)
	for n := int64(1); ; n++ {
		if n&1023 == 0 && ctx.Err() != nil {
			w.Flush()
			fmt.Fprintf(e.stderr, "engine: interrupted after %d lines\n", n-1)
			return 130
		}
		line = line[:0]
		over, eof := false, false
		for {
			chunk, err := r.ReadSlice('\n')
			bytesRead.Add(int64(len(chunk)))
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
				w.Flush()
				fmt.Fprintf(e.stderr, "engine: read line %d: %v\n", n, err)
				return exitUsage
			}
			break
		}
		if eof && len(line) == 0 && !over {
			return code
		}
		if !eof && !over {
			line = line[:len(line)-1] // the '\n' is not part of the document
		}
		var ok bool
		if over {
			out, ok = appendError(out[:0], &canon.Error{Class: canon.UnsupportedValue, Code: canon.ErrSize.Code, Offset: int64(maxSize),
				Msg: canon.ErrSize.Msg + ": limit " + strconv.Itoa(maxSize) + " bytes"}), false
		} else {
			out, ok = p(out[:0], line)
		}
		if !ok {
			code = exitRejected
		}
		out = append(out[:len(out)-1], `,"line":`...) // inside the object
		out = strconv.AppendInt(out, n, 10)
		out = append(out, "}\n"...)
		if _, err := w.Write(out); err != nil {
			fmt.Fprintf(e.stderr, "engine: write: %v\n", err)
			return exitUsage
		}
		lines.Store(n)
		if eof {
			return code
		}
	}
}

// startProgress reports progress on standard error when it is a terminal,
// and stays quiet when it is not.
func startProgress(e *env, lines, bytesRead *atomic.Int64) func() {
	fh, ok := e.stderr.(*os.File)
	if !ok {
		return func() {}
	}
	if st, err := fh.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(fh, "\r\033[K")
				return
			case <-t.C:
				mb := float64(bytesRead.Load()) / 1e6
				fmt.Fprintf(fh, "\r\033[K%d lines, %.1f MB, %.1f MB/s", lines.Load(), mb, mb/time.Since(start).Seconds())
			}
		}
	}()
	return func() { close(done); <-finished }
}
