package relay

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// An engine at a URL is taken as it is: nothing started, its options kept,
// nothing stopped.
func TestStartEngine_Remote(t *testing.T) {
	opts := []nats.Option{nats.Name("x")}
	op := []nats.Option{nats.Name("y")}
	e, err := startEngine(t.Context(), engineSpec{URL: "nats://127.0.0.1:1", Participant: opts, Operator: op, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if e.Embedded() || e.Credentials() != nil || e.URL != "nats://127.0.0.1:1" || len(e.Participant) != 1 || len(e.Operator) != 1 {
		t.Fatalf("%+v", e)
	}
	e.Close(0)
	if _, err := e.connect("fork: ", e.Participant); err == nil || !strings.HasPrefix(err.Error(), "relay: fork: connect to the engine at nats://127.0.0.1:1") {
		t.Errorf("connect: %v", err)
	}
}

// The embedded engine is connected to as the participant user of its default, and
// its operator and credentials are known.
func TestStartEngine_Embedded(t *testing.T) {
	dir := t.TempDir()
	e, err := startEngine(t.Context(), engineSpec{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(0)
	if !e.Embedded() || e.Credentials() == nil || len(e.Participant) != 1 || e.Operator == nil {
		t.Fatalf("%+v", e)
	}
	nc, err := e.connect("", e.Operator)
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if _, err := os.Stat(filepath.Join(dir, "engine")); err != nil {
		t.Error(err)
	}
}

func TestKeepInvalid(t *testing.T) {
	dir := t.TempDir()
	base, err := keepInvalid(dir, "critic", 3, 1, []byte("not json"), "the answer is not a JSON object")
	if err != nil || base != "round-03-critic-attempt-2" {
		t.Fatalf("%q %v", base, err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "invalid", base+".txt"))
	cause, _ := os.ReadFile(filepath.Join(dir, "invalid", base+".cause.txt"))
	if string(raw) != "not json" || string(cause) != "participant critic, round 3, attempt 2\ncause: the answer is not a JSON object\nraw answer: 8 bytes in round-03-critic-attempt-2.txt\n" {
		t.Errorf("%q %q", raw, cause)
	}
}

// The charter names every participant, then the principal.
func TestCharter(t *testing.T) {
	cfg := &Config{Title: "t", Principal: "pat", Participants: []ParticipantConfig{{ID: "a"}, {ID: "b"}}}
	r := &runner{cfg: cfg}
	ch, pre, err := r.charter()
	if err != nil || pre != nil || ch.Title != "t" || ch.Principal != "pat" || !slices.Equal(ch.Participants, []string{"a", "b", "pat"}) {
		t.Fatalf("%+v %v %v", ch, pre, err)
	}
}
