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

	"github.com/parley-engine/parley/relay"
	"github.com/parley-engine/parley/service"
)

// A relay with a principal stops at the decider's binding moment; the
// principal answers through the engine's API (as the /bind page does);
// each of the four resolutions leaves the record seed 002's mapping says,
// and the relay carries on accordingly.
func TestRelay_Principal(t *testing.T) {
	var envs struct {
		Vectors []struct {
			Name  string
			Input map[string]any
		}
	}
	b, _ := os.ReadFile("../binding/testdata/envelopes.json")
	json.Unmarshal(b, &envs)
	env := envs.Vectors[0].Input
	env2 := map[string]any{}
	for k, v := range env {
		env2[k] = v
	}
	env2["synopsis"] = "Share the travel dates now; the passport number goes to the airline only."
	ask := func(e map[string]any) map[string]any {
		return map[string]any{"artifact_type": "DECISION", "payload": map[string]any{"outcome": "Ask the principal what to share.", "status": "provisional",
			"objection_dispositions": []any{}, "unresolved_issues": []any{}},
			"references": []any{map[string]any{"artifact_id": "@last:CLAIM", "relation": "decides"}}, "binding_moment": e}
	}
	claim := map[string]any{"artifact_type": "CLAIM", "payload": map[string]any{"statement": "Share the dates only."}, "references": []any{}}
	objection := map[string]any{"artifact_type": "OBJECTION", "payload": map[string]any{"statement": "Check what the airline needs.", "blocking": false},
		"references": []any{map[string]any{"artifact_id": "@last", "relation": "objects-to"}}}

	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, _ := nats.Connect(s.NATSURL())
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
		{"option", []string{`"resolution":"option","option_idx":0`}, []map[string]any{ask(env)}, 1, "completed", "option", true},
		{"declined", []string{`"resolution":"declined"`}, []map[string]any{ask(env)}, 1, "cancelled", "declined", true},
		{"answer", []string{`"resolution":"answer","answer":"The dates only, and ask me again at check-in."`, `"resolution":"option","option_idx":0`},
			[]map[string]any{ask(env), ask(env2)}, 1, "completed", "answer,option", true},
		{"question", []string{`"resolution":"question"`, `"resolution":"option","option_idx":1`},
			[]map[string]any{ask(env), ask(env2)}, 2, "completed", "question,option", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			write := func(name string, v any) {
				b, _ := json.Marshal(v)
				os.WriteFile(filepath.Join(dir, name), b, 0o644)
			}
			var arch, crit []map[string]any
			for i := 0; i < c.rounds; i++ {
				arch, crit = append(arch, claim), append(crit, objection)
			}
			write("architect.json", arch)
			write("critic.json", crit)
			write("judge.json", c.judge)
			write("relay.json", map[string]any{"title": "Share with the booking service? (" + c.name + ")", "rounds": 1, "decider": "judge",
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
				for _, body := range c.answers {
					m, err := sub.NextMsg(30 * time.Second)
					if err != nil {
						errs <- "no announcement: " + err.Error()
						return
					}
					var a service.Announcement
					json.Unmarshal(m.Data, &a)
					url := "http://" + s.HTTPAddr() + "/api/v1/deliberations/" + a.Deliberation + "/bindings/" + a.EnvelopeDigest
					resp, err := http.Post(url, "application/json", bytes.NewBufferString(`{"binding_moment_resolution":{"envelope_digest":"`+a.EnvelopeDigest+`",`+body+`}}`))
					if err != nil || resp.StatusCode != http.StatusCreated {
						errs <- "resolution refused: " + resp.Status
						return
					}
					resp.Body.Close()
				}
				errs <- ""
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			sum, err := relay.Run(ctx, cfg, relay.Options{NATS: s.NATSURL(), Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if e := <-errs; e != "" {
				t.Fatal(e)
			}
			if sum.Termination != c.termination || strings.Join(sum.Resolutions, ",") != c.resolutions || sum.ClosureOK != c.closureOK ||
				sum.BindingMoments != len(c.answers) || sum.Participants["principal"] != len(c.answers) {
				t.Fatalf("%+v", sum)
			}
		})
	}
}
