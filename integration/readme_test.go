package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	ev "github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/wire"
)

// readmeCommand is a command of one of the README's console blocks, with
// the output the README shows for it and the exit status it says.
type readmeCommand struct {
	line   int // in README.md
	text   string
	output []string
	exit   int
}

var exitComment = regexp.MustCompile(`#\s*exit (\d)`)

// readmeCommands parses the README's ```console blocks: a command after
// "$ " (continued on the next line after a trailing backslash), then the
// lines it prints, up to the next command or the end of the block.
func readmeCommands(t *testing.T, path string) []readmeCommand {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []readmeCommand
	in, cont := false, false
	for i, l := range strings.Split(string(b), "\n") {
		switch {
		case !in && strings.TrimSpace(l) == "```console":
			in = true
		case in && strings.TrimSpace(l) == "```":
			in, cont = false, false
		case !in:
		case cont:
			c := &cmds[len(cmds)-1]
			c.text += "\n" + l
			cont = strings.HasSuffix(l, `\`)
		case strings.HasPrefix(l, "$ "):
			cmds = append(cmds, readmeCommand{line: i + 1, text: strings.TrimPrefix(l, "$ ")})
			cont = strings.HasSuffix(l, `\`)
		case len(cmds) > 0 && l != "":
			c := &cmds[len(cmds)-1]
			c.output = append(c.output, l)
		}
	}
	for i := range cmds {
		if m := exitComment.FindStringSubmatch(cmds[i].text); m != nil {
			cmds[i].exit, _ = strconv.Atoi(m[1])
		}
	}
	return cmds
}

// The README's commands, run as a newcomer runs them, in order, in one
// shell, against an engine that already holds other deliberations: each
// command exits as the README says, and prints what the README shows, in
// shape (every documented line, in order; "…" stands for what differs
// from one engine to the next: ids, stream positions, times; ordinals,
// artifact ids, codes and messages are compared exactly). A README that
// drifts from the commands breaks this test.
func TestREADME_NewcomerPath(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the README's walkthrough and a twelve-round relay")
	}
	for _, tool := range []string{"bash", "curl", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED: no %s; the README's commands are not run", tool)
		}
	}
	cmds := readmeCommands(t, "../README.md")
	if len(cmds) < 20 {
		t.Fatalf("the README has %d console commands: the walkthrough is not there", len(cmds))
	}
	bin := t.TempDir()
	for name, pkg := range map[string]string{"relay": "../cmd/relay", "participant": "../examples/participant"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, name), pkg).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
	}
	dir := t.TempDir()
	e := &engineProc{t: t, dataDir: filepath.Join(dir, "data"), natsPort: freePort(t), httpPort: freePort(t)}
	e.start()
	defer e.stop()
	nc, err := nats.Connect(e.natsURL(), e.participant())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	used(t, nc)
	js, _ := jetstream.New(nc)
	stream, err := js.Stream(context.Background(), wire.StreamName)
	if err != nil {
		t.Fatal(err)
	}

	work := filepath.Join(dir, "work")
	os.MkdirAll(work, 0o755)
	// The commands run where a clone's files are (the examples, and the
	// module for the relay's go run participants), and write theirs in a
	// directory of their own.
	for _, f := range []string{"examples", "go.mod", "go.sum"} {
		abs, _ := filepath.Abs(filepath.Join("..", f))
		if err := os.Symlink(abs, filepath.Join(work, f)); err != nil {
			t.Fatal(err)
		}
	}
	// engine serve's data directory is ./parley-data where the newcomer
	// runs it: the commands find the participant user's credentials there.
	if err := os.Symlink(e.dataDir, filepath.Join(work, "parley-data")); err != nil {
		t.Fatal(err)
	}
	httpAddr := "127.0.0.1:" + strconv.Itoa(e.httpPort)
	sh := exec.Command("bash")
	sh.Dir = work
	sh.Env = append(os.Environ(), "ENGINE="+engineBin, "RELAY="+filepath.Join(bin, "relay"), "PARTICIPANT="+filepath.Join(bin, "participant"),
		"NATS="+e.natsURL(), "HTTP="+httpAddr)
	stdin, _ := sh.StdinPipe()
	sh.Stdout, sh.Stderr = io.Discard, io.Discard
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); sh.Wait() }()
	// The README's commands name the embedded default's addresses and go
	// run; here they reach the engine under test, with binaries built once.
	fmt.Fprint(stdin, `
engine() { case "$1" in open|publish|control|watch|export|import) c=$1; shift; "$ENGINE" "$c" --nats "$NATS" "$@";; *) "$ENGINE" "$@";; esac; }
relay() { c=$1; shift; RUNN=$((RUNN+1)); "$RELAY" "$c" --http "http://$HTTP" --dir "relay-runs/run-$RUNN" --quiet "$@"; }
participant() { "$PARTICIPANT" --nats "$NATS" "$@"; }
`)
	addr := strings.NewReplacer("localhost:8080", httpAddr, "127.0.0.1:8080", httpAddr)
	command := strings.NewReplacer("go run ./cmd/engine", "engine", "go run ./cmd/relay", "relay", "go run ./examples/participant", "participant",
		"nats://127.0.0.1:4222", e.natsURL(), "localhost:8080", httpAddr, "127.0.0.1:8080", httpAddr)

	for i, c := range cmds {
		out, rc := filepath.Join(dir, fmt.Sprintf("out.%d", i)), filepath.Join(dir, fmt.Sprintf("rc.%d", i))
		fmt.Fprintf(stdin, "{\n%s\n} > %s 2>&1; echo $? > %s.tmp; mv %s.tmp %s\n", command.Replace(c.text), out, rc, rc, rc)
		var code []byte
		if !ev.Within(2*time.Minute, func() bool { code, err = os.ReadFile(rc); return err == nil }) {
			t.Fatalf("README.md:%d: %s did not end", c.line, c.text)
		}
		got, _ := os.ReadFile(out)
		if n, _ := strconv.Atoi(strings.TrimSpace(string(code))); n != c.exit {
			t.Errorf("README.md:%d: %s\nexit %d, the README says %d:\n%s", c.line, c.text, n, c.exit, got)
		}
		var want []string
		for _, l := range c.output {
			want = append(want, addr.Replace(l))
		}
		if miss := shapeMismatch(want, strings.Split(strings.TrimRight(string(got), "\n"), "\n")); miss != "" {
			t.Errorf("README.md:%d: %s\nthe README shows\n  %s\nand the command printed\n%s", c.line, c.text, miss, got)
		}
		quiet(t, stream)
	}
}

// used makes the engine a used one: deliberations opened and published to
// before the README's, and a message for none, so that stream positions
// and ordinals differ.
func used(t *testing.T, nc *nats.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(nc, "someone")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		id, err := c.Open(ctx, client.Charter{Title: fmt.Sprintf("an earlier deliberation %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		for j := range 2 {
			if _, _, err := c.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprintf("claim %d of %d", j, i)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := nc.Publish("parley.0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c.art.x", []byte("not json")); err != nil {
		t.Fatal(err)
	}
}

// quiet waits, as a person between two commands, until the stream has
// not grown for longer than the supervisor takes to judge what a command
// made due (runner.Supervisor: a due judgment is published within its
// MaxWait and a tick, 1.25 s).
func quiet(t *testing.T, s jetstream.Stream) {
	t.Helper()
	const still = 1500 * time.Millisecond
	last, since := uint64(0), time.Now()
	if !ev.Within(time.Minute, func() bool {
		info, err := s.Info(context.Background())
		if err != nil {
			return false
		}
		if info.State.LastSeq != last {
			last, since = info.State.LastSeq, time.Now()
		}
		return time.Since(since) >= still
	}) {
		t.Fatal("the engine's stream never stood still")
	}
}

// shapeMismatch returns the first documented line (want) that no line of
// got matches after the one the previous documented line matched, "" when
// every one does.
func shapeMismatch(want, got []string) string {
	j := 0
	for _, w := range want {
		found := false
		for ; j < len(got); j++ {
			if lineMatches(w, got[j]) {
				found = true
				j++
				break
			}
		}
		if !found {
			return w
		}
	}
	return ""
}

// lineMatches compares a documented line with a printed one: as JSON in
// shape (jsonMatches) when the documented line is an object, else as text
// where "…" stands for anything.
func lineMatches(doc, got string) bool {
	doc, got = strings.TrimRight(doc, " "), strings.TrimRight(got, " ")
	if strings.HasPrefix(doc, "{") {
		var d, g any
		dec := json.NewDecoder(strings.NewReader(docJSON(doc)))
		dec.UseNumber()
		if err := dec.Decode(&d); err != nil {
			return false
		}
		dec = json.NewDecoder(strings.NewReader(got))
		dec.UseNumber()
		return dec.Decode(&g) == nil && jsonMatches(d, g)
	}
	return textMatches(doc, got)
}

func textMatches(doc, got string) bool {
	parts := strings.Split(doc, "…")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.MustCompile(`^` + strings.Join(parts, `.*`) + `$`).MatchString(got)
}

// docJSON makes a documented JSON line parseable: "…" standing for a
// member value becomes the string "…" (any value), one standing for
// members of an object is dropped, one for further elements of an array
// becomes a last element "…".
func docJSON(doc string) string {
	var b strings.Builder
	var stack []rune
	inString, escaped := false, false
	last := rune(0) // the last character written outside a string, spaces aside
	for _, r := range doc {
		switch {
		case inString:
			b.WriteRune(r)
			switch {
			case escaped:
				escaped = false
			case r == '\\':
				escaped = true
			case r == '"':
				inString = false
				last = r
			}
			continue
		case r == '"':
			inString = true
		case r == '{' || r == '[':
			stack = append(stack, r)
		case (r == '}' || r == ']') && len(stack) > 0:
			stack = stack[:len(stack)-1]
		case r == '…':
			if last == ':' || (len(stack) > 0 && stack[len(stack)-1] == '[') {
				b.WriteString(`"…"`)
				last = '"'
			}
			continue
		}
		if r != ' ' {
			last = r
		}
		b.WriteRune(r)
	}
	s := b.String()
	for _, fix := range []struct{ re, to string }{{`,\s*,`, ","}, {`\{\s*,`, "{"}, {`,\s*\}`, "}"}} {
		for re := regexp.MustCompile(fix.re); re.MatchString(s); {
			s = re.ReplaceAllString(s, fix.to)
		}
	}
	return s
}

// jsonMatches compares documented JSON with printed JSON in shape: every
// documented member is there and matches; a documented string "…" is any
// value, one with "…" in it a string of that form; an array ending in
// "…" may go on; numbers, booleans and other strings are equal.
func jsonMatches(doc, got any) bool {
	switch d := doc.(type) {
	case string:
		if d == "…" {
			return true
		}
		g, ok := got.(string)
		if !ok {
			return false
		}
		if strings.Contains(d, "…") {
			return textMatches(d, g)
		}
		return d == g
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range d {
			gv, ok := g[k]
			if !ok || !jsonMatches(v, gv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok {
			return false
		}
		more := len(d) > 0 && d[len(d)-1] == "…"
		if more {
			d = d[:len(d)-1]
		}
		if len(g) < len(d) || (!more && len(g) != len(d)) {
			return false
		}
		for i := range d {
			if !jsonMatches(d[i], g[i]) {
				return false
			}
		}
		return true
	default:
		return fmt.Sprint(doc) == fmt.Sprint(got)
	}
}

// The shape comparison itself: what it lets through and what it catches.
func TestREADME_ShapeMatching(t *testing.T) {
	for _, c := range []struct {
		doc, got string
		want     bool
	}{
		{`{"ok":true,"deliberation":"…","position":…,"artifact_id":"sha256:67dab5f0…"}`, `{"ok":true,"deliberation":"01a2","position":54,"artifact_id":"sha256:67dab5f0af49","outcome":"accepted"}`, true},
		{`{"ok":true,"position":…,"artifact_id":"sha256:67dab5f0…"}`, `{"ok":true,"position":54,"artifact_id":"sha256:77dab5f0af49"}`, false},
		{`{"ordinal":4}`, `{"ordinal":5}`, false},
		{`{"ok":false,…,"code":"x"}`, `{"ok":false,"a":1,"code":"x"}`, true},
		{`{"counts":{"CLAIM":1,…},"tips":["sha256:…"]}`, `{"counts":{"CLAIM":1,"OBJECTION":1},"tips":["sha256:ab"]}`, true},
		{`{"tips":["sha256:…"]}`, `{"tips":["sha256:ab","sha256:cd"]}`, false},
		{`{"tips":["sha256:…",…]}`, `{"tips":["sha256:ab","sha256:cd"]}`, true},
		{`{"message":"unknown field \"max_artifactz\""}`, `{"message":"unknown field \"max_artifactz\""}`, true},
		{`#5    alice        DECISION    (final) Adopt the cache.  decides #2  […]`, `#5    alice        DECISION    (final) Adopt the cache.  decides #2  [fcd0b83b]`, true},
		{`#5    alice        DECISION`, `#6    alice        DECISION`, false},
		{`deliberation …`, `deliberation 01a2`, true},
		{`{"ok":true}`, `not json`, false},
	} {
		if got := lineMatches(c.doc, c.got); got != c.want {
			t.Errorf("%s\n%s\nmatch %v, want %v (as %s)", c.doc, c.got, got, c.want, docJSON(c.doc))
		}
	}
	doc := []string{"a …", "c"}
	if shapeMismatch(doc, []string{"a 1", "b", "c"}) != "" || shapeMismatch(doc, []string{"c", "a 1"}) != "c" {
		t.Error("documented lines are matched in order, others between them let through")
	}
	var n int
	for _, c := range readmeCommands(t, "../README.md") {
		if c.exit != 0 {
			n++
		}
	}
	if n == 0 {
		t.Error("no README command says it exits non-zero")
	}
}
