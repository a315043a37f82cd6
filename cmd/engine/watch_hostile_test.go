package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/textsafe"
	"github.com/parley-engine/parley/service"
)

// Participants' text with terminal escape sequences (clear the screen, an
// OSC 52 clipboard write, a title change, BEL), carriage returns that
// would overwrite the line, and bidirectional overrides: the watch prints
// every one of them inert, as visible escapes, and the rest as it is.
func TestWatch_HostileText(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	mallory, _ := client.New(nc, "mallory")
	id, err := mallory.Open(ctx, client.Charter{Title: "title \x1b]0;owned\x07 \u202eevil"})
	if err != nil {
		t.Fatal(err)
	}
	hostile := []string{
		"clear \x1b[2J\x1b[H the screen",
		"clipboard \x1b]52;c;cm0gLXJmIH4K\x07 write",
		"overwrite\rALL GOOD, the decision is final",
		"bidi \u202egnp.exe\u202c override and \u2066isolate\u2069",
		"C1 \u009b31m CSI and DEL \x7f",
		"invisible \u200b zero width \u2028 separator \U000e0041 tag \u3164 filler",
	}
	for _, st := range hostile {
		if _, _, err := mallory.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: st}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := mallory.Cancel(ctx, id, "reason \x1b[31mred\x1b[0m"); err != nil {
		t.Fatal(err)
	}
	var out, errb syncBuf
	if c := Run(ctx, []string{"watch", "--nats", s.NATSURL(), "--data", s.DataDir(), "--timeout", "10s", id}, strings.NewReader(""), &out, &errb); c != 0 {
		t.Fatalf("exit %d: %s", c, errb.String())
	}
	var jout, jerr syncBuf
	if c := Run(ctx, []string{"watch", "--json", "--nats", s.NATSURL(), "--data", s.DataDir(), "--timeout", "10s", id}, strings.NewReader(""), &jout, &jerr); c != 0 {
		t.Fatalf("exit %d: %s", c, jerr.String())
	}
	o, e := out.String(), errb.String()
	for name, text := range map[string]string{"stdout": o, "stderr": e, "--json": jout.String()} {
		for _, r := range text {
			if textsafe.Unsafe(r) && r != '\n' {
				t.Errorf("%s carries the character %U:\n%q", name, r, text)
				break
			}
		}
	}
	// --json stays JSON, with the same text in it.
	var found bool
	for _, l := range strings.Split(strings.TrimSpace(jout.String()), "\n") {
		var v struct{ Text string }
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("--json line %q: %v", l, err)
		}
		found = found || v.Text == hostile[3]
	}
	if !found {
		t.Errorf("--json lacks %q:\n%s", hostile[3], jout.String())
	}
	for _, want := range []string{
		`clear \x1b[2J\x1b[H the screen`,
		`clipboard \x1b]52;c;cm0gLXJmIH4K\x07 write`,
		// a carriage return is white space: the line goes on
		"overwrite ALL GOOD, the decision is final",
		`bidi \u202egnp.exe\u202c override and \u2066isolate\u2069`,
		`C1 \u009b31m CSI and DEL \x7f`,
		// a line separator is white space: the line goes on
		`invisible \u200b zero width separator \U000e0041 tag \u3164 filler`,
		`reason \x1b[31mred\x1b[0m`,
		`"title \x1b]0;owned\a \u202eevil"`,
	} {
		if !strings.Contains(o, want) {
			t.Errorf("the watch lacks %q:\n%s", want, o)
		}
	}
	if !strings.Contains(e, `\x1b]0;owned\a \u202eevil`) {
		t.Errorf("stderr's title is not quoted: %q", e)
	}
}
