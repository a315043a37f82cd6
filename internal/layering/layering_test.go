package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/parley-engine/parley/"

// cores are the pure cores, each with the parley packages it may depend on
// (transitively): the layers below it.
var cores = map[string][]string{
	"wire":        {},
	"canon":       {},
	"events":      {"canon"},
	"api":         {"canon", "events"},
	"closure":     {"canon", "events"},
	"provenance":  {"canon", "events"},
	"binding":     {"canon", "events"},
	"projector":   {"api", "binding", "canon", "events", "closure", "provenance", "signing", "tlog", "wire"},
	"termination": {"api", "binding", "canon", "events", "closure", "provenance", "projector", "signing", "tlog", "wire"},
	// Signatures of artifacts and the log of a deliberation's record:
	// beside the fold, below what will check them (the projector,
	// audit). Their witness cosignatures (tlog/cosign) read the clock and
	// are not a core.
	"signing": {"canon", "wire"},
	"tlog":    {"wire"},
	// The partition of a deliberation and the stream layouts: a function
	// of subjects every client computes, no NATS.
	"partition": {"wire"},
}

// exempt are the banned imports a core may have, and why.
var exempt = map[string]map[string]string{
	// The subject grammar the fold routes by lives beside the publishers'
	// dedupe ids, whose key NewMsgIDs draws; the fold never calls it.
	"wire": {"crypto/rand": "a publisher's dedupe key (wire.NewMsgIDs)"},
}

// bannedDep reports whether a pure core may not depend on path at all,
// however indirectly: processes, the network, NATS. nkeys, NATS's
// encoding of Ed25519 keys, does no IO: signing and tlog read keys with
// it.
func bannedDep(path string) bool {
	switch {
	case path == "github.com/nats-io/nkeys":
		return false
	case path == "os/exec", path == "net", strings.HasPrefix(path, "net/"), path == "crypto/tls",
		strings.HasPrefix(path, "github.com/nats-io/"), strings.HasPrefix(path, "golang.org/x/net/"):
		return true
	}
	return false
}

// bannedImport is what no file of a pure core imports itself. os is only
// banned here, not as a dependency: fmt, encoding/gob and x/text import it
// (fmt.Printf writes to os.Stdout), so every package that formats an error
// depends on it without doing IO.
var bannedImport = map[string]string{
	"os":           "files and processes",
	"os/exec":      "processes",
	"os/signal":    "signals",
	"syscall":      "system calls",
	"io/ioutil":    "files",
	"log":          "logging",
	"log/slog":     "logging",
	"math/rand":    "randomness",
	"math/rand/v2": "randomness",
	"crypto/rand":  "randomness",
	"net":          "the network",
	"net/http":     "the network",
	"unsafe":       "unchecked memory",
}

// clock are the time functions a pure core must not use (call or take as
// a value): the time is an input of the fold (Msg.Time), never read.
var clock = []string{"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker"}

type pkg struct {
	ImportPath string
	Dir        string
	Standard   bool
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
	Error      *struct{ Err string }
}

// list runs go list -deps -json over the packages and returns them by
// import path.
func list(t *testing.T, paths ...string) map[string]*pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps", "-json"}, paths...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	all := map[string]*pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		all[p.ImportPath] = &p
	}
	return all
}

// deps returns path's transitive dependencies (itself included).
func deps(all map[string]*pkg, path string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		if seen[p] || all[p] == nil {
			return
		}
		seen[p] = true
		for _, i := range all[p].Imports {
			walk(i)
		}
	}
	walk(path)
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// depProblems lists what makes the dependencies of core (an import path)
// impure or point the wrong way; allowed are the parley packages it may
// depend on.
func depProblems(all map[string]*pkg, core string, allowed []string) []string {
	var out []string
	for _, d := range deps(all, core) {
		switch {
		case d == core:
		case bannedDep(d):
			out = append(out, "depends on "+d)
		case strings.HasPrefix(d, module) && !slices.Contains(allowed, strings.TrimPrefix(d, module)):
			out = append(out, "depends on "+d+", which is not below it")
		}
	}
	return out
}

// scan lists what a file of a pure core must not do: import a banned
// package, use a clock function of package time (however time is named
// in the file), or start a goroutine.
func scan(fset *token.FileSet, f *ast.File) []string {
	var out []string
	where := func(n ast.Node) string { return fset.Position(n.Pos()).String() }
	timeNames := map[string]bool{}
	dotTime := false
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		if why, ok := bannedImport[path]; ok {
			out = append(out, fmt.Sprintf("%s: imports %s (%s)", where(im), path, why))
		}
		if path != "time" {
			continue
		}
		switch {
		case im.Name == nil:
			timeNames["time"] = true
		case im.Name.Name == ".":
			dotTime = true
		case im.Name.Name != "_":
			timeNames[im.Name.Name] = true
		}
	}
	sels := map[*ast.Ident]bool{} // the names after a dot: never package time's
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			out = append(out, where(n)+": starts a goroutine")
		case *ast.SelectorExpr:
			sels[n.Sel] = true
			if x, ok := n.X.(*ast.Ident); ok && timeNames[x.Name] && x.Obj == nil && slices.Contains(clock, n.Sel.Name) {
				out = append(out, fmt.Sprintf("%s: reads the clock (%s.%s)", where(n), x.Name, n.Sel.Name))
			}
		case *ast.Ident:
			if dotTime && n.Obj == nil && !sels[n] && slices.Contains(clock, n.Name) {
				out = append(out, fmt.Sprintf("%s: reads the clock (%s, dot-imported)", where(n), n.Name))
			}
		}
		return true
	})
	return out
}

// scanPackage parses the non-test Go files of p and scans them.
func scanPackage(t *testing.T, p *pkg) []string {
	t.Helper()
	fset := token.NewFileSet()
	var out []string
	files := append(slices.Clone(p.GoFiles), p.CgoFiles...)
	if len(files) == 0 {
		t.Fatalf("%s: no Go files", p.ImportPath)
	}
	for _, name := range files {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, scan(fset, f)...)
	}
	return out
}

// The pure cores take values and return values: no process, no network, no
// NATS, no file, no clock, no goroutine; and each depends only on the
// cores below it. The package that does the re-verification IO
// (substrate) is the control: the same checks find it out.
func TestPureCores(t *testing.T) {
	paths := []string{module + "substrate"}
	for c := range cores {
		paths = append(paths, module+c)
	}
	all := list(t, paths...)
	for c, allowed := range cores {
		for _, p := range depProblems(all, module+c, allowed) {
			t.Errorf("%s %s", c, p)
		}
	scan:
		for _, p := range scanPackage(t, all[module+c]) {
			for path := range exempt[c] {
				if strings.Contains(p, ": imports "+path+" (") {
					continue scan
				}
			}
			t.Errorf("%s: %s", c, p)
		}
	}
	// Every parley package a core depends on is a core itself (and so
	// checked above).
	for c := range cores {
		for _, d := range deps(all, module+c) {
			if strings.HasPrefix(d, module) {
				if _, ok := cores[strings.TrimPrefix(d, module)]; !ok {
					t.Errorf("%s depends on %s, which is not a pure core", c, d)
				}
			}
		}
	}
	// The control: substrate runs git and reads files, and is not below
	// the fold.
	sub := module + "substrate"
	if p := depProblems(all, sub, []string{"canon", "events", "provenance"}); !slices.Contains(p, "depends on os/exec") {
		t.Errorf("the dependency check misses substrate's os/exec: %q", p)
	}
	if p := strings.Join(scanPackage(t, all[sub]), "\n"); !strings.Contains(p, "imports os (") || !strings.Contains(p, "time.Now") || !strings.Contains(p, "imports os/exec") {
		t.Errorf("the source scan misses substrate's files, processes or clock:\n%s", p)
	}
}

// The scan finds the clock however time is imported, a goroutine, and a
// banned import; and it does not mistake a local variable named time, a
// time.Time or a Duration for the clock.
func TestScan(t *testing.T) {
	for _, c := range []struct {
		src  string
		want []string
	}{
		{`package p; import "time"; func f() time.Time { return time.Now() }`, []string{"time.Now"}},
		{`package p; import "time"; var now = time.Now`, []string{"time.Now"}},
		{`package p; import clock "time"; func f() { clock.Sleep(clock.Second) }`, []string{"clock.Sleep"}},
		{`package p; import . "time"; func f() <-chan Time { return After(Second) }`, []string{"After, dot-imported"}},
		{`package p; import "time"; func f(d time.Duration) { _ = time.NewTicker(d); _ = time.NewTimer(d); _ = time.Since(time.Time{}) }`, []string{"time.NewTicker", "time.NewTimer", "time.Since"}},
		{`package p; func f() { go func() {}() }`, []string{"starts a goroutine"}},
		{`package p; import ("os"; "net/http"); var _ = os.Args; var _ = http.Get`, []string{"imports os (", "imports net/http"}},
		{`package p; import "time"; func f(t time.Time, d time.Duration) time.Time { return t.Add(d).UTC() }`, nil},
		{`package p; import "time"; type s struct{ Now func() }; func f(x s, t time.Time) { x.Now(); _ = t.Unix() }`, nil},
		{`package p; import "time"; func f() { time := struct{ Now func() }{}; time.Now() }`, nil},
		{`package p; import . "time"; type s struct{ Sleep func() }; func f(x s) Duration { x.Sleep(); return Second }`, nil},
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "p.go", c.src, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := scan(fset, f)
		if len(got) != len(c.want) {
			t.Errorf("%s: %q, want %d findings", c.src, got, len(c.want))
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: %q, want %q", c.src, got[i], w)
			}
		}
	}
}

// above are the parley packages the pages (web) may not depend on: the
// engine's assembly, which mounts them and hands them what they need of
// the query API, and what is built on it.
var above = []string{"service", "httpapi", "bindwrite", "relay", "mcpserver", "cmd/engine", "cmd/relay"}

// The pages are below the engine's assembly: web depends on none of the
// packages above it. The control: service depends on web (it mounts the
// pages), and the same walk finds it.
func TestPagesBelowService(t *testing.T) {
	all := list(t, module+"web", module+"service")
	for _, d := range deps(all, module+"web") {
		if slices.Contains(above, strings.TrimPrefix(d, module)) {
			t.Errorf("web depends on %s, which is above it", d)
		}
	}
	if !slices.Contains(deps(all, module+"service"), module+"web") {
		t.Error("the dependency walk misses service's import of web")
	}
}

// nkeys is the one package of NATS a core may depend on: the client, the
// server and jwt stay banned.
func TestBannedNATS(t *testing.T) {
	for path, want := range map[string]bool{
		"github.com/nats-io/nkeys":                 false,
		"github.com/nats-io/nats.go":               true,
		"github.com/nats-io/nats-server/v2/server": true,
		"github.com/nats-io/jwt/v2":                true,
	} {
		if bannedDep(path) != want {
			t.Errorf("bannedDep(%s) = %v", path, !want)
		}
	}
}

// parts are the packages the engine's assembly (service) is made of, each
// with the parley packages it may import (directly; non-test files). None
// imports service, nor another part but those listed: they meet through
// small interfaces, and service wires them together.
var parts = map[string][]string{
	"readmodel": {"api", "binding", "canon", "closure", "events", "ledger", "projector", "runner", "substrate", "wire"},
	"microapi":  {"api", "readmodel", "wire"},
	"bindwrite": {"api", "binding", "events", "ledger", "projector", "runner", "signing", "wire"},
	"httpapi":   {"api", "binding", "canon", "health", "readmodel", "web", "wire"},
	"health":    {"api", "ledger", "metrics", "runner", "wire"},
	"metrics":   {"api", "internal/httplimit", "internal/reclaim", "microapi", "projector", "provenance", "readmodel", "runner", "substrate", "web"},
	"natsconn":  {"embedded", "ledger", "partition", "wire"},
	// The data directory's lock and the descriptors' plan: helpers of the
	// assembly, on the standard library only.
	"internal/datadir": {},
	"internal/fdplan":  {},
}

// Each part of the engine imports only what parts lists for it. The
// control: service imports a part, which no part may.
func TestParts(t *testing.T) {
	paths := []string{module + "service"}
	for p := range parts {
		paths = append(paths, module+p)
	}
	all := list(t, paths...)
	for p, allowed := range parts {
		for _, i := range all[module+p].Imports {
			if name, ok := strings.CutPrefix(i, module); ok && !slices.Contains(allowed, name) {
				t.Errorf("%s imports %s, which is not among its allowed imports", p, name)
			}
		}
	}
	for _, p := range []string{"metrics", "natsconn", "internal/datadir", "internal/fdplan"} {
		if !slices.Contains(all[module+"service"].Imports, module+p) {
			t.Errorf("the import check misses service's import of %s", p)
		}
	}
}

// assemblers may import the engine's assembly (service): the programs, the
// bench programs and their kit, and the relay, an application that starts
// engines of its own (relay/engine.go, its one door). No library below
// them does: the parts meet through their own interfaces.
func assembler(path string) bool {
	name := strings.TrimPrefix(path, module)
	return strings.HasPrefix(name, "cmd/") || strings.HasPrefix(name, "bench/") || strings.HasPrefix(name, "examples/") ||
		name == "internal/benchkit" || name == "relay"
}

// Only assemblers import service. The control: cmd/engine does.
func TestAssemblyImporters(t *testing.T) {
	all := list(t, module+"...")
	seen := false
	for path, p := range all {
		if !strings.HasPrefix(path, module) || !slices.Contains(p.Imports, module+"service") {
			continue
		}
		if path == module+"cmd/engine" {
			seen = true
		}
		if !assembler(path) {
			t.Errorf("%s imports service, the engine's assembly", path)
		}
	}
	if !seen {
		t.Error("the check misses cmd/engine's import of service")
	}
}
