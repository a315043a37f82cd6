package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/parley-engine/parley/internal/textsafe"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/substrate"
)

// roots is a repeatable --root flag.
type roots []string

func (r *roots) String() string     { return strings.Join(*r, ",") }
func (r *roots) Set(v string) error { *r = append(*r, v); return nil }

// reverifier is a re-verifier over --root directories, or nil without any.
type reverifier struct{ *substrate.Reverifier }

// open opens the roots (a nil re-verifier when there are none).
func (r roots) open() (*reverifier, error) {
	if len(r) == 0 {
		return nil, nil
	}
	rv, err := substrate.NewReverifier(r...)
	if err != nil {
		return nil, err
	}
	return &reverifier{rv}, nil
}

func (rv *reverifier) verifier() provenance.Verifier {
	if rv == nil {
		return nil
	}
	return rv.Verify
}

func (rv *reverifier) Close() {
	if rv != nil {
		rv.Reverifier.Close()
	}
}

func runProvenance(ctx context.Context, e *env, args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "check":
			return runProvenanceCheck(ctx, e, args[1:])
		case "observe":
			return runProvenanceObserve(e, args[1:])
		case "-h", "-help", "--help", "help":
			provenanceUsage(e.stdout)
			return exitOK
		}
	}
	provenanceUsage(e.stderr)
	return exitUsage
}

func provenanceUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: engine provenance check [flags] FILE|-
       engine provenance observe --root DIR [flags] CLASS

check applies seed 003's admissibility discipline to the annotations of an
artifact (its parley.provenance extension), an annotation set, the
JSON-structured form or in-line bracketed text, re-verifying against --root.
observe reads a substrate under --root and prints the observation id an
annotation of CLASS would carry.

Run "engine provenance check -h" or "engine provenance observe -h" for flags.
`)
}

// checkReport is what check prints with --json.
type checkReport struct {
	Assertions      []provenance.Verdict `json:"assertions"`
	Vocabulary      string               `json:"vocabulary"`
	K               int                  `json:"k"`
	Window          string               `json:"window"`
	At              time.Time            `json:"at"`
	Roots           []string             `json:"roots"`
	Reverifications *substrate.Stats     `json:"reverifications,omitempty"`
}

func runProvenanceCheck(_ context.Context, e *env, args []string) int {
	var p provenance.Params
	var at string
	var rootDirs roots
	var asJSON bool
	fs := newFlags(e, "provenance check", "[--k 2|3] [--window 10m] [--at TIME] [--root DIR]... [--json] FILE|-", `Applies the admissibility discipline of seed 003 §6 to every assertion of
FILE: an artifact (its parley.provenance extension), an annotation set
({"vocabulary":…,"annotations":[…]}), the JSON-structured form of §5 (an
object or an array of {"assertion":…,"provenance":{…}}), or text with in-line
bracketed annotations. An annotation counts when its class is in the
vocabulary, its ts lies within --window before --at and re-verification (when
a --root is given and the class has a local re-verifier) does not contradict
it; toward k = 3 only re-verified, re-queryable annotations count. Prints a
verdict per assertion with every reason (docs/PROVENANCE.md). Exit status:
0 every assertion admitted, 1 some not, 2 unusable input.`)
	fs.IntVar(&p.K, "k", 2, "the floor: distinct substrate classes an assertion needs (2 and 3 are the reference values)")
	fs.DurationVar(&p.Window, "window", 10*time.Minute, "the admissibility window W")
	fs.StringVar(&at, "at", "", "evaluation time, RFC 3339 (default: now)")
	fs.Var(&rootDirs, "root", "a directory to re-verify substrate.code.read, grep, git.log and fs.mtime against (repeatable)")
	fs.BoolVar(&p.MCPBriefRequeryable, "mcp-brief-requeryable", false, "count re-verified substrate.mcp.brief annotations toward k = 3")
	fs.BoolVar(&asJSON, "json", false, `print {"assertions":[{"assertion","admitted","counted","reasons","reverification"}],…}`)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(e.stderr, "engine provenance check: need exactly one FILE argument (- for standard input)")
		return exitUsage
	}
	if p.K < 1 {
		fmt.Fprintln(e.stderr, "engine provenance check: --k must be at least 1")
		return exitUsage
	}
	if p.Window <= 0 {
		fmt.Fprintln(e.stderr, "engine provenance check: --window must be positive")
		return exitUsage
	}
	p.At = time.Now()
	if at != "" {
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			fmt.Fprintf(e.stderr, "engine provenance check: --at %q is not an RFC 3339 time\n", at)
			return exitUsage
		}
		p.At = t
	}
	in, closeIn, err := openInput(e, fs.Arg(0))
	if err != nil {
		fmt.Fprintf(e.stderr, "engine provenance check: %v\n", err)
		return exitUsage
	}
	defer closeIn()
	data, err := io.ReadAll(io.LimitReader(in, 16<<20+1))
	if err != nil {
		fmt.Fprintf(e.stderr, "engine provenance check: %v\n", err)
		return exitUsage
	}
	if len(data) > 16<<20 {
		fmt.Fprintln(e.stderr, "engine provenance check: the input is larger than 16 MiB")
		return exitUsage
	}
	set, err := readAnnotations(data)
	if err != nil {
		fmt.Fprintf(e.stderr, "engine provenance check: %v\n", err)
		return exitUsage
	}
	rep := checkReport{Vocabulary: set.Vocabulary, K: p.K, Window: p.Window.String(), At: p.At.UTC(), Roots: []string{}}
	rv, err := rootDirs.open()
	if err != nil {
		fmt.Fprintf(e.stderr, "engine provenance check: %v\n", err)
		return exitUsage
	}
	defer rv.Close()
	rep.Assertions = provenance.Admit(set, p, rv.verifier())
	if rv != nil {
		rep.Roots = rv.Roots()
		st := rv.Stats()
		rep.Reverifications = &st
	}
	all := len(rep.Assertions) > 0
	for _, v := range rep.Assertions {
		all = all && v.Admitted
	}
	if asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(e.stdout, "%s\n", b)
	} else {
		printVerdicts(e.stdout, rep)
	}
	if all {
		return exitOK
	}
	return exitRejected
}

// readAnnotations reads whichever form data is in.
func readAnnotations(data []byte) (*provenance.Set, error) {
	t := strings.TrimSpace(string(data))
	if t == "" {
		return nil, fmt.Errorf("the input is empty")
	}
	if !strings.HasPrefix(t, "{") && !strings.HasPrefix(t, "[") {
		anns, err := provenance.ParseInline(t)
		if err != nil {
			return nil, err
		}
		return &provenance.Set{Vocabulary: provenance.Vocabulary, Annotations: anns}, nil
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(data, &probe) == nil && (probe["extensions"] != nil || probe["artifact_type"] != nil) {
		var ext map[string]json.RawMessage
		if err := json.Unmarshal(probe["extensions"], &ext); err != nil || ext == nil {
			return nil, fmt.Errorf("the artifact has no extensions: it carries no %s annotations", provenance.Extension)
		}
		raw, ok := ext[provenance.Extension]
		if !ok {
			return nil, fmt.Errorf("the artifact carries no %s extension", provenance.Extension)
		}
		return provenance.ParseSet(raw)
	}
	return provenance.Parse(data)
}

func printVerdicts(w io.Writer, rep checkReport) {
	for _, v := range rep.Assertions {
		state := "ADMITTED    "
		if !v.Admitted {
			state = "NOT ADMITTED"
		}
		counted := "none"
		if len(v.Counted) > 0 {
			counted = strings.Join(v.Counted, ", ")
		}
		fmt.Fprintf(w, "%s %q\n  counted: %s\n", state, v.Assertion, counted)
		for _, c := range v.Reverification {
			cached := ""
			if c.Cached {
				cached = " (cached)"
			}
			fmt.Fprintf(w, "  re-verification %s %s%s: %s\n", textsafe.Line(c.Class), c.Result, cached, textsafe.Line(c.Detail))
		}
		for _, r := range v.Reasons {
			fmt.Fprintf(w, "  %s: %s\n", r.Code, textsafe.Line(r.Message))
		}
	}
	fmt.Fprintf(w, "k = %d, window %s before %s, vocabulary %s", rep.K, rep.Window, rep.At.Format(time.RFC3339), rep.Vocabulary)
	if len(rep.Roots) == 0 {
		fmt.Fprintln(w, ", no --root: nothing re-verified")
		return
	}
	st := rep.Reverifications
	fmt.Fprintf(w, "\nroots %s: %d re-verifications (%d cached): %d verified, %d failed, %d unavailable\n",
		strings.Join(rep.Roots, ", "), st.Checks, st.CacheHits, st.Verified, st.Failed, st.Unavailable)
}

func runProvenanceObserve(e *env, args []string) int {
	var rootDirs roots
	var l provenance.Locator
	var asJSON bool
	fs := newFlags(e, "provenance observe", "--root DIR [--path P] [--offset N] [--limit N] [--pattern RE] [--repo R] [--ref REF] [--json] CLASS", `Reads a substrate under --root as an emitter would and prints the
observation id an annotation of CLASS carries: for substrate.code.read the
SHA-256 of the bytes read (--path, --offset, --limit), for substrate.grep the
SHA-256 of the matching lines (--path, --pattern), for substrate.fs.mtime the
modification time (--path), for substrate.git.log the commit --ref names
(--repo; --path and --pattern must hold in it). With --json, prints the
whole annotation with "ts" set to now, ready for the parley.provenance
extension (add "assertion").`)
	fs.Var(&rootDirs, "root", "a directory the substrate is under (repeatable)")
	fs.StringVar(&l.Path, "path", "", "file path under a root (code.read, grep, fs.mtime) or in the commit (git.log)")
	fs.IntVar(&l.Offset, "offset", 0, "first line, 1-based (code.read, grep)")
	fs.IntVar(&l.Limit, "limit", 0, "number of lines (code.read, grep; 0: to the end)")
	fs.StringVar(&l.Pattern, "pattern", "", "RE2 regular expression (grep; git.log)")
	fs.StringVar(&l.Repo, "repo", "", "repository directory under a root (git.log; default .)")
	fs.StringVar(&l.Ref, "ref", "", "named reference (git.log)")
	fs.BoolVar(&asJSON, "json", false, "print the annotation as JSON")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 || len(rootDirs) == 0 {
		fmt.Fprintln(e.stderr, "engine provenance observe: need --root and exactly one CLASS (substrate.code.read, substrate.grep, substrate.git.log or substrate.fs.mtime)")
		return exitUsage
	}
	if l.Offset < 0 || l.Limit < 0 {
		fmt.Fprintln(e.stderr, "engine provenance observe: --offset and --limit must not be negative")
		return exitUsage
	}
	rv, err := substrate.NewReverifier(rootDirs...)
	if err != nil {
		fmt.Fprintf(e.stderr, "engine provenance observe: %v\n", err)
		return exitUsage
	}
	defer rv.Close()
	class := fs.Arg(0)
	id, err := rv.Observe(class, l)
	if err != nil {
		fmt.Fprintf(e.stderr, "engine provenance observe: %v\n", err)
		return exitRejected
	}
	if !asJSON {
		fmt.Fprintln(e.stdout, id)
		return exitOK
	}
	now := time.Now().UTC().Truncate(time.Second)
	b, _ := json.Marshal(provenance.Annotation{Class: class, ObservationID: id, TS: &now, Locator: &l})
	fmt.Fprintf(e.stdout, "%s\n", b)
	return exitOK
}
