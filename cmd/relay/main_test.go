package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/archive"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/relay"
	"github.com/parley-engine/parley/service"
)

func TestRun_Fleet(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"run", "--parallel", "5", "--json", "--dir", dir, "../../examples/relay/fleet.json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res struct {
		Runs, Completed int
		Summaries       []struct {
			Termination string `json:"termination"`
			ClosureOK   bool   `json:"closure_ok"`
		}
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Runs != 5 || res.Completed != 5 {
		t.Fatalf("%v %s", err, out.String())
	}
	for i := 1; i <= 5; i++ {
		for _, f := range []string{"report.md", "dag.svg", "record.jsonl", "summary.json"} {
			if _, err := os.Stat(filepath.Join(dir, "run-00"+string(rune('0'+i)), f)); err != nil {
				t.Errorf("run %d: %v", i, err)
			}
		}
	}
}

func TestRun_Single(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"run", "--progress", "--dir", t.TempDir(), "../../examples/relay/full-history-stress.json"}, &out, &errb); code != 1 {
		t.Errorf("stress run: exit %d", code)
	}
	if !strings.Contains(out.String(), "  termination     cancelled\n") || !strings.Contains(out.String(), "  failed closed   estimator") ||
		!strings.Contains(out.String(), "  run directory   ") || strings.Contains(out.String(), "map[") {
		t.Errorf("stdout %q", out.String())
	}
	if !strings.Contains(errb.String(), "invalid output (attempt 3)") {
		t.Errorf("progress %q", errb.String())
	}
}

func TestRun_Usage(t *testing.T) {
	var out, errb bytes.Buffer
	for _, args := range [][]string{nil, {"fly"}, {"run"}, {"run", "--record", "a", "--replay", "b", "x.json"}, {"run", "/nonexistent.json"}} {
		if code := Run(context.Background(), args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d", args, code)
		}
	}
	if code := Run(context.Background(), []string{"help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "relay run [--nats URL") {
		t.Errorf("help: %d %q", code, out.String())
	}
}

// A charter the engine refuses stops the run at once, with the engine's
// reason: the misspelt limit goes through the relay's configuration (which
// passes limits on as they are) and is refused by the engine's projector.
func TestRun_CharterRefused(t *testing.T) {
	examples, err := filepath.Abs("../../examples/relay")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(examples, "fleet.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, p := range cfg["participants"].([]any) {
		p := p.(map[string]any)
		p["script"] = filepath.Join(examples, p["script"].(string))
	}
	dir := t.TempDir()
	for _, tt := range []struct {
		name   string
		limits map[string]any
		want   string
		args   []string
	}{
		{"misspelt", map[string]any{"max_artifactz": 3}, `unknown field "max_artifactz"`, nil},
		{"negative", map[string]any{"max_rounds": -1}, "limits.max_rounds is negative", nil},
		{"fleet", map[string]any{"max_artifactz": 3}, `unknown field "max_artifactz"`, []string{"--parallel", "2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg["limits"] = tt.limits
			b, _ := json.Marshal(cfg)
			path := filepath.Join(dir, tt.name+".json")
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			args := append(append([]string{"run", "--quiet", "--dir", filepath.Join(dir, tt.name)}, tt.args...), path)
			code := Run(ctx, args, &out, &errb)
			if ctx.Err() != nil {
				t.Fatal("the run waited for its context to end")
			}
			if code != 2 || !strings.Contains(errb.String(), "refused the charter") || !strings.Contains(errb.String(), "control.invalid") ||
				!strings.Contains(errb.String(), tt.want) {
				t.Errorf("exit %d, stderr %q", code, errb.String())
			}
		})
	}
}

// The documented fork: after the twelve-round example, relay fork --at 25
// forks after round 6 (message 25 is the verifier's evidence of round 6)
// on an engine that ran another deliberation first, so that the recording's
// stream positions are not its ordinals.
func TestRun_ForkDocumentedExample(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the twelve-round example, with a go run participant")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := func(args ...string) relay.Summary {
		t.Helper()
		var out, errb bytes.Buffer
		if code := Run(ctx, args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		var sum relay.Summary
		if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
			t.Fatalf("%v: %v %s", args, err, out.String())
		}
		return sum
	}
	run("run", "--nats", s.NATSURL(), "--data", s.DataDir(), "--json", "--quiet", "--dir", t.TempDir(), "../../examples/relay/fleet.json")
	orig := run("run", "--nats", s.NATSURL(), "--data", s.DataDir(), "--json", "--quiet", "--dir", t.TempDir(), "../../examples/relay/twelve-round.json")
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	f, _ := os.Create(rec)
	if _, err := archive.Export(ctx, js, orig.Deliberation, recording.Stream, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	c, _ := client.New(nc, "test")
	artifacts := func(id string) []api.ArtifactEntry {
		var out []api.ArtifactEntry
		for e, err := range c.Artifacts(ctx, id, client.ListOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, e)
		}
		return out
	}
	text := func(id string, e api.ArtifactEntry) (*events.Artifact, string) {
		b, _, err := c.Artifact(ctx, id, e.ArtifactID.String())
		if err != nil {
			t.Fatal(err)
		}
		a, err := events.Validate(b)
		if err != nil {
			t.Fatal(err)
		}
		return a, string(a.Extensions["parley.round"])
	}
	origArts := artifacts(orig.Deliberation)
	var at25 api.ArtifactEntry
	for _, e := range origArts {
		if e.Ordinal == 25 {
			at25 = e
		}
	}
	if a, round := text(orig.Deliberation, at25); at25.Participant != "verifier" || a.Type != events.TypeEvidence || round != "6" || at25.Position == 25 {
		t.Fatalf("message 25 of the recording: %+v, round %s", at25, round)
	}

	fork := run("fork", rec, "--at", "25", "--nats", s.NATSURL(), "--data", s.DataDir(), "--json", "--dir", t.TempDir(), "../../examples/relay/fork.json")
	if fork.Termination != "completed" || !fork.ClosureOK {
		t.Fatalf("fork %+v", fork)
	}
	forkArts := artifacts(fork.Deliberation)
	for i := range 18 {
		if forkArts[i].ArtifactID != origArts[i].ArtifactID {
			t.Fatalf("the fork's artifact %d is %s, the recording's %s", i, forkArts[i].ArtifactID, origArts[i].ArtifactID)
		}
	}
	a, _ := text(fork.Deliberation, forkArts[18])
	if forkArts[18].Participant != "architect" || a.Type != events.TypeRevision || !strings.HasPrefix(artifactStatement(a), "Fork 1: a write-through cache") {
		t.Fatalf("the fork's first new artifact: %+v %s", forkArts[18], a.Canonical)
	}
	var revised api.ArtifactEntry
	for _, e := range forkArts[:18] {
		if e.ArtifactID == a.References[0].Target {
			revised = e
		}
	}
	if r, round := text(fork.Deliberation, revised); r.Type != events.TypeRevision || round != "6" || !strings.HasPrefix(artifactStatement(r), "Revision 6:") {
		t.Errorf("the fork's REVISION revises %+v (round %s)", revised, round)
	}
	// The human summary says where it forked.
	var out, errb bytes.Buffer
	if code := Run(ctx, []string{"fork", rec, "--at", "25", "--nats", s.NATSURL(), "--data", s.DataDir(), "--dir", t.TempDir(), "../../examples/relay/fork.json"}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "  forked after    message 25 of "+rec) {
		t.Errorf("fork: exit %d %s %s", code, out.String(), errb.String())
	}
	// --at past the end of the recording, and neither --at nor --at-position.
	if code := Run(ctx, []string{"fork", rec, "--at", "1000", "--nats", s.NATSURL(), "--data", s.DataDir(), "--dir", t.TempDir(), "../../examples/relay/fork.json"}, &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), "the recorded deliberation has only") {
		t.Errorf("--at 1000: exit %d %s", code, errb.String())
	}
	if code := Run(ctx, []string{"fork", rec, "../../examples/relay/fork.json"}, &out, &errb); code != 2 {
		t.Errorf("no --at: exit %d", code)
	}
}

func artifactStatement(a *events.Artifact) string {
	if r, ok := a.Payload.(*events.RevisionPayload); ok {
		return r.Statement
	}
	return ""
}

// Every command has a description and its flags in its help, and the
// docs name every flag of every command; the top-level help shows each
// command's synopsis with its flags.
func TestRun_Help(t *testing.T) {
	doc, err := os.ReadFile("../../docs/RELAY.md")
	if err != nil {
		t.Fatal(err)
	}
	var top, errb bytes.Buffer
	if code := Run(context.Background(), []string{"-h"}, &top, &errb); code != 0 {
		t.Fatalf("relay -h: exit %d", code)
	}
	for _, c := range commands() {
		var out bytes.Buffer
		if code := Run(context.Background(), []string{c.name, "-h"}, &out, &errb); code != 0 {
			t.Errorf("relay %s -h: exit %d %s", c.name, code, errb.String())
		}
		h := out.String()
		if !strings.HasPrefix(h, "Usage: relay "+c.name+" ") || !strings.Contains(h, strings.SplitN(c.about, "\n", 2)[0]) ||
			strings.Contains(h, "Usage of") {
			t.Errorf("relay %s -h:\n%s", c.name, h)
		}
		if !strings.Contains(top.String(), "  "+c.name+" ") || !strings.Contains(top.String(), "relay "+c.name+" "+c.synopsis) {
			t.Errorf("relay -h lacks %s", c.name)
		}
		var help bytes.Buffer
		if code := Run(context.Background(), []string{"help", c.name}, &help, &errb); code != 0 || help.String() != h {
			t.Errorf("relay help %s differs from relay %s -h", c.name, c.name)
		}
		fs, _ := c.flagSet(&bytes.Buffer{}, &bytes.Buffer{})
		fs.VisitAll(func(f *flag.Flag) {
			if !strings.Contains(h, "  -"+f.Name) || f.Usage == "" {
				t.Errorf("relay %s -h lacks -%s", c.name, f.Name)
			}
			if !strings.Contains(c.synopsis, "--"+f.Name) {
				t.Errorf("relay %s: the synopsis lacks --%s", c.name, f.Name)
			}
			if !strings.Contains(string(doc), "--"+f.Name) {
				t.Errorf("docs/RELAY.md never names relay %s --%s", c.name, f.Name)
			}
		})
		// Every flag the synopsis shows exists.
		for _, m := range regexp.MustCompile(`--([a-z-]+)`).FindAllStringSubmatch(c.synopsis, -1) {
			if fs.Lookup(m[1]) == nil {
				t.Errorf("relay %s: the synopsis shows --%s, which it does not take", c.name, m[1])
			}
		}
		// The docs' synopsis of the command shows the same flags.
		i := strings.Index(string(doc), "    relay "+c.name+" ")
		if i < 0 {
			t.Errorf("docs/RELAY.md has no synopsis of relay %s", c.name)
			continue
		}
		j := strings.Index(string(doc[i:]), "\n    relay ")
		if k := strings.Index(string(doc[i:]), "\n\n"); j < 0 || (k >= 0 && k < j) {
			j = k
		}
		docSyn := string(doc[i : i+j])
		for _, m := range regexp.MustCompile(`--([a-z-]+)`).FindAllStringSubmatch(c.synopsis, -1) {
			if !strings.Contains(docSyn, "--"+m[1]) {
				t.Errorf("docs/RELAY.md's synopsis of relay %s lacks --%s: %q", c.name, m[1], docSyn)
			}
		}
	}
}

func TestRun_Version(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "relay     ") ||
		strings.Contains(out.String(), "(devel)") || !strings.Contains(out.String(), "protocol  0.1") {
		t.Errorf("version: %d %q", code, out.String())
	}
	out.Reset()
	var v struct{ Relay, Go, Protocol string }
	if code := Run(context.Background(), []string{"version", "--json"}, &out, &errb); code != 0 || json.Unmarshal(out.Bytes(), &v) != nil || v.Relay == "" || v.Relay == "(devel)" {
		t.Errorf("version --json: %d %q", code, out.String())
	}
}

// --partitioned: the embedded engine keeps the record partitioned (its
// store holds the stream PARLEY_0000_1023, not PARLEY), and a fleet
// completes on it.
func TestRun_Partitioned(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"run", "--partitioned", "--parallel", "2", "--json", "--dir", dir, "../../examples/relay/fleet.json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res struct{ Runs, Completed int }
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Runs != 2 || res.Completed != 2 {
		t.Fatalf("%v %s", err, out.String())
	}
	var streams []string
	filepath.WalkDir(filepath.Join(dir, "engine"), func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && filepath.Base(filepath.Dir(path)) == "streams" {
			streams = append(streams, d.Name())
		}
		return nil
	})
	if !slices.Contains(streams, "PARLEY_0000_1023") || slices.Contains(streams, "PARLEY") {
		t.Errorf("the embedded engine's streams: %v", streams)
	}
}
