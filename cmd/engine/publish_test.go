package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/service"
)

// liveEngine starts an engine for the publishing commands and returns it
// with the --nats flag that reaches it and the --data flag whose
// credentials file holds its participant user.
func liveEngine(t *testing.T) (*service.Service, []string) {
	t.Helper()
	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, []string{"--nats", s.NATSURL(), "--data", s.DataDir()}
}

// lastSeq is the stream's last sequence.
func lastSeq(t *testing.T, s *service.Service) uint64 {
	t.Helper()
	info, err := s.Stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

// line decodes the one JSON line a publishing command printed.
type line struct {
	OK           bool
	Deliberation string
	Position     uint64
	ArtifactID   string `json:"artifact_id"`
	ArtifactType string `json:"artifact_type"`
	Op           string
	Outcome      string
	ErrorClass   string `json:"error_class"`
	Code         string
	Message      string
	Published    bool
	Offset       *int64
}

func decodeLine(t *testing.T, s string) line {
	t.Helper()
	var l line
	if strings.Count(s, "\n") != 1 || json.Unmarshal([]byte(s), &l) != nil {
		t.Fatalf("not one JSON line: %q", s)
	}
	return l
}

func TestRun_OpenPublishControl(t *testing.T) {
	s, natsArg := liveEngine(t)
	with := func(args ...string) []string { return append(append([]string{args[0]}, natsArg...), args[1:]...) }

	code, out, errs := run(t, "", with("open", "--title", "Adopt the cache?", "--participants", "alice, bob")...)
	if code != 0 || errs != "" {
		t.Fatalf("open: exit %d %q %q", code, out, errs)
	}
	open := decodeLine(t, out)
	if !open.OK || open.Outcome != "applied" || open.Op != "open" || open.Position == 0 || len(open.Deliberation) != 36 {
		t.Fatalf("open: %+v", open)
	}
	d := open.Deliberation
	if v, err := s.Queries.Get(d); err != nil || v.Title != "Adopt the cache?" || len(v.Charter.Participants) != 2 {
		t.Fatalf("state %+v %v", v, err)
	}

	claim := `{"protocol_version":"0.1","artifact_type":"CLAIM","payload":{"statement":"The cache halves p99 latency."},"references":[]}`
	code, out, errs = run(t, claim, with("publish", "--deliberation", d, "--as", "alice", "-")...)
	if code != 0 || errs != "" {
		t.Fatalf("publish: exit %d %q %q", code, out, errs)
	}
	c := decodeLine(t, out)
	if !c.OK || c.Outcome != "accepted" || c.Deliberation != d || c.Position <= open.Position || c.ArtifactType != "CLAIM" ||
		!strings.HasPrefix(c.ArtifactID, "sha256:") {
		t.Fatalf("publish: %+v", c)
	}
	if _, idOut, _ := run(t, claim, "id", "-"); !strings.Contains(idOut, c.ArtifactID) {
		t.Errorf("published %s, engine id says %s", c.ArtifactID, idOut)
	}

	// A sealed artifact (with its artifact_id) is checked, not resealed;
	// --quiet prints its id.
	obj := `{"protocol_version":"0.1","artifact_type":"OBJECTION","payload":{"statement":"Only one workload.","blocking":true},"references":[{"artifact_id":"` + c.ArtifactID + `","relation":"objects-to"}]}`
	path := filepath.Join(t.TempDir(), "objection.json")
	_, sealed, _ := run(t, obj, "seal", "-")
	os.WriteFile(path, []byte(sealed), 0o644)
	code, out, errs = run(t, "", with("publish", "--deliberation", d, "--as", "bob", "--quiet", path)...)
	if _, want, _ := run(t, sealed, "id", "-"); code != 0 || errs != "" || !strings.Contains(want, strings.TrimSpace(out)) || !strings.HasPrefix(out, "sha256:") {
		t.Fatalf("quiet publish: exit %d %q %q (want the id in %q)", code, out, errs, want)
	}
	if v, _ := s.Queries.Get(d); v.Artifacts != 2 {
		t.Errorf("%d artifacts", v.Artifacts)
	}
	// An objection to an unknown claim is refused by the engine, with its
	// code: nothing waits for a reference.
	missing := strings.Repeat("a", 64)
	unknown := strings.Replace(obj, c.ArtifactID, "sha256:"+missing, 1)
	code, _, errs = run(t, unknown, with("publish", "--deliberation", d, "--as", "bob", "-")...)
	if l := decodeLine(t, errs); code != 1 || l.Code != "reference.unavailable" || !l.Published || l.Outcome != "rejected" {
		t.Errorf("objection to an unknown claim: exit %d %q", code, errs)
	}

	// An artifact that fails its checks publishes nothing.
	before := lastSeq(t, s)
	for _, bad := range []string{
		`{"protocol_version":"0.1","artifact_type":"CLAIM","payload":{},"references":[]}`,
		`{"a":1.5}`,
		``,
		strings.Replace(sealed, `"blocking":true`, `"blocking":false`, 1), // its artifact_id no longer matches
	} {
		code, out, errs = run(t, bad, with("publish", "--deliberation", d, "--as", "alice", "-")...)
		l := decodeLine(t, errs)
		if code != 1 || out != "" || l.OK || l.ErrorClass == "" || l.Code == "" || l.Offset == nil || l.Published || l.Position != 0 {
			t.Errorf("%q: exit %d %q %q", bad, code, out, errs)
		}
	}
	if after := lastSeq(t, s); after != before {
		t.Errorf("the stream went from %d to %d messages", before, after)
	}

	// The engine's refusals, with its codes.
	code, out, errs = run(t, claim, with("publish", "--deliberation", d, "--as", "carol", "-")...)
	if l := decodeLine(t, errs); code != 1 || out != "" || l.OK || l.Code != "participant.not_in_charter" || !l.Published || l.Position != before+1 ||
		l.Outcome != "rejected" || l.ErrorClass != "invalid_submission" || !strings.Contains(l.Message, "carol") {
		t.Errorf("carol: exit %d %q %q", code, out, errs)
	}
	code, _, errs = run(t, claim, with("publish", "--deliberation", d, "--as", "bob", "-")...)
	if l := decodeLine(t, errs); code != 1 || l.Code != "artifact.duplicate" {
		t.Errorf("duplicate: exit %d %q", code, errs)
	}

	// Control messages.
	code, out, _ = run(t, "", with("control", "--deliberation", d, "round", "2")...)
	if l := decodeLine(t, out); code != 0 || !l.OK || l.Outcome != "applied" || l.Op != "round" {
		t.Errorf("round 2: exit %d %q", code, out)
	}
	code, out, errs = run(t, "", with("control", "--deliberation", d, "round", "1")...)
	if l := decodeLine(t, errs); code != 1 || out != "" || l.Code != "control.invalid" || !strings.Contains(l.Message, "round must increase") {
		t.Errorf("round 1: exit %d %q %q", code, out, errs)
	}
	code, out, errs = run(t, "", append(with("control", "--deliberation", d, "cancel"), "--reason", "enough")...)
	if l := decodeLine(t, out); code != 0 || errs != "" || !l.OK || l.Outcome != "applied" || l.Op != "cancel" {
		t.Errorf("cancel: exit %d %q %q", code, out, errs)
	}
	if v, _ := s.Queries.Get(d); v.Status != "cancelled" {
		t.Errorf("status %s", v.Status)
	}
	code, _, errs = run(t, "", with("control", "--deliberation", d, "resume")...)
	if l := decodeLine(t, errs); code != 1 || l.Code != "deliberation.terminal" {
		t.Errorf("resume after cancel: exit %d %q", code, errs)
	}
	code, _, errs = run(t, `{"protocol_version":"0.1","artifact_type":"CLAIM","payload":{"statement":"Too late."},"references":[]}`,
		with("publish", "--deliberation", d, "--as", "alice", "-")...)
	if l := decodeLine(t, errs); code != 1 || l.Outcome != "late" || !l.Published || l.Message == "" {
		t.Errorf("late: exit %d %q", code, errs)
	}
}

func TestRun_OpenRefused(t *testing.T) {
	s, natsArg := liveEngine(t)
	dir := t.TempDir()
	charter := filepath.Join(dir, "charter.json")
	os.WriteFile(charter, []byte(`{"title":"x","limits":{"max_artifactz":3}}`), 0o644)
	const id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	before := lastSeq(t, s)
	code, out, errs := run(t, "", append([]string{"open", "--id", id, "--charter", charter}, natsArg...)...)
	l := decodeLine(t, errs)
	if code != 1 || out != "" || l.OK || l.Code != "control.invalid" || !strings.Contains(l.Message, "max_artifactz") ||
		l.Deliberation != id || l.Position != before+1 || !l.Published {
		t.Fatalf("exit %d %q %q", code, out, errs)
	}
	if _, err := s.Queries.Get(id); err == nil {
		t.Error("the deliberation is open")
	}
	// From standard input, and a semantic refusal.
	code, _, errs = run(t, `{"title":"y","limits":{"max_rounds":-1}}`, append([]string{"open", "--charter", "-"}, natsArg...)...)
	if l := decodeLine(t, errs); code != 1 || l.Code != "control.invalid" || !strings.Contains(l.Message, "max_rounds is negative") {
		t.Errorf("negative limit: exit %d %q", code, errs)
	}
	// A charter member the engine would ignore is refused here, unpublished.
	before = lastSeq(t, s)
	os.WriteFile(charter, []byte(`{"title":"x","limit":{"max_artifacts":3}}`), 0o644)
	if code, _, errs := run(t, "", append([]string{"open", "--charter", charter}, natsArg...)...); code != 2 || !strings.Contains(errs, `"limit"`) {
		t.Errorf("unknown charter member: exit %d %q", code, errs)
	}
	if after := lastSeq(t, s); after != before {
		t.Errorf("the stream went from %d to %d messages", before, after)
	}
}

// The message is published and no engine answers (a NATS server with
// the stream, and no engine): exit 3, with its position.
func TestRun_PublishNoVerdict(t *testing.T) {
	srv, err := embedded.Start(embedded.Config{Dir: t.TempDir(), Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.Stop(srv)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream, err := ledger.Ensure(context.Background(), js, 1)
	if err != nil {
		t.Fatal(err)
	}
	const id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	code, out, errs := run(t, "", "open", "--nats", srv.ClientURL(), "--id", id, "--timeout", "300ms")
	l := decodeLine(t, errs)
	if code != 3 || out != "" || l.OK || !l.Published || l.Position != 1 || l.Deliberation != id || !strings.Contains(l.Message, "no verdict") {
		t.Fatalf("exit %d %q %q", code, out, errs)
	}
	if info, _ := stream.Info(context.Background()); info.State.LastSeq != 1 {
		t.Errorf("stream %+v", info.State)
	}
}

func TestRun_PublishUsage(t *testing.T) {
	const id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	for _, args := range [][]string{
		{"publish", "--as", "alice", "-"},
		{"publish", "--deliberation", "nope", "--as", "alice", "-"},
		{"publish", "--deliberation", id, "--as", "_supervisor", "-"},
		{"publish", "--deliberation", id, "--as", "alice"},
		{"publish", "--deliberation", id, "--as", "alice", "/nonexistent.json"},
		{"open", "--id", "NOT-A-UUID"},
		{"open", "--participants", "a,b c"},
		{"open", "stray"},
		{"open", "--charter", "/nonexistent.json"},
		{"control", "--deliberation", id},
		{"control", "--deliberation", id, "pause"},
		{"control", "--deliberation", id, "round", "zero"},
		{"control", "--deliberation", id, "round"},
		{"control", "--deliberation", id, "suspend", "--reason", "why"},
		{"control", "suspend"},
		{"open", "--nats", "nats://127.0.0.1:1"},
	} {
		if code, out, errs := run(t, "{}", args...); code != 2 || out != "" || errs == "" {
			t.Errorf("%v: exit %d %q %q", args, code, out, errs)
		}
	}
}

// On the embedded default, a participant who publishes as the principal is
// refused by the server: engine publish says so at once (exit 1), naming
// the permission violation, rather than waiting out its timeout.
func TestRun_PublishAsReservedTokenRefused(t *testing.T) {
	s, nats := liveEngine(t)
	code, out, errs := run(t, "", append([]string{"open", "--quiet", "--title", "t"}, nats...)...)
	if code != 0 {
		t.Fatalf("open: %d %s", code, errs)
	}
	id := strings.TrimSpace(out)
	before := lastSeq(t, s)
	start := time.Now()
	claim := `{"protocol_version":"0.1","artifact_type":"CLAIM","payload":{"statement":"I am the principal."},"references":[]}`
	code, _, errs = run(t, claim, append(append([]string{"publish", "--deliberation", id, "--as", "principal", "--timeout", "20s"}, nats...), "-")...)
	if code != 1 || !strings.Contains(errs, "refused the publish") || !strings.Contains(strings.ToLower(errs), "permissions violation") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("took %s: it waited for the timeout", took)
	}
	if lastSeq(t, s) != before {
		t.Fatal("something was stored")
	}
}

// --principal names the charter's principal, whom the participants it
// lists then include; a charter file names it as "principal".
func TestRun_OpenPrincipal(t *testing.T) {
	s, natsArg := liveEngine(t)
	with := func(args ...string) []string { return append(append([]string{args[0]}, natsArg...), args[1:]...) }
	code, out, errs := run(t, "", with("open", "--title", "Share?", "--participants", "judge", "--principal", "ceo")...)
	if code != 0 || errs != "" {
		t.Fatalf("open: exit %d %q %q", code, out, errs)
	}
	v, err := s.Queries.Get(decodeLine(t, out).Deliberation)
	if err != nil || v.Charter.Principal != "ceo" || !slices.Equal(v.Charter.Participants, []string{"judge", "ceo"}) {
		t.Fatalf("charter %+v %v", v.Charter, err)
	}
	code, out, errs = run(t, `{"title":"Share?","principal":"ceo"}`, with("open", "--charter", "-")...)
	if code != 0 || errs != "" {
		t.Fatalf("open: exit %d %q %q", code, out, errs)
	}
	if v, err := s.Queries.Get(decodeLine(t, out).Deliberation); err != nil || v.Charter.Principal != "ceo" || v.Charter.Participants != nil {
		t.Fatalf("charter %+v %v", v.Charter, err)
	}
	code, _, errs = run(t, "", with("open", "--title", "Share?", "--principal", "_supervisor")...)
	if l := decodeLine(t, errs); code != 1 || l.Code != "control.invalid" {
		t.Fatalf("a reserved principal: exit %d %+v", code, l)
	}
}

// engine open binds keys from a charter file; engine publish --key signs:
// a signed artifact is admitted, an unsigned one or one signed with
// another's key refused with the signing code.
func TestRun_PublishSigned(t *testing.T) {
	_, natsArg := liveEngine(t)
	with := func(args ...string) []string { return append(append([]string{args[0]}, natsArg...), args[1:]...) }
	dir := t.TempDir()
	key := func(name string) (string, string) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := kp.Seed()
		pub, _ := kp.PublicKey()
		path := filepath.Join(dir, name+".nk")
		os.WriteFile(path, seed, 0o600)
		return path, pub
	}
	aliceKey, alicePub := key("alice")
	bobKey, bobPub := key("bob")
	charter := filepath.Join(dir, "charter.json")
	os.WriteFile(charter, []byte(`{"title":"signed","participants":["alice","bob"],"keys":{"alice":"`+alicePub+`","bob":"`+bobPub+`"},"require_signatures":true}`), 0o644)
	code, out, errs := run(t, "", with("open", "--charter", charter)...)
	if code != 0 {
		t.Fatalf("open: exit %d %q %q", code, out, errs)
	}
	d := decodeLine(t, out).Deliberation
	claim := func(s string) string {
		return `{"protocol_version":"0.1","artifact_type":"CLAIM","payload":{"statement":"` + s + `"},"references":[]}`
	}
	if code, out, errs := run(t, claim("signed"), with("publish", "--deliberation", d, "--as", "alice", "--key", aliceKey, "-")...); code != 0 || decodeLine(t, out).Outcome != "accepted" {
		t.Fatalf("signed publish: exit %d %q %q", code, out, errs)
	}
	for _, c := range []struct {
		args []string
		code string
	}{
		{[]string{"--as", "alice"}, "signature.missing"},
		{[]string{"--as", "alice", "--key", bobKey}, "signature.wrong_key"},
	} {
		code, _, errs := run(t, claim(c.code), with(append(append([]string{"publish", "--deliberation", d}, c.args...), "-")...)...)
		if l := decodeLine(t, errs); code != 1 || l.Code != c.code || l.ErrorClass != "invalid_signature" {
			t.Errorf("%v: exit %d %q, want %s", c.args, code, errs, c.code)
		}
	}
	// A file without a user seed is refused before anything is published.
	bad := filepath.Join(dir, "bad.nk")
	os.WriteFile(bad, []byte(alicePub), 0o600)
	if code, _, errs := run(t, claim("x"), with("publish", "--deliberation", d, "--as", "alice", "--key", bad, "-")...); code != exitUsage || !strings.Contains(errs, "--key") {
		t.Errorf("bad key file: exit %d %q", code, errs)
	}
}
