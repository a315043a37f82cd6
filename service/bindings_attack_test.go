package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
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
)

// asked is an engine on the embedded default with a deliberation whose
// decider, judge, asks the principal; mallory is any client without
// credentials, who may publish under any token but the reserved ones.
type asked struct {
	t        *testing.T
	s        *service.Service
	ctx      context.Context
	id       string
	env      *binding.Envelope
	prov     *events.Artifact
	mallory  *client.Client
	judge    *client.Client
	bindings string
}

func startAsked(t *testing.T, charter client.Charter) *asked {
	t.Helper()
	var envs struct {
		Vectors []struct{ Input json.RawMessage }
	}
	b, _ := os.ReadFile("../binding/testdata/envelopes.json")
	json.Unmarshal(b, &envs)
	env, err := binding.ParseEnvelope(envs.Vectors[0].Input)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, t.TempDir())
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	nc := dial(t, s)
	judge, _ := client.New(nc, "judge")
	mallory, _ := client.New(nc, "mallory")
	id, err := judge.Open(ctx, charter)
	if err != nil {
		t.Fatal(err)
	}
	cl, _, err := judge.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Share the dates only."}})
	if err != nil {
		t.Fatal(err)
	}
	prov, ack, err := judge.Publish(ctx, id, events.Draft{Type: events.TypeDecision,
		Payload:    events.Decision{Outcome: "Ask the principal.", Status: events.Provisional, ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: cl.ID, Relation: events.Decides}},
		Extensions: map[string]any{binding.ExtEnvelope: envs.Vectors[0].Input}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := judge.WaitPosition(ctx, id, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	return &asked{t: t, s: s, ctx: ctx, id: id, env: env, prov: prov, mallory: mallory, judge: judge,
		bindings: "http://" + s.HTTPAddr() + "/api/v1/deliberations/" + id + "/bindings"}
}

// forge publishes a as mallory and returns the engine's verdict on it.
func (a *asked) forge(art *events.Artifact) api.OutcomeReport {
	a.t.Helper()
	ack, err := a.mallory.PublishArtifact(a.ctx, a.id, art)
	if err != nil {
		a.t.Fatal(err)
	}
	o, err := a.mallory.WaitOutcome(a.ctx, a.id, ack.Sequence, art.ID.String())
	if err != nil {
		a.t.Fatal(err)
	}
	return o
}

func (a *asked) moment() binding.Moment {
	a.t.Helper()
	var ms []binding.Moment
	get(a.t, a.s, "/api/v1/deliberations/"+a.id+"/bindings", &ms)
	if len(ms) != 1 {
		a.t.Fatalf("moments %+v", ms)
	}
	return ms[0]
}

// resolve posts the principal's resolution with the engine's HTTP token.
func (a *asked) resolve(res string) (int, map[string]any) {
	a.t.Helper()
	body := `{"binding_moment_resolution":{"envelope_digest":"` + a.env.Digest.String() + `",` + res + `}}`
	req, _ := http.NewRequest(http.MethodPost, a.bindings+"/"+a.env.Digest.String(), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+a.s.Credentials().HTTPToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

func (a *asked) page() string {
	a.t.Helper()
	// As the principal's signed-in browser reads it (one not signed in
	// sees no form).
	req, _ := http.NewRequest(http.MethodGet, "http://"+a.s.HTTPAddr()+"/bind/"+a.id, nil)
	req.Header.Set("Authorization", "Bearer "+a.s.Credentials().HTTPToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func (a *asked) waitStatus(want api.Status) api.View {
	a.t.Helper()
	for {
		v, err := a.judge.State(a.ctx, a.id)
		if err == nil && v.Status == want {
			return v
		}
		if a.ctx.Err() != nil {
			a.t.Fatalf("status %s, want %s (%v)", v.Status, want, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Any participant's artifact carrying the parley.binding_resolution
// extension once marked the moment resolved by its publisher, after which
// the principal's resolution was refused (409) and the page showed no
// form. It is refused now, and the principal resolves.
func TestBindings_ForgedResolutionExtension(t *testing.T) {
	a := startAsked(t, client.Charter{Title: "share?"})
	forged := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Share everything."},
		References: []events.Reference{{Target: a.prov.ID, Relation: events.Considers}},
		Extensions: map[string]any{binding.ExtResolution: map[string]any{"envelope_digest": a.env.Digest.String(), "resolution": "answer"}}})
	if o := a.forge(forged); o.Outcome != api.VerdictRejected || o.Code != projector.CodeBindingNotPrincipal {
		t.Fatalf("mallory's resolution: %+v", o)
	}
	if m := a.moment(); m.Status != "open" || m.ResolvedBy != "" {
		t.Fatalf("moment %+v", m)
	}
	if p := a.page(); !strings.Contains(p, `data-status="open"`) || !strings.Contains(p, `name="resolution" value="declined"`) {
		t.Fatalf("no form on the page:\n%s", p)
	}
	code, m := a.resolve(`"resolution":"answer","answer":"Only the dates."`)
	if code != http.StatusCreated || m["participant"] != "principal" {
		t.Fatalf("the principal's resolution: %d %v", code, m)
	}
	if mo := a.moment(); mo.Status != "resolved" || mo.ResolvedBy != "principal" || mo.ResolvedIn.String() != m["artifact_id"] {
		t.Fatalf("moment %+v", mo)
	}
}

// The principal's own option resolution, built as binding.Record builds
// it and published by mallory, once completed the deliberation on
// mallory's choice. It is refused now; the deliberation stays open until
// the principal chooses, and then completes on the principal's choice.
func TestBindings_ForgedOptionDecision(t *testing.T) {
	a := startAsked(t, client.Charter{Title: "share?"})
	forged, err := binding.Record(a.prov, a.env, &binding.Resolution{EnvelopeDigest: a.env.Digest, Kind: binding.KindOption, OptionIdx: 1})
	if err != nil {
		t.Fatal(err)
	}
	o := a.forge(forged)
	if o.Outcome != api.VerdictRejected || o.Code != projector.CodeBindingNotPrincipal {
		t.Fatalf("mallory's decision: %+v", o)
	}
	// The supervisor judges nothing: the deliberation holds no final
	// decision.
	a.s.Supervisor.Step(a.ctx)
	if v, _ := a.judge.State(a.ctx, a.id); v.Status != api.StatusOpen || len(v.Terminations) != 0 || len(v.Decisions) != 1 {
		t.Fatalf("after mallory's decision: %+v", v)
	}
	code, m := a.resolve(`"resolution":"option","option_idx":0`)
	if code != http.StatusCreated || m["participant"] != "principal" || m["artifact_type"] != "DECISION" {
		t.Fatalf("the principal's resolution: %d %v", code, m)
	}
	v := a.waitStatus(api.StatusCompleted)
	var term *events.Artifact
	for _, id := range v.Terminations {
		raw, err := a.s.Queries.Artifact(a.ctx, a.id, id.String())
		if err != nil {
			t.Fatal(err)
		}
		term, _ = events.Validate(raw)
	}
	if term == nil || term.References[0].Target.String() != m["artifact_id"] {
		t.Fatalf("the completion %+v does not decide the principal's decision %v", term, m["artifact_id"])
	}
}

// The veto-rate metric once counted forged resolutions, and took its
// labels from them: 200 forged records with 100 KB kinds made /metrics 20
// MB. Now it counts the principal's resolutions only, its resolution label
// is one of four kinds, and its decider label a token the charter lists
// or "other".
func TestBindings_ForgedResolutionsMetrics(t *testing.T) {
	a := startAsked(t, client.Charter{Title: "share?"}) // the charter lists no participant: the decider is "other"
	huge := strings.Repeat("x", 100<<10)
	var last uint64
	for i := range 200 {
		f := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "forged " + strings.Repeat("!", i)},
			References: []events.Reference{{Target: a.prov.ID, Relation: events.Considers}},
			Extensions: map[string]any{binding.ExtResolution: map[string]any{"envelope_digest": a.env.Digest.String(), "resolution": strconv.Itoa(i) + huge}}})
		ack, err := a.mallory.PublishArtifact(a.ctx, a.id, f)
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	v, err := a.mallory.WaitPosition(a.ctx, a.id, last)
	if err != nil || v.RejectionsByCode[projector.CodeBindingNotPrincipal] != 200 {
		t.Fatalf("rejections %v %v", v.RejectionsByCode, err)
	}
	if code, m := a.resolve(`"resolution":"question"`); code != http.StatusCreated {
		t.Fatalf("the principal's resolution: %d %v", code, m)
	}
	resp, err := http.Get("http://" + a.s.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var series []string
	for l := range bytes.Lines(mb) {
		if bytes.HasPrefix(l, []byte("parley_binding_")) {
			series = append(series, string(bytes.TrimSpace(l)))
		}
	}
	want := []string{`parley_binding_moments_total{decider="other"} 1`, `parley_binding_resolutions_total{decider="other",resolution="question"} 1`}
	if len(mb) > 256<<10 || strings.Join(series, "\n") != strings.Join(want, "\n") {
		t.Fatalf("/metrics is %d bytes, binding series:\n%s", len(mb), strings.Join(series, "\n"))
	}
}
