package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/service"
)

// engine bind in a real terminal (tmux): the picker shows the briefing,
// marks the recommended option, offers only the hatches the envelope
// opens, and the keys resolve the binding moment on the record.
func TestBind_Terminal(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv("PARLEY_REQUIRE_TMUX") != "" {
			t.Fatal("tmux is required and not installed")
		}
		t.Skip("SKIPPED: no tmux (apt-get install tmux); the terminal picker is not tested")
	}
	bin := filepath.Join(t.TempDir(), "engine")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ctx := context.Background()
	dataDir := t.TempDir()
	s, err := service.Start(ctx, service.Config{DataDir: dataDir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, _ := nats.Connect(s.NATSURL(), s.Participant())
	defer nc.Close()
	var envs struct {
		Vectors []struct {
			Name  string
			Input json.RawMessage
		}
	}
	b, _ := os.ReadFile("../../binding/testdata/envelopes.json")
	json.Unmarshal(b, &envs)
	byName := map[string]json.RawMessage{}
	for _, v := range envs.Vectors {
		byName[v.Name] = v.Input
	}
	judge, _ := client.New(nc, "judge")
	ask := func(env json.RawMessage) string {
		id, _ := judge.Open(ctx, client.Charter{Title: "share?"})
		claim, _, _ := judge.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Share the dates only."}})
		_, ack, err := judge.Publish(ctx, id, events.Draft{Type: events.TypeDecision,
			Payload:    events.Decision{Outcome: "Ask.", Status: events.Provisional, ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
			References: []events.Reference{{Target: claim.ID, Relation: events.Decides}}, Extensions: map[string]any{binding.ExtEnvelope: env}})
		if err != nil {
			t.Fatal(err)
		}
		judge.WaitPosition(ctx, id, ack.Sequence)
		return id
	}
	session := func(name, env, args string) func(keys ...string) string {
		cmd := env + " " + bin + " bind " + args + "; sleep 60"
		if out, err := exec.Command(tmux, "new-session", "-d", "-s", name, "-x", "160", "-y", "50", cmd).CombinedOutput(); err != nil {
			t.Fatalf("tmux: %v %s", err, out)
		}
		t.Cleanup(func() { exec.Command(tmux, "kill-session", "-t", name).Run() })
		// What keys do is waited for on the screen (waitFor). Keys sent
		// together reach the picker in one read, and each counts
		// (TestPick_KeysInOneRead).
		return func(keys ...string) string {
			if len(keys) > 0 {
				exec.Command(tmux, append([]string{"send-keys", "-t", name}, keys...)...).Run()
			}
			out, _ := exec.Command(tmux, "capture-pane", "-p", "-t", name).Output()
			return string(out)
		}
	}
	waitFor := func(screen func(...string) string, want string) string {
		t.Helper()
		var out string
		if !eventually.Within(15*time.Second, func() bool { out = screen(); return strings.Contains(out, want) }) {
			t.Fatalf("the terminal never showed %q:\n%s", want, out)
		}
		return out
	}

	// Without the engine's token, or with a wrong one, nothing is asked.
	id := ask(byName["seed002-6.4"])
	if code, _, errs := run(t, "", "bind", "--http", "http://"+s.HTTPAddr(), id); code != exitUsage || !strings.Contains(errs, "no HTTP token") {
		t.Errorf("without a token: %d %s", code, errs)
	}
	if code, _, errs := run(t, "", "bind", "--http", "http://"+s.HTTPAddr(), "--http-token", strings.Repeat("0", 64), id); code != exitUsage || !strings.Contains(errs, "401") {
		t.Errorf("a wrong token: %d %s", code, errs)
	}

	// Choose the second option with the arrow keys; the address and the
	// token come from the engine's credentials file.
	screen := session("parley-bind-1", "", "--data "+dataDir+" "+id)
	out := waitFor(screen, "[Recommended]")
	for _, want := range []string{"Share the travel dates and withhold the passport number.", "Dates are enough to hold the reservation.",
		"Withhold the passport number until check-in.", "Ask for detail on any item.", "What should be shared with the booking service?",
		"> 1. Share dates only  [Recommended]", "Avoids a second request at check-in.", "a answer in my own words", "q reject the question", "d decline"} {
		if !strings.Contains(out, want) {
			t.Errorf("the picker lacks %q:\n%s", want, out)
		}
	}
	screen("Down")
	screen("Enter")
	waitFor(screen, "recorded: the principal's DECISION")
	waitFor(screen, "(as principal)")
	moments, _ := s.Queries.Bindings(ctx, id)
	if moments[0].Status != "resolved" || *moments[0].Resolution.OptionIdx != 1 {
		t.Fatalf("%+v", moments[0])
	}

	// Dialogue off: no question-space key; decline.
	id = ask(byName["hatch-off"])
	screen = session("parley-bind-2", "", "--http http://"+s.HTTPAddr()+" --http-token "+s.Credentials().HTTPToken+" "+id)
	out = waitFor(screen, "[Recommended]")
	if strings.Contains(out, "q reject the question") || !strings.Contains(out, "d decline") {
		t.Fatalf("hatches:\n%s", out)
	}
	screen("q") // not offered: nothing happens
	screen("d")
	waitFor(screen, "recorded: the principal's CLAIM")

	// Answer in my own words; the token in the environment.
	id = ask(byName["seed002-6.4"])
	screen = session("parley-bind-3", "PARLEY_HTTP_TOKEN="+s.Credentials().HTTPToken, "--http http://"+s.HTTPAddr()+" "+id)
	waitFor(screen, "[Recommended]")
	screen("a")
	waitFor(screen, "Your answer")
	screen("-l", "Dates only, please.")
	screen("Enter")
	waitFor(screen, "recorded: the principal's CLAIM")
}

// A malformed --http or deliberation id is a usage error with its reason,
// at once, never a panic.
func TestBind_BadArguments(t *testing.T) {
	const id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	for _, c := range []struct{ http, id, want string }{
		{"::bad", id, "is not an http:// or https:// address"},
		{"http://[::1", id, "is not an http:// or https:// address"},
		{"%zz", id, "is not an http:// or https:// address"},
		{"ftp://x", id, "is not an http:// or https:// address"},
		{"", id, "is not an http:// or https:// address"},
		{"http://127.0.0.1:1", "nope", "is not a deliberation id"},
	} {
		code, out, errs := run(t, "", "bind", "--http", c.http, "--http-token", "t", c.id)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("--http %q %s: exit %d %q %q", c.http, c.id, code, out, errs)
		}
	}
}
