package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const upstream = "../../testdata/upstream"

func run(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// The upstream vectors through the CLI, in the upstream tool's shapes.
func TestRun_UpstreamVectors(t *testing.T) {
	dir := filepath.Join(upstream, "amd-upstream")
	var manifest struct {
		Positive []struct{ Name string }
		Negative []struct {
			Name, Operation string
			ErrorClass      string `json:"error_class"`
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err := json.Unmarshal(b, &manifest); err != nil {
		t.Fatal(err)
	}
	for _, v := range manifest.Positive {
		id, _ := os.ReadFile(filepath.Join(dir, "positive", v.Name+".artifact-id.txt"))
		code, out, _ := run(t, "", "id", filepath.Join(dir, "positive", v.Name+".input.json"))
		if want := `{"ok":true,"artifact_id":"` + strings.TrimSpace(string(id)) + `"}` + "\n"; code != 0 || out != want {
			t.Errorf("%s: %d %q, want %q", v.Name, code, out, want)
		}
		canonical, _ := os.ReadFile(filepath.Join(dir, "positive", v.Name+".canonical.json"))
		if code, out, _ := run(t, "", "canon", filepath.Join(dir, "positive", v.Name+".input.json")); code != 0 || out != string(canonical) {
			t.Errorf("%s canon: %d %q", v.Name, code, out)
		}
	}
	for _, v := range manifest.Negative {
		op := "id"
		args := []string{}
		if v.Operation == "verify" {
			op, args = "verify", []string{"--profile-only"}
		}
		code, out, errs := run(t, "", append(append([]string{op}, args...), filepath.Join(dir, "negative", v.Name+".input.json"))...)
		var res struct {
			OK         bool
			ErrorClass string `json:"error_class"`
			Code       string
			Offset     *int64
		}
		if err := json.Unmarshal([]byte(errs), &res); err != nil {
			t.Fatalf("%s: stderr %q: %v", v.Name, errs, err)
		}
		if code != 1 || out != "" || res.OK || res.ErrorClass != v.ErrorClass || res.Code == "" || res.Offset == nil {
			t.Errorf("%s: exit %d stdout %q stderr %q", v.Name, code, out, errs)
		}
	}
}

func TestRun_Commands(t *testing.T) {
	tests := []struct {
		name     string
		stdin    string
		args     []string
		code     int
		stdout   string
		inStderr string
	}{
		{"jcs", `{"b":[1.0],"a":"x"}`, []string{"jcs", "-"}, 0, `{"ok":true,"digest":"sha256:` + sha(`{"a":"x","b":[1]}`) + `","canonical_length":17}` + "\n", ""},
		{"canon jcs", `{"n":1e2}`, []string{"canon", "--jcs", "-"}, 0, `{"n":100}`, ""},
		{"canon amd rejects exponent", `{"n":1e2}`, []string{"canon", "-"}, 1, "", `"code":"number.exponent"`},
		{"verify semantics", sealed(t), []string{"verify", "-"}, 0, `"artifact_type":"CLAIM"}`, ""},
		{"verify semantic error", `{"artifact_id":"sha256:` + idOf(t, `{"a":1}`) + `","a":1}`, []string{"verify", "-"}, 1, "", `"path":"/a"`},
		{"verify profile only", `{"artifact_id":"sha256:` + idOf(t, `{"a":1}`) + `","a":1}`, []string{"verify", "--profile-only", "-"}, 0, `{"ok":true,"artifact_id":"sha256:` + idOf(t, `{"a":1}`) + `"}` + "\n", ""},
		{"seal", `{"protocol_version":"0.1","artifact_type":"CLAIM","payload":{"statement":"x"},"references":[]}`, []string{"seal", "-"}, 0, sealedClaim, ""},
		{"seal replaces a wrong id", `{"artifact_id":"sha256:` + strings.Repeat("0", 64) + `","protocol_version":"0.1","artifact_type":"CLAIM","payload":{"statement":"x"},"references":[]}`, []string{"seal", "-"}, 0, sealedClaim, ""},
		{"seal semantic error", `{"protocol_version":"0.1","artifact_type":"CLAIM","payload":{},"references":[]}`, []string{"seal", "-"}, 1, "", `"code":"semantic.missing_statement"`},
		{"max depth flag", `{"a":[[1]]}`, []string{"id", "--max-depth", "2", "-"}, 1, "", `"code":"limit.depth"`},
		{"max size flag", `{"a":"0123456789"}`, []string{"id", "--max-size", "10", "-"}, 1, "", `"code":"limit.size"`},
		{"no file", "", []string{"id"}, 2, "", "exactly one FILE"},
		{"missing file", "", []string{"id", "/nonexistent/x.json"}, 2, "", "no such file"},
		{"unknown command", "", []string{"frobnicate"}, 2, "", "unknown command"},
		{"bad flag", "", []string{"id", "--nope", "-"}, 2, "", "unknown flag --nope"},
		{"help", "", []string{"help"}, 0, "The engine:\n  serve ", ""},
		{"command help", "", []string{"id", "-h"}, 0, "", "Usage: engine id"},
		{"version", "", []string{"version"}, 0, "protocol  0.1", ""},
		{"version json", "", []string{"version", "--json"}, 0, `"unicode":"15.0.0"`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := run(t, tc.stdin, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, errs)
			}
			if tc.stdout != "" && !strings.Contains(out, tc.stdout) {
				t.Errorf("stdout %q, want %q", out, tc.stdout)
			}
			if tc.stdout == "" && out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			if tc.inStderr != "" && !strings.Contains(errs, tc.inStderr) {
				t.Errorf("stderr %q, want %q", errs, tc.inStderr)
			}
		})
	}
}

// The sealed claim {"statement":"x"}, its id computed independently
// (testdata/vectors/reference.py).
const sealedClaim = `{"artifact_id":"sha256:55cab4fc24991f886c4b768b42955218bc851bcdd3bf9d0d8e5fdaa07dc37610","artifact_type":"CLAIM","payload":{"statement":"x"},"protocol_version":"0.1","references":[]}`

func TestRun_JSONL(t *testing.T) {
	in := "{\"b\":1,\"a\":2}\n{\"a\":1.5}\n\n{\"x\":\"\\u00e9\"}\r\n" + `{"s":"` + strings.Repeat("a", 100) + `"}` + "\n{}"
	code, out, _ := run(t, in, "canon", "--jsonl", "--max-size", "64", "-")
	if code != 1 {
		t.Errorf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []string{
		`{"ok":true,"canonical":"{\"a\":2,\"b\":1}","line":1}`,
		`{"ok":false,"error_class":"unsupported_value","code":"number.fraction","message":"fractional number is not admitted","offset":5,"line":2}`,
		`{"ok":false,"error_class":"malformed_input","code":"json.empty","message":"empty input","offset":0,"line":3}`,
		`{"ok":true,"canonical":"{\"x\":\"é\"}","line":4}`, // the \r is whitespace
		`{"ok":false,"error_class":"unsupported_value","code":"limit.size","message":"input larger than the size limit: limit 64 bytes","offset":64,"line":5}`,
		`{"ok":true,"canonical":"{}","line":6}`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i+1, lines[i], want[i])
		}
	}
	// A file ending in a newline has no extra empty document.
	if code, out, _ := run(t, "{}\n{}\n", "id", "--jsonl", "-"); code != 0 || strings.Count(out, "\n") != 2 {
		t.Errorf("trailing newline: %d %q", code, out)
	}
	if code, out, _ := run(t, "", "id", "--jsonl", "-"); code != 0 || out != "" {
		t.Errorf("empty input: %d %q", code, out)
	}
}

// lineSource yields n copies of line without holding them.
type lineSource struct {
	line []byte
	n    int
	off  int
}

func (s *lineSource) Read(p []byte) (int, error) {
	w := 0
	for w < len(p) {
		if s.n == 0 {
			if w == 0 {
				return 0, io.EOF
			}
			break
		}
		c := copy(p[w:], s.line[s.off:])
		w += c
		s.off += c
		if s.off == len(s.line) {
			s.off = 0
			s.n--
		}
	}
	return w, nil
}

// --jsonl streams: what it allocates does not grow with the input, here
// 200,000 lines (about 100 MB), a few of them over the size limit.
func TestRun_JSONLConstantMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 100 MB")
	}
	doc := `{"payload":{"statement":"` + strings.Repeat("word ", 90) + `"},"references":[]}` + "\n"
	n := 200_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var out countWriter
	code := Run(context.Background(), []string{"id", "--jsonl", "-"}, &lineSource{line: []byte(doc), n: n}, &out, io.Discard)
	runtime.ReadMemStats(&after)
	if code != 0 || out.lines != n {
		t.Fatalf("exit %d, %d result lines", code, out.lines)
	}
	input := int64(len(doc)) * int64(n)
	allocated := int64(after.TotalAlloc - before.TotalAlloc)
	t.Logf("input %d MB, allocated %d KB", input>>20, allocated>>10)
	if allocated > 4<<20 {
		t.Errorf("allocated %d bytes for %d bytes of input: not constant", allocated, input)
	}
}

type countWriter struct{ lines int }

func (w *countWriter) Write(p []byte) (int, error) {
	w.lines += bytes.Count(p, []byte("\n"))
	return len(p), nil
}

// The binary itself: exit codes and streams through main.
func TestMain_Binary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "engine")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "id", "-")
	cmd.Stdin = strings.NewReader(`{"a":1,"a":2}`)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), `"error_class":"malformed_input"`) {
		t.Errorf("err %v, stderr %q", err, stderr.String())
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.Contains(string(out), "unicode") {
		t.Errorf("version: %v %q", err, out)
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func idOf(t *testing.T, body string) string {
	t.Helper()
	code, out, _ := run(t, body, "id", "-")
	if code != 0 {
		t.Fatal(out)
	}
	return out[len(`{"ok":true,"artifact_id":"sha256:`) : len(out)-3]
}

func sealed(t *testing.T) string {
	body := `{"protocol_version":"0.1","artifact_type":"CLAIM","payload":{"statement":"x"},"references":[]}`
	return strings.Replace(body, "{", `{"artifact_id":"sha256:`+idOf(t, body)+`",`, 1)
}
