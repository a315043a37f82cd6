package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-engine/parley/relay"
)

// Every failure is one line on standard error, with one prefix, and names
// the next step: the command or flag most likely meant, the engine to
// start, where in a configuration file the error is.
func TestRun_ErrorsNameTheNextStep(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	unknown := write("unknown.json", "{\n  \"title\": \"x\",\n  \"roundz\": 3\n}\n")
	syntax := write("syntax.json", "{\n  \"title\": \"x\",\n  \"rounds\": 3,,\n}\n")
	empty := write("empty.json", "")
	write("script.json", "[\n {\"artifact_type\": \"CLAIM\",,}\n]\n")
	badScript := write("scripted.json", `{"title":"t","rounds":1,"participants":[{"id":"a","adapter":"script","script":"script.json"}]}`)
	good, _ := filepath.Abs("../../examples/relay/twelve-round.json")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"rn", good}, []string{`relay: unknown command "rn": did you mean "run"?`, "relay help"}},
		{[]string{"run", "--natz", "x", good}, []string{"relay run: unknown flag --natz: did you mean --nats?", "relay run -h"}},
		{[]string{"fork", "--at", "3", "--jsn", good, good}, []string{"relay fork: unknown flag --jsn: did you mean --json?"}},
		{[]string{"run", unknown}, []string{"relay: " + unknown + `: line 3, column 3: json: unknown field "roundz"`}},
		{[]string{"run", syntax}, []string{"relay: " + syntax + ": line 3, column 15: invalid character ','"}},
		{[]string{"run", empty}, []string{"relay: " + empty + ": the file is empty"}},
		{[]string{"run", "--quiet", "--dir", t.TempDir(), badScript}, []string{"script.json (a JSON array of drafts): line 2, column 28: invalid character ','"}},
		{[]string{"run", "--nats", "nats://127.0.0.1:1", "--quiet", "--dir", t.TempDir(), good},
			[]string{"relay: connect to the engine at nats://127.0.0.1:1", "is engine serve running?"}},
	} {
		var out, errb bytes.Buffer
		code := Run(context.Background(), c.args, &out, &errb)
		msg := errb.String()
		if code != 2 || strings.Count(msg, "\n") != 1 || strings.Contains(msg, "relay: relay:") || strings.Contains(msg, "Usage:") {
			t.Errorf("%v: exit %d, want 2 and one line:\n%s", c.args, code, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%v: %q lacks %q", c.args, msg, w)
			}
		}
	}
	var je *relay.JSONError
	if _, err := relay.Load(unknown); !errors.As(err, &je) || je.Line != 3 || je.Column != 3 {
		t.Errorf("Load: %v", err)
	}
}
