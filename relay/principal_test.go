package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/archive"
	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/relay"
	"github.com/parley-engine/parley/service"
)

var principalEnvelope = func() map[string]any {
	var envs struct {
		Vectors []struct {
			Name  string
			Input map[string]any
		}
	}
	b, _ := os.ReadFile("../binding/testdata/envelopes.json")
	json.Unmarshal(b, &envs)
	return envs.Vectors[0].Input
}

func askScript(e map[string]any) map[string]any {
	return map[string]any{"artifact_type": "DECISION", "payload": map[string]any{"outcome": "Ask the principal what to share.", "status": "provisional",
		"objection_dispositions": []any{}, "unresolved_issues": []any{}},
		"references": []any{map[string]any{"artifact_id": "@last:CLAIM", "relation": "decides"}}, "binding_moment": e}
}

// principalRun runs a relay whose judge asks the principal (judge's
// script), with architect and critic for rounds rounds, against the engine
// s; the principal answers each announced binding moment through the
// engine's API with the engine's token, with the bodies of answers in
// order.
func principalRun(t *testing.T, s *service.Service, nc *nats.Conn, name string, answers []string, judge []map[string]any, rounds int) *relay.Summary {
	t.Helper()
	claim := map[string]any{"artifact_type": "CLAIM", "payload": map[string]any{"statement": "Share the dates only."}, "references": []any{}}
	objection := map[string]any{"artifact_type": "OBJECTION", "payload": map[string]any{"statement": "Check what the airline needs.", "blocking": false},
		"references": []any{map[string]any{"artifact_id": "@last", "relation": "objects-to"}}}
	dir := t.TempDir()
	write := func(name string, v any) {
		b, _ := json.Marshal(v)
		os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	var arch, crit []map[string]any
	for i := 0; i < rounds; i++ {
		arch, crit = append(arch, claim), append(crit, objection)
	}
	write("architect.json", arch)
	write("critic.json", crit)
	write("judge.json", judge)
	write("relay.json", map[string]any{"title": "Share with the booking service? (" + name + ")", "rounds": 1, "decider": "judge",
		"principal": "principal", "principal_timeout": "30s", "context": "full-history",
		"participants": []any{
			map[string]any{"id": "architect", "adapter": "script", "script": "architect.json"},
			map[string]any{"id": "critic", "adapter": "script", "script": "critic.json"},
			map[string]any{"id": "judge", "adapter": "script", "script": "judge.json"}}})
	cfg, err := relay.Load(filepath.Join(dir, "relay.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The principal: answers each announced binding moment.
	sub, _ := nc.SubscribeSync("parley.*.binding")
	defer sub.Unsubscribe()
	nc.Flush()
	errs := make(chan string, 4)
	go func() {
		for _, body := range answers {
			m, err := sub.NextMsg(30 * time.Second)
			if err != nil {
				errs <- "no announcement: " + err.Error()
				return
			}
			var a binding.Announcement
			json.Unmarshal(m.Data, &a)
			url := "http://" + s.HTTPAddr() + "/api/v1/deliberations/" + a.Deliberation + "/bindings/" + a.EnvelopeDigest
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(`{"binding_moment_resolution":{"envelope_digest":"`+a.EnvelopeDigest+`",`+body+`}}`))
			req.Header.Set("Authorization", "Bearer "+s.Credentials().HTTPToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- "resolution: " + err.Error()
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				errs <- "resolution refused: " + resp.Status
				return
			}
		}
		errs <- ""
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var notices bytes.Buffer // not a terminal: the /bind address shows all the same
	sum, err := relay.Run(ctx, cfg, relay.Options{NATS: s.NATSURL(), NATSOptions: []nats.Option{s.Participant()}, Dir: dir, Notices: &notices, HTTP: "http://" + s.HTTPAddr()})
	if err != nil {
		t.Fatal(err)
	}
	if e := <-errs; e != "" {
		t.Fatal(e)
	}
	// Each binding moment says where it is answered, whole, and each
	// resolution what was chosen or answered (in the notices, the summary
	// and the report).
	if n := strings.Count(notices.String(), "answer at http://"+s.HTTPAddr()+"/bind/"+sum.Deliberation+" "); n != len(answers) {
		t.Errorf("%d /bind addresses for %d moments:\n%s", n, len(answers), notices.String())
	}
	report, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	// The summary and the report link the deliberation's page in the
	// engine's explorer, which serves it.
	if want := "http://" + s.HTTPAddr() + "/deliberations/" + sum.Deliberation; sum.Explorer != want ||
		!strings.Contains(string(report), "<"+want+">") || !strings.Contains(relay.FormatSummary(sum), want) {
		t.Errorf("explorer link %q, want %q in the summary and the report", sum.Explorer, want)
	} else if resp, err := http.Get(want); err != nil {
		t.Error(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("GET %s: %s %s", want, resp.Status, resp.Header.Get("Content-Type"))
		}
	}
	if len(sum.Binding) != len(answers) {
		t.Errorf("binding %+v", sum.Binding)
	}
	for i, b := range sum.Binding {
		var want string
		switch {
		case strings.Contains(answers[i], `"option_idx":0`):
			want = "option 1: "
		case strings.Contains(answers[i], `"option_idx":1`):
			want = "option 2: "
		case strings.Contains(answers[i], `"answer":`):
			want = strings.TrimSuffix(strings.SplitN(answers[i], `"answer":"`, 2)[1], `"`)
		}
		if b.Resolution == "" || b.Question == "" || !strings.HasPrefix(b.Chosen, want) || (want != "" && len(b.Chosen) <= len("option 0: ")) {
			t.Errorf("resolution %d: %+v (answered %s)", i, b, answers[i])
		}
		if !strings.Contains(notices.String(), "resolved by principal: "+b.Resolution) ||
			(b.Chosen != "" && !strings.Contains(string(report), b.Chosen)) {
			t.Errorf("resolution %+v not shown:\n%s", b, notices.String())
		}
	}
	return sum
}

// A relay with a principal stops at the decider's binding moment; the
// principal answers through the engine's API (as the /bind page does);
// each of the four resolutions leaves the record seed 002's mapping says,
// and the relay carries on accordingly.
func TestRelay_Principal(t *testing.T) {
	env, env2 := principalEnvelope(), principalEnvelope()
	env2["synopsis"] = "Share the travel dates now; the passport number goes to the airline only."

	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, _ := nats.Connect(s.NATSURL(), s.Participant())
	defer nc.Close()

	for _, c := range []struct {
		name        string
		answers     []string // the principal's resolution bodies (without the digest), in order
		judge       []map[string]any
		rounds      int // of the others' scripts
		termination string
		resolutions string
		closureOK   bool
	}{
		{"option", []string{`"resolution":"option","option_idx":0`}, []map[string]any{askScript(env)}, 1, "completed", "option", true},
		{"declined", []string{`"resolution":"declined"`}, []map[string]any{askScript(env)}, 1, "cancelled", "declined", true},
		{"answer", []string{`"resolution":"answer","answer":"The dates only, and ask me again at check-in."`, `"resolution":"option","option_idx":0`},
			[]map[string]any{askScript(env), askScript(env2)}, 1, "completed", "answer,option", true},
		{"question", []string{`"resolution":"question"`, `"resolution":"option","option_idx":1`},
			[]map[string]any{askScript(env), askScript(env2)}, 2, "completed", "question,option", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sum := principalRun(t, s, nc, c.name, c.answers, c.judge, c.rounds)
			if sum.Termination != c.termination || strings.Join(sum.Resolutions, ",") != c.resolutions || sum.ClosureOK != c.closureOK ||
				sum.BindingMoments != len(c.answers) || sum.Participants["principal"] != len(c.answers) {
				t.Fatalf("%+v", sum)
			}
		})
	}
}

// A recording holds the principal's resolutions, which a participant of
// the embedded default may not publish: replay and fork into an engine
// reached without credentials are refused, and say why; with the
// operator's credentials, or into their own embedded engine (whose
// operator they are), they go through.
func TestRelay_ReplayAndForkWithPrincipal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, env2 := principalEnvelope(), principalEnvelope()
	env2["synopsis"] = "Share the travel dates now; the passport number goes to the airline only."
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, _ := nats.Connect(s.NATSURL(), s.Participant())
	defer nc.Close()
	orig := principalRun(t, s, nc, "recorded", []string{`"resolution":"answer","answer":"The dates only."`, `"resolution":"option","option_idx":0`},
		[]map[string]any{askScript(env), askScript(env2)}, 1)
	if orig.Termination != "completed" {
		t.Fatalf("%+v", orig)
	}
	js, _ := jetstream.New(nc)
	var rec bytes.Buffer
	if _, err := archive.Export(ctx, js, orig.Deliberation, recording.Stream, &rec); err != nil {
		t.Fatal(err)
	}
	reader := func() *recording.Reader {
		r, err := recording.NewReader(bytes.NewReader(rec.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var answer uint64 // the principal's first resolution, a CLAIM
	for r := reader(); ; {
		m, err := r.Next()
		if err != nil {
			break
		}
		if strings.HasSuffix(m.Subject, ".art.principal") && answer == 0 {
			answer = m.Position
		}
	}
	if answer == 0 {
		t.Fatal("the recording holds no resolution")
	}

	if _, err := relay.Replay(ctx, reader(), relay.ReplayOptions{NATS: s.NATSURL(), NATSOptions: []nats.Option{s.Participant()}}); err == nil || !strings.Contains(err.Error(), "principal is reserved") {
		t.Errorf("replay as a participant: %v", err)
	}
	c := s.Credentials()
	res, err := relay.Replay(ctx, reader(), relay.ReplayOptions{NATS: s.NATSURL(), NATSOptions: []nats.Option{nats.UserInfo(c.NATSUser, c.NATSPassword)}})
	if err != nil || res.Status != "completed" || res.StateDigest != orig.StateDigest {
		t.Errorf("replay as the operator: %v %+v (recorded %s)", err, res, orig.StateDigest)
	}
	if res, err := relay.Replay(ctx, reader(), relay.ReplayOptions{Dir: t.TempDir()}); err != nil || res.Status != "completed" || res.StateDigest != orig.StateDigest {
		t.Errorf("replay into its own engine: %v %+v", err, res)
	}

	// Fork after the principal's answer: the judge decides on it.
	dir := t.TempDir()
	final := map[string]any{"artifact_type": "DECISION", "payload": map[string]any{"outcome": "Share the dates only.", "status": "final",
		"objection_dispositions": []any{}, "unresolved_issues": []any{}},
		"references": []any{map[string]any{"artifact_id": "@last:CLAIM", "relation": "decides"}}}
	b, _ := json.Marshal([]any{final})
	os.WriteFile(filepath.Join(dir, "judge.json"), b, 0o644)
	b, _ = json.Marshal(map[string]any{"title": "forked after the answer", "rounds": 1, "decider": "judge", "context": "full-history",
		"participants": []any{map[string]any{"id": "judge", "adapter": "script", "script": "judge.json"}}})
	os.WriteFile(filepath.Join(dir, "relay.json"), b, 0o644)
	cfg, err := relay.Load(filepath.Join(dir, "relay.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Run(ctx, cfg, relay.Options{NATS: s.NATSURL(), NATSOptions: []nats.Option{s.Participant()}, Dir: t.TempDir(), Fork: reader(), ForkAtPosition: answer}); err == nil || !strings.Contains(err.Error(), "principal is reserved") {
		t.Errorf("fork as a participant: %v", err)
	}
	fork, err := relay.Run(ctx, cfg, relay.Options{Dir: t.TempDir(), Fork: reader(), ForkAtPosition: answer})
	if err != nil || fork.Termination != "completed" || !fork.ClosureOK {
		t.Fatalf("fork into its own engine: %v %+v", err, fork)
	}
}
