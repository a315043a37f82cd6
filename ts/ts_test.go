package ts_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/relay"
	"github.com/parley-engine/parley/service"
)

// The TypeScript participant library (this directory) is tested with
// node's own runner against a real engine, and takes part in a
// deliberation beside Go participants. Without node and npm the tests
// skip, unless PARLEY_REQUIRE_NODE is set (CI sets it): then they fail.
// PARLEY_NODE names another node binary to run them with.

var (
	buildOnce sync.Once
	buildErr  error
)

// built installs the dependencies (npm ci, skipped while node_modules was
// installed from the same package-lock.json) and compiles the library,
// once for all the tests.
func built(t *testing.T) (node string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if p := os.Getenv("PARLEY_NODE"); p != "" {
		node, err = p, nil // another node to test with (18, the oldest supported)
	}
	npm, err2 := exec.LookPath("npm")
	if err != nil || err2 != nil {
		if os.Getenv("PARLEY_REQUIRE_NODE") != "" {
			t.Fatal("node and npm are required (PARLEY_REQUIRE_NODE) and not installed")
		}
		t.Skip("SKIPPED: no node or npm (apt-get install nodejs npm); the TypeScript library is not tested")
	}
	buildOnce.Do(func() { buildErr = build(node, npm) })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return node
}

func build(node, npm string) error {
	lock, err := os.ReadFile("package-lock.json")
	if err != nil {
		return err
	}
	sum := sha256.Sum256(lock)
	stamp := filepath.Join("node_modules", ".parley-lock-sha256")
	if b, err := os.ReadFile(stamp); err != nil || string(b) != hex.EncodeToString(sum[:]) {
		if err := run(npm, "ci", "--no-audit", "--no-fund"); err != nil {
			return err
		}
		if err := os.WriteFile(stamp, []byte(hex.EncodeToString(sum[:])), 0o644); err != nil {
			return err
		}
	}
	return run(node, filepath.Join("node_modules", "typescript", "bin", "tsc"), "-p", ".")
}

func run(name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func engine(t *testing.T) (*service.Service, *nats.Conn) {
	t.Helper()
	return engineOn(t, 0)
}

// engineOn is engine on the record's layout: unpartitioned (streams 0),
// or partitioned over streams streams.
func engineOn(t *testing.T, streams int) (*service.Service, *nats.Conn) {
	t.Helper()
	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", Partitioned: streams > 0, Streams: streams})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return s, nc
}

// The library's own tests: the canonical form against every conformance
// vector, the artifact rules, the signatures, and the participant against
// this engine, and its retries against a NATS server without one.
func TestTypeScriptUnitTests(t *testing.T) {
	node := built(t)
	s, _ := engine(t)
	// A NATS server with JetStream and no engine, for the retries.
	bare, err := embedded.Start(embedded.Config{Dir: t.TempDir(), Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { embedded.Stop(bare) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", filepath.Join("dist", "tests"))
	cmd.Env = append(os.Environ(), "PARLEY_NATS_URL="+s.NATSURL(), "PARLEY_DATA="+s.DataDir(), "PARLEY_BARE_NATS_URL="+bare.ClientURL())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	// Every test ran: none skipped, none failed.
	for _, want := range []string{"# fail 0", "# skipped 0"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Fatalf("node --test: no %q in\n%s", want, out)
		}
	}
	t.Logf("%s", lastLines(out, 8))
}

func lastLines(b []byte, n int) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, []byte("\n"))
}

func userKey(t *testing.T) (nkeys.KeyPair, string, string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	return kp, pub, string(seed)
}

// A deliberation between two Go participants (the reference client) and
// the TypeScript reviewer of examples/reviewer.ts, a separate node process
// on its own NATS connection, as a TypeScript agent takes part: it
// watches the deliberation and answers the architect's claim with
// evidence and a blocking objection; the judge's final decision disposes
// of the objection and the supervisor completes the deliberation. Every
// artifact is signed and the charter requires it, so the engine verified
// the TypeScript signatures; the reviewer checks the final closure itself.
//
// On every layout of the record: partitioned (docs/SCALING.md), in one
// stream and over four, the library finds the record's layout by asking,
// reads the deliberation's stream under the published subjects, and its
// reads wait for its own publishes by their positions (over four streams,
// in a stream other than the first, where a position is not a sequence).
func TestTypeScriptParticipantBesideGo(t *testing.T) {
	for _, streams := range []int{0, 1, 4} {
		t.Run(map[int]string{0: "unpartitioned", 1: "partitioned", 4: "four-streams"}[streams], func(t *testing.T) { participantBesideGo(t, streams) })
	}
}

func participantBesideGo(t *testing.T, streams int) {
	node := built(t)
	s, nc := engineOn(t, streams)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	archKey, archPub, _ := userKey(t)
	judgeKey, judgePub, _ := userKey(t)
	_, reviewerPub, reviewerSeed := userKey(t)
	architect, err := client.NewWithOptions(nc, "architect", client.Options{SigningKey: archKey})
	if err != nil {
		t.Fatal(err)
	}
	judge, _ := client.NewWithOptions(nc, "judge", client.Options{SigningKey: judgeKey})
	id := uuid.Must(uuid.NewV7()).String()
	for l := s.Runner.Layout(); l.Index(id) == 0 && l.N() > 1; {
		id = uuid.Must(uuid.NewV7()).String()
	}
	err = architect.OpenID(ctx, id, client.Charter{
		Title:             "Adopt the read-through cache?",
		Participants:      []string{"architect", "reviewer", "judge"},
		Keys:              map[string]string{"architect": archPub, "reviewer": reviewerPub, "judge": judgePub},
		RequireSignatures: true,
	})
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(ctx, node, filepath.Join("dist", "examples", "reviewer.js"))
	cmd.Env = append(os.Environ(), "PARLEY_NATS_URL="+nc.ConnectedUrl(), "PARLEY_DATA="+s.DataDir(), "PARLEY_DELIBERATION="+id,
		"PARLEY_TOKEN=reviewer", "PARLEY_SEED="+reviewerSeed)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	claim, _, err := architect.Publish(ctx, id, events.Draft{Type: events.TypeClaim,
		Payload: events.Claim{Statement: "The read-through cache halves p99 latency."}})
	if err != nil {
		t.Fatal(err)
	}

	// The reviewer's blocking objection is in the record.
	var view api.View
	if err := architect.Watch(ctx, id, func(v api.View) bool {
		view = v
		return len(v.OpenBlockingObjections) == 0
	}); err != nil {
		t.Fatalf("waiting for the reviewer: %v (state %+v, reviewer stderr %s)", err, view, stderr.Bytes())
	}
	if view.Participants["reviewer"] != 2 || view.Counts[events.TypeEvidence] != 1 || view.Rejections != 0 {
		t.Fatalf("after the reviewer: participants %v, counts %v, rejections %v", view.Participants, view.Counts, view.RejectionsByCode)
	}
	objection := view.OpenBlockingObjections[0]

	decision, _, err := judge.Publish(ctx, id, events.Draft{Type: events.TypeDecision,
		Payload: events.Decision{Outcome: "Adopt the cache, measured on every workload first.", Status: events.Final,
			ObjectionDispositions: []events.Disposition{{Objection: objection, Disposition: events.Addressed, Rationale: "Measured on three workloads."}},
			UnresolvedIssues:      []events.Issue{}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}}})
	if err != nil {
		t.Fatal(err)
	}

	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("reviewer: %v\n%s", err, stderr.Bytes())
		}
	case <-ctx.Done():
		t.Fatalf("the reviewer never ended\n%s", stderr.Bytes())
	}
	var report struct {
		Token       string   `json:"token"`
		Artifacts   []string `json:"artifacts"`
		Termination string   `json:"termination"`
		Decision    string   `json:"decision"`
		ClosureOK   bool     `json:"closure_ok"`
	}
	sc := bufio.NewScanner(&stdout)
	var last []byte
	for sc.Scan() {
		last = append(last[:0], sc.Bytes()...)
	}
	if err := json.Unmarshal(last, &report); err != nil {
		t.Fatalf("reviewer's report %q: %v\n%s", last, err, stderr.Bytes())
	}
	if report.Termination != "completed" || report.Decision != decision.ID.String() || !report.ClosureOK || len(report.Artifacts) != 2 {
		t.Fatalf("reviewer's report: %+v", report)
	}

	// Seen from Go: completed, the closure verifies, and the reviewer's
	// two artifacts are in the DAG under its token, with nothing refused.
	final, err := architect.State(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if final.Status != api.StatusCompleted || final.Rejections != 0 || final.Participants["reviewer"] != 2 {
		t.Fatalf("final state: %s, participants %v, rejections %v", final.Status, final.Participants, final.RejectionsByCode)
	}
	res, err := architect.Closure(ctx, id, decision.ID.String(), 0)
	if err != nil || !res.OK {
		t.Fatalf("closure: %+v, %v", res, err)
	}
	for _, a := range report.Artifacts {
		b, found, err := architect.Artifact(ctx, id, a)
		if err != nil || !found {
			t.Fatalf("reviewer's artifact %s: found %v, %v", a, found, err)
		}
		if _, err := events.Validate(b); err != nil {
			t.Errorf("reviewer's artifact %s: %v", a, err)
		}
	}
	if objection.String() != report.Artifacts[1] {
		t.Errorf("the open objection %s is not the reviewer's %s", objection, report.Artifacts[1])
	}
}

// The TypeScript agent of examples/relay-agent.ts as a relay participant (a
// subprocess that reads its turn and writes its draft, docs/RELAY.md)
// beside two Go-side participants of the relay, in a signed run against a
// real engine: every round it opens the context it is given and objects to
// the architect's latest artifact; the judge disposes of the objections,
// and the run completes with a verified closure.
func TestTypeScriptRelayParticipant(t *testing.T) {
	node := built(t)
	s, _ := engine(t)
	agent, err := filepath.Abs(filepath.Join("dist", "examples", "relay-agent.js"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	type m = map[string]any
	write("architect.json", []m{
		{"artifact_type": "CLAIM", "payload": m{"statement": "A read-through cache halves p99 latency."}, "references": []m{}},
		{"artifact_type": "REVISION", "payload": m{"statement": "The cache halves p99 on the mixed workload, measured."},
			"references": []m{{"artifact_id": "@last.ref", "relation": "revises"}}},
	})
	write("judge.json", []m{{"artifact_type": "DECISION",
		"payload": m{"outcome": "Adopt the revised cache.", "status": "final", "unresolved_issues": []m{},
			"objection_dispositions": m{"@all-blocking": "addressed", "rationale": "The revision measures it."}},
		"references": []m{{"artifact_id": "@last:REVISION", "relation": "decides"}}}})
	write("run.json", m{
		"title": "Adopt a read-through cache?", "question": "Should the ledger get a read-through cache?",
		"rounds": 2, "decider": "judge", "sign": true,
		"participants": []m{
			{"id": "architect", "role": "INITIAL_ARCHITECT", "adapter": "script", "script": "architect.json"},
			{"id": "reviewer", "role": "CRITICAL_REVIEWER", "adapter": "exec", "command": []string{node, agent}},
			{"id": "judge", "role": "JUDGE", "adapter": "script", "script": "judge.json"},
		},
	})
	cfg, err := relay.Load(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sum, err := relay.Run(ctx, cfg, relay.Options{NATS: s.NATSURL(), NATSOptions: []nats.Option{s.Participant()}, Dir: filepath.Join(dir, "run")})
	if err != nil {
		invalid, _ := filepath.Glob(filepath.Join(dir, "run", "invalid", "*"))
		for _, f := range invalid {
			b, _ := os.ReadFile(f)
			t.Logf("%s: %s", filepath.Base(f), b)
		}
		t.Fatal(err)
	}
	if sum.Termination != "completed" || !sum.ClosureOK || sum.InvalidOutputs != 0 ||
		sum.Participants["reviewer"] != 2 || sum.ObjectionsRaised != 2 || sum.ObjectionsDisposed != 2 {
		t.Fatalf("summary: %+v", sum)
	}
}

// Differential test of the canonical form: the TypeScript implementation
// answers exactly as package canon on the inputs of every conformance
// vector and upstream suite and on thousands of mutations of them (bytes
// replaced, inserted, deleted, repeated: malformed UTF-8, escapes, lone
// surrogates, combining marks, numbers, duplicates, truncations): the
// same canonical bytes, or the same class, code and byte offset, for AMD,
// JCS, the artifact id and its verification.
func TestTypeScriptCanonMatchesGo(t *testing.T) {
	node := built(t)
	seeds := seedInputs(t)
	rng := rand.New(rand.NewPCG(1, 2))
	inputs := append([][]byte(nil), seeds...)
	for len(inputs) < len(seeds)+6000 {
		in := seeds[rng.IntN(len(seeds))]
		if len(in) > 4096 {
			continue
		}
		for n := 1 + rng.IntN(3); n > 0; n-- {
			in = mutate(rng, in)
		}
		inputs = append(inputs, in)
	}
	var stdin bytes.Buffer
	for _, in := range inputs {
		fmt.Fprintf(&stdin, "{\"hex\":%q}\n", hex.EncodeToString(in))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("dist", "tests", "canon-diff.js"))
	cmd.Stdin = &stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("canon-diff: %v\n%s", err, stderr.Bytes())
	}
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	if len(lines) != len(inputs) {
		t.Fatalf("%d answers for %d inputs", len(lines), len(inputs))
	}
	type answer struct {
		Out    *string `json:"out"`
		Class  string  `json:"class"`
		Code   string  `json:"code"`
		Offset int64   `json:"offset"`
		Panic  string  `json:"panic"`
	}
	goAnswer := func(b []byte, s string, err error) answer {
		if err != nil {
			var ce *canon.Error
			if !errors.As(err, &ce) {
				t.Fatalf("not a canon error: %v", err)
			}
			return answer{Class: string(ce.Class), Code: ce.Code, Offset: ce.Offset}
		}
		if s == "" {
			s = hex.EncodeToString(b)
		}
		return answer{Out: &s}
	}
	same := func(a, b answer) bool {
		if (a.Out == nil) != (b.Out == nil) {
			return false
		}
		if a.Out != nil {
			return *a.Out == *b.Out
		}
		return a.Class == b.Class && a.Code == b.Code && a.Offset == b.Offset && a.Panic == b.Panic
	}
	show := func(a answer) string {
		if a.Out != nil {
			return "ok " + *a.Out
		}
		if a.Panic != "" {
			return "panic " + a.Panic
		}
		return fmt.Sprintf("%s %s at %d", a.Class, a.Code, a.Offset)
	}
	differ, rejected := 0, 0
	for i, in := range inputs {
		var ts map[string]answer
		if err := json.Unmarshal(lines[i], &ts); err != nil {
			t.Fatal(err)
		}
		amd, err := canon.Canonicalize(canon.AMD, in)
		want := map[string]answer{"amd": goAnswer(amd, "", err)}
		jcs, err := canon.Canonicalize(canon.JCS, in)
		want["jcs"] = goAnswer(jcs, "", err)
		id, err := canon.ID(in)
		want["id"] = goAnswer(nil, id.String(), err)
		vid, err := canon.Verify(in)
		want["verify"] = goAnswer(nil, vid.String(), err)
		if want["amd"].Out == nil {
			rejected++
		}
		for _, op := range []string{"amd", "jcs", "id", "verify"} {
			if !same(ts[op], want[op]) {
				differ++
				if differ <= 20 {
					t.Errorf("%s of %q: TypeScript %s, Go %s", op, in, show(ts[op]), show(want[op]))
				}
			}
		}
	}
	if differ > 0 {
		t.Fatalf("%d answers of %d differ", differ, 4*len(inputs))
	}
	if rejected < len(inputs)/3 || rejected == len(inputs) {
		t.Fatalf("%d of %d inputs rejected: the mutations do not cover both sides", rejected, len(inputs))
	}
	t.Logf("%d inputs (%d seeds), %d rejected by AMD: every answer the same", len(inputs), len(seeds), rejected)
}

// seedInputs reads the inputs of the published vectors and the upstream
// suites.
func seedInputs(t *testing.T) [][]byte {
	t.Helper()
	var out [][]byte
	for _, name := range []string{"canonical.json", "multifault.json", "semantic.json"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "vectors", name))
		if err != nil {
			t.Fatal(err)
		}
		var suite struct {
			Vectors []struct {
				Input    *string `json:"input"`
				InputHex string  `json:"input_hex"`
				Repeat   *struct {
					Prefix, Unit, Suffix string
					Count                int
				} `json:"input_repeat"`
			} `json:"vectors"`
			Relations []struct{ Source, Target string } `json:"relations"`
		}
		if err := json.Unmarshal(b, &suite); err != nil {
			t.Fatal(err)
		}
		for _, v := range suite.Vectors {
			switch {
			case v.Input != nil:
				out = append(out, []byte(*v.Input))
			case v.InputHex != "":
				h, _ := hex.DecodeString(v.InputHex)
				out = append(out, h)
			case v.Repeat != nil:
				out = append(out, []byte(v.Repeat.Prefix+strings.Repeat(v.Repeat.Unit, v.Repeat.Count)+v.Repeat.Suffix))
			default:
				out = append(out, nil)
			}
		}
		for _, r := range suite.Relations {
			out = append(out, []byte(r.Source), []byte(r.Target))
		}
	}
	for _, glob := range []string{"amd-upstream/*/*.json", "jcs-upstream/*/input/*.json", "jcs-upstream/rfc8785/*.json",
		"jsontestsuite/test_parsing/*.json", "jsontestsuite/test_transform/*.json", "matrix-canonical/input/*.json"} {
		files, _ := filepath.Glob(filepath.Join("..", "testdata", "upstream", glob))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
	}
	if len(out) < 900 {
		t.Fatalf("only %d seed inputs", len(out))
	}
	return out
}

// pieces are what mutations insert: the bytes of every fault the profile
// knows and of what makes canonical forms differ.
var pieces = []string{
	`"`, `\`, `{`, `}`, `[`, `]`, `,`, `:`, ` `, "\t", "\n", `0`, `1`, `-`, `.`, `e`, `E`, `+`,
	`\u`, `\ud800`, `\udc00`, `\ud83d\ude00`, `\u00e9`, `\u0000`, `\/`, `\x`, `\"`,
	"\u0301", "e\u0301", "\u00e9", "\u212b", "A\u030a", "\u212a", "\u1100\u1161", "\uac00", "\u0958",
	strings.Repeat("\u0301", 31), strings.Repeat("\u0316\u0301", 16), "\U0001F600", "\uff61", "\u2028", "\ufdd0", "\x7f",
	"\x00", "\x1f", "\x80", "\xc0\xaf", "\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xef\xbb\xbf", "\xff",
	`1.5`, `1e5`, `-0`, `0.0`, `1E+2`, `9007199254740991`, `9007199254740992`, `-9007199254740991`, `12345678901234567`,
	`NaN`, `Infinity`, `-Infinity`, `true`, `fals`, `null`, `01`, `1.`,
	`"a":1,`, `"a":`, `"artifact_id":"sha256:` + strings.Repeat("0", 64) + `",`, `"artifact_id":1,`, `{"a":{"a":[`, `]}}`,
}

func mutate(rng *rand.Rand, in []byte) []byte {
	at := 0
	if len(in) > 0 {
		at = rng.IntN(len(in) + 1)
	}
	out := append([]byte(nil), in[:at]...)
	switch rng.IntN(5) {
	case 0, 1: // insert a piece
		out = append(out, pieces[rng.IntN(len(pieces))]...)
		out = append(out, in[at:]...)
	case 2: // replace a byte by a piece
		out = append(out, pieces[rng.IntN(len(pieces))]...)
		if at < len(in) {
			out = append(out, in[at+1:]...)
		}
	case 3: // delete a short range
		end := min(len(in), at+1+rng.IntN(8))
		out = append(out, in[end:]...)
	default: // repeat a range (duplicate members, deeper nesting)
		end := min(len(in), at+rng.IntN(24))
		out = append(out, in[at:end]...)
		out = append(out, in[at:]...)
	}
	return out
}
