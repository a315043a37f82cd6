package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// envelope64 is seed 002 §6.4's envelope, binding's first vector.
func envelope64(t *testing.T) (json.RawMessage, *binding.Envelope) {
	t.Helper()
	var vs struct {
		Vectors []struct {
			Input json.RawMessage `json:"input"`
		} `json:"vectors"`
	}
	b, err := os.ReadFile("../binding/testdata/envelopes.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatal(err)
	}
	env, err := binding.ParseEnvelope(vs.Vectors[0].Input)
	if err != nil {
		t.Fatal(err)
	}
	return vs.Vectors[0].Input, env
}

// resolve posts the principal's resolution with the engine's HTTP token and
// returns the status and the answer.
func resolve(t *testing.T, s *service.Service, id string, env *binding.Envelope, res string) (int, map[string]any) {
	t.Helper()
	body := `{"binding_moment_resolution":{"envelope_digest":"` + env.Digest.String() + `",` + res + `}}`
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.HTTPAddr()+"/api/v1/deliberations/"+id+"/bindings/"+env.Digest.String(), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.Credentials().HTTPToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

// bindPage returns the /bind page of a deliberation, as a browser gets it.
func bindPage(t *testing.T, s *service.Service, id string) string {
	t.Helper()
	// Signed in, as the principal's browser is (a browser that is not
	// signed in sees no form).
	req, _ := http.NewRequest(http.MethodGet, "http://"+s.HTTPAddr()+"/bind/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+s.Credentials().HTTPToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/bind/%s: %d %s", id, resp.StatusCode, b)
	}
	return string(b)
}

// The binding attacks of a participant with its own credentials
// (deploy/nats.conf), on a real engine: alice asks the principal; bob
// answers in the principal's stead, in every form he can compute: a CLAIM
// carrying the resolution extension, the principal's own option
// resolution published as himself (what binding.Record builds, byte for
// byte), a final DECISION of the provisional one (published before alice
// even asks, then again once she has), and 200 records with 100 KB kinds
// for the metrics.
// Each is refused (binding.not_principal), none counts, the moment stays
// open on the API and the page; the principal then resolves it, the
// supervisor completes on the principal's choice, and the audit of the
// exported recording is OK.
func TestBinding_OnlyThePrincipalResolves(t *testing.T) {
	h := startHostile(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	raw, env := envelope64(t)
	orch, _, _ := h.login("orchestrator", "relay")
	alice, _, _ := h.login("alice", "alice")
	bob, _, bobJS := h.login("bob", "bob")
	id, err := orch.Open(ctx, client.Charter{Title: "What should be shared?", Participants: []string{"alice", "bob", "principal"}})
	if err != nil {
		t.Fatal(err)
	}
	cl, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Share the dates only."}})
	if err != nil {
		t.Fatal(err)
	}
	prov := events.MustSeal(events.Draft{Type: events.TypeDecision,
		Payload:    events.Decision{Outcome: "Ask the principal.", Status: events.Provisional, ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: cl.ID, Relation: events.Decides}},
		Extensions: map[string]any{binding.ExtEnvelope: raw}})

	// Before alice asks, bob decides her question: refused, since it
	// references what the deliberation does not hold; once she has asked,
	// refused for deciding it in the principal's stead.
	early := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: env.Question.Options[1].Label, Status: events.Final},
		References: []events.Reference{{Target: prov.ID, Relation: events.Decides}}})
	eack, err := bob.PublishArtifact(ctx, id, early)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.PublishArtifact(ctx, id, prov); err != nil {
		t.Fatal(err)
	}
	again, err := bobJS.Publish(ctx, wire.ArtifactSubject(id, "bob"), early.Canonical)
	if err != nil {
		t.Fatal(err)
	}
	h.projected(ctx, id, again.Sequence)
	if h.rejection(id, eack.Sequence) != projector.CodeUnknownTarget || h.rejection(id, again.Sequence) != projector.CodeBindingNotPrincipal {
		t.Fatalf("bob's early decision: %q, once asked: %q", h.rejection(id, eack.Sequence), h.rejection(id, again.Sequence))
	}

	option, err := binding.Record(prov, env, &binding.Resolution{EnvelopeDigest: env.Digest, Kind: binding.KindOption, OptionIdx: 1})
	if err != nil {
		t.Fatal(err)
	}
	answer := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Share everything."},
		References: []events.Reference{{Target: prov.ID, Relation: events.Considers}},
		Extensions: map[string]any{binding.ExtResolution: map[string]any{"envelope_digest": env.Digest.String(), "resolution": "answer"}}})
	var last uint64
	for _, forged := range []*events.Artifact{answer, option} {
		ack, err := bob.PublishArtifact(ctx, id, forged)
		if err != nil {
			t.Fatal(err)
		}
		v := h.projected(ctx, id, ack.Sequence)
		if code := h.rejection(id, ack.Sequence); code != projector.CodeBindingNotPrincipal || v.Status != api.StatusOpen {
			t.Fatalf("bob's %s: rejection %q, status %s", forged.Type, code, v.Status)
		}
		last = ack.Sequence
	}
	// 200 records whose kind is 100 KB, for the metrics' labels.
	huge := strings.Repeat("x", 100<<10)
	for i := range 200 {
		a := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "forged " + strings.Repeat("!", i)},
			References: []events.Reference{{Target: prov.ID, Relation: events.Considers}},
			Extensions: map[string]any{binding.ExtResolution: map[string]any{"envelope_digest": env.Digest.String(), "resolution": strconv.Itoa(i) + huge}}})
		ack, err := bobJS.Publish(ctx, wire.ArtifactSubject(id, "bob"), a.Canonical)
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	v := h.projected(ctx, id, last)
	if v.Status != api.StatusOpen || v.RejectionsByCode[projector.CodeBindingNotPrincipal] != 203 {
		t.Fatalf("status %s, rejections %v", v.Status, v.RejectionsByCode)
	}
	var moments []binding.Moment
	getJSON(t, "http://"+h.s.HTTPAddr()+"/api/v1/deliberations/"+id+"/bindings", &moments)
	if len(moments) != 1 || moments[0].Status != "open" || moments[0].Principal != "principal" {
		t.Fatalf("moments %+v", moments)
	}
	if page := bindPage(t, h.s, id); !strings.Contains(page, `data-status="open"`) || !strings.Contains(page, `name="resolution" value="option"`) || strings.Contains(page, `data-status="resolved"`) {
		t.Fatalf("the page after the forgeries:\n%s", page)
	}

	// The principal chooses option 1, the option bob forged: the very
	// artifact he published is admitted from the principal.
	code, m := resolve(t, h.s, id, env, `"resolution":"option","option_idx":1`)
	if code != http.StatusCreated || m["artifact_id"] != option.ID.String() || m["participant"] != "principal" {
		t.Fatalf("the principal's resolution: %d %v", code, m)
	}
	getJSON(t, "http://"+h.s.HTTPAddr()+"/api/v1/deliberations/"+id+"/bindings", &moments)
	if moments[0].Status != "resolved" || moments[0].ResolvedBy != "principal" || moments[0].ResolvedIn.String() != option.ID.String() {
		t.Fatalf("moments %+v", moments)
	}
	if page := bindPage(t, h.s, id); !strings.Contains(page, `data-resolved-by="principal"`) {
		t.Fatalf("the page after the resolution:\n%s", page)
	}
	deadline := time.Now().Add(15 * time.Second)
	for v = h.projected(ctx, id, last); v.Status != api.StatusCompleted; v = h.projected(ctx, id, last) {
		if time.Now().After(deadline) {
			t.Fatalf("status %s", v.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The metrics count the principal's one resolution, with alice (whom
	// the charter lists) as decider, and no label of bob's making.
	resp, err := http.Get("http://" + h.s.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var series []string
	for l := range bytes.Lines(mb) {
		if bytes.HasPrefix(l, []byte("parley_binding_resolutions_total{")) {
			series = append(series, string(bytes.TrimSpace(l)))
		}
	}
	if len(mb) > 256<<10 || len(series) != 1 || series[0] != `parley_binding_resolutions_total{decider="alice",resolution="option"} 1` {
		t.Fatalf("/metrics is %d bytes, resolutions %q", len(mb), series)
	}

	// The record is sound: the audit of its export is OK.
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	if out, err := exec.Command(engineBin, "export", "--nats", h.s.NATSURL(), "--user", "admin", "--password", "change-me-admin", "--deliberation", id, "--out", rec).CombinedOutput(); err != nil {
		t.Fatalf("export: %v %s", err, out)
	}
	if out, err := exec.Command(engineBin, "audit", rec).CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "audit        OK") {
		t.Fatalf("audit: %v\n%s", err, out)
	}
}
