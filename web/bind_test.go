package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
)

// invariants are what the binding page shows of seed 002 §9.1.
type invariants struct {
	Slots, Findings, Recs, Options, Reasonings, Recommended int
	RecBorder, OtherBorder, Badge                           string
	Answer, Question, Decline                               bool
}

// result clicks sel and returns the artifact type the result page names.
func result(t *testing.T, bctx context.Context, steps ...chromedp.Action[chromedp.Void]) string {
	t.Helper()
	if err := chromedp.Do(bctx, append(steps, chromedp.WaitVisible(`#result`))...); err != nil {
		t.Fatal(err)
	}
	a, err := chromedp.Run(bctx, chromedp.AttributeValue(`#result`, "data-artifact-type"))
	if err != nil {
		t.Fatal(err)
	}
	return a.Value
}

// The binding page in a real browser: every invariant of seed 002 §9.1,
// and each resolution through its affordance lands on the record.
func TestBindPage(t *testing.T) {
	bctx, _ := browser(t)
	var envs struct {
		Vectors []struct {
			Name  string
			Input json.RawMessage
		}
	}
	b, _ := os.ReadFile("../binding/testdata/envelopes.json")
	json.Unmarshal(b, &envs)
	byName := map[string]json.RawMessage{}
	for _, v := range envs.Vectors {
		byName[v.Name] = v.Input
	}
	s := start(t, "127.0.0.1:0")
	nc, _ := nats.Connect(s.NATSURL(), s.Participant())
	defer nc.Close()
	ctx := context.Background()
	judge, _ := client.New(nc, "judge")
	ask := func(env json.RawMessage) string {
		id, err := judge.Open(ctx, client.Charter{Title: "Share with the booking service?"})
		if err != nil {
			t.Fatal(err)
		}
		claim, _, _ := judge.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Share the dates only."}})
		_, ack, err := judge.Publish(ctx, id, events.Draft{Type: events.TypeDecision,
			Payload:    events.Decision{Outcome: "Ask the principal what to share.", Status: events.Provisional, ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
			References: []events.Reference{{Target: claim.ID, Relation: events.Decides}},
			Extensions: map[string]any{binding.ExtEnvelope: env}})
		if err != nil {
			t.Fatal(err)
		}
		judge.WaitPosition(ctx, id, ack.Sequence)
		return id
	}
	page := func(id string) string { return "http://" + s.HTTPAddr() + "/bind/" + id }
	// The pages' templates sit among the explorer's assets, and are not
	// served as assets.
	for _, name := range []string{"bind.html", "bind-index.html", "refused.html"} {
		resp, err := http.Get("http://" + s.HTTPAddr() + "/assets/" + name)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("/assets/%s: %s", name, resp.Status)
		}
	}

	// Without the token the page shows the briefing, its options numbered
	// from 1, and asks to sign in before any form; a resolution posted
	// without the token is refused all the same.
	id := ask(byName["seed002-6.4"])
	if err := chromedp.Do(bctx, chromedp.Navigate(page(id)), chromedp.WaitVisible(`#sign-in`)); err != nil {
		t.Fatal(err)
	}
	forms, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('section form').length`))
	nums, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`[...document.querySelectorAll('.option .num')].map(e => e.textContent).join(' ')`))
	if forms != 0 || nums != "1. 2." {
		t.Fatalf("not signed in: %d forms, options numbered %q", forms, nums)
	}
	moments, _ := s.Queries.Bindings(ctx, id)
	if resp, err := http.PostForm(page(id)+"/"+moments[0].EnvelopeDigest, map[string][]string{"resolution": {"declined"}}); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a resolution without the token: %s", resp.Status)
	}
	// Signing in on the page: the token typed into its form; the browser
	// lands on the same page, the token gone from the address, the forms
	// there.
	if err := chromedp.Do(bctx, chromedp.SendKeys(`input[name=token]`, s.Credentials().HTTPToken), chromedp.Click(`#sign-in-submit`),
		chromedp.WaitVisible(`#decline`)); err != nil {
		t.Fatal(err)
	}
	if loc, _ := chromedp.Run(bctx, chromedp.Location()); loc != page(id) {
		t.Fatalf("after signing in on the page: %s", loc)
	}
	if n, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#sign-in').length`)); n != 0 {
		t.Fatal("signed in, the page still asks to sign in")
	}
	// An answer the engine refuses is not lost: the moment was resolved
	// meanwhile (declined through the API), and the page shows the answer
	// typed with the refusal.
	if err := chromedp.Do(bctx, chromedp.SendKeys(`textarea[name=answer]`, "Dates now, the passport later.")); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.HTTPAddr()+"/api/v1/deliberations/"+id+"/bindings/"+moments[0].EnvelopeDigest,
		strings.NewReader(`{"binding_moment_resolution":{"envelope_digest":"`+moments[0].EnvelopeDigest+`","resolution":"declined"}}`))
	req.Header.Set("Authorization", "Bearer "+s.Credentials().HTTPToken)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusCreated {
		t.Fatalf("decline through the API: %s", resp.Status)
	}
	if err := chromedp.Do(bctx, chromedp.Click(`#answer`), chromedp.WaitVisible(`#lost`)); err != nil {
		t.Fatal(err)
	}
	lost, _ := chromedp.Run(bctx, chromedp.Text(`#lost`))
	refusal, _ := chromedp.Run(bctx, chromedp.Text(`#error`))
	if !strings.Contains(lost, "Dates now, the passport later.") || !strings.Contains(refusal, "resolved") {
		t.Fatalf("the refused answer: %q, refusal %q", lost, refusal)
	}
	waitStatus(t, judge, id, "cancelled")
	id = ask(byName["seed002-6.4"])
	// Signing in: the address engine serve prints; the browser lands on
	// the index, the token gone from the address.
	if err := chromedp.Do(bctx, chromedp.Navigate(s.Credentials().BindURL()), chromedp.WaitVisible(`#waiting`)); err != nil {
		t.Fatal(err)
	}
	if loc, _ := chromedp.Run(bctx, chromedp.Location()); loc != "http://"+s.HTTPAddr()+"/bind" {
		t.Fatalf("after signing in: %s", loc)
	}
	if n, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-deliberation="`+id+`"] a').length`)); n != 1 {
		t.Fatal("the index does not list the waiting deliberation")
	}
	// A page of another origin on the same host (the cookie goes with
	// its requests: SameSite does not tell ports apart) submits a
	// resolution by itself: refused, and nothing is published.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		moments, _ := s.Queries.Bindings(ctx, id)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<form method="post" action="%s/%s"><input type="hidden" name="resolution" value="declined"></form><script>document.forms[0].submit()</script>`,
			page(id), moments[0].EnvelopeDigest)
	}))
	defer evil.Close()
	if err := chromedp.Do(bctx, chromedp.Navigate(evil.URL), chromedp.WaitVisible(`#refused`)); err != nil {
		t.Fatal(err)
	}
	msg, _ := chromedp.Run(bctx, chromedp.Text(`#refused`))
	if code, _ := chromedp.Run(bctx, chromedp.AttributeValue(`#refused`, "data-code")); code.Value != "forbidden" || !strings.Contains(msg, "cross-site request refused") {
		t.Fatalf("cross-site: %+v %q", code, msg)
	}
	if moments, _ := s.Queries.Bindings(ctx, id); moments[0].Status != "open" {
		t.Fatalf("a cross-site request resolved: %+v", moments[0])
	}

	// The §6.4 envelope: the invariants, then decline.
	if err := chromedp.Do(bctx, chromedp.Navigate(page(id)), chromedp.WaitVisible(`section[data-status="open"]`)); err != nil {
		t.Fatal(err)
	}
	inv, err := chromedp.Run(bctx, chromedp.Evaluate[invariants](`(() => {
			const q = s => document.querySelectorAll(s);
			const rec = document.querySelector('[data-recommended="true"]');
			const other = document.querySelector('.option:not(.recommended)');
			return {
				Slots: q('[data-slot]').length, Findings: q('[data-slot=findings] li').length, Recs: q('[data-slot=recommendations] li').length,
				Options: q('.option').length, Reasonings: [...q('.option .reasoning')].filter(e => e.offsetHeight > 0 && e.textContent.trim()).length,
				Recommended: q('[data-recommended="true"]').length,
				RecBorder: getComputedStyle(rec).borderTopWidth + ' ' + getComputedStyle(rec).backgroundColor,
				OtherBorder: getComputedStyle(other).borderTopWidth + ' ' + getComputedStyle(other).backgroundColor,
				Badge: rec.querySelector('.badge').textContent,
				Answer: !!document.getElementById('answer'), Question: !!document.getElementById('question'), Decline: !!document.getElementById('decline'),
			};
		})()`))
	if err != nil {
		t.Fatal(err)
	}
	if inv.Slots != 7 || inv.Findings != 3 || inv.Recs != 2 || inv.Options != 2 || inv.Reasonings != 2 || inv.Recommended != 1 ||
		inv.RecBorder == inv.OtherBorder || inv.Badge != "Recommended" || !inv.Answer || !inv.Question || !inv.Decline {
		t.Fatalf("invariants: %+v", inv)
	}
	if typ := result(t, bctx, chromedp.Click(`#decline`)); typ != "CLAIM" {
		t.Fatalf("decline recorded a %s", typ)
	}
	// The record's message is named by its ordinal, as the explorer and
	// engine watch name it: the open, the claim, the decision, this.
	if text, _ := chromedp.Run(bctx, chromedp.Text(`#result`)); !strings.Contains(text, "as message #4.") {
		t.Fatalf("the result: %q", text)
	}
	waitStatus(t, judge, id, "cancelled")

	// Dialogue off: no question-space hatch, decline still there; choose
	// the recommended option.
	id = ask(byName["hatch-off"])
	if err := chromedp.Do(bctx, chromedp.Navigate(page(id)), chromedp.WaitVisible(`section[data-status="open"]`)); err != nil {
		t.Fatal(err)
	}
	hasQuestion, _ := chromedp.Run(bctx, chromedp.Evaluate[bool](`!!document.getElementById('question')`))
	hasDecline, _ := chromedp.Run(bctx, chromedp.Evaluate[bool](`!!document.getElementById('decline')`))
	typ := result(t, bctx, chromedp.Click(`[data-recommended="true"]`))
	if hasQuestion || !hasDecline || typ != "DECISION" {
		t.Fatalf("question %v decline %v recorded %s", hasQuestion, hasDecline, typ)
	}
	waitStatus(t, judge, id, "completed")

	// The answer-space hatch.
	id = ask(byName["seed002-6.4"])
	typ = result(t, bctx, chromedp.Navigate(page(id)), chromedp.WaitVisible(`textarea[name=answer]`),
		chromedp.SendKeys(`textarea[name=answer]`, "Dates now, the passport only at check-in."), chromedp.Click(`#answer`))
	if typ != "CLAIM" {
		t.Fatalf("answer recorded a %s", typ)
	}

	// The question-space hatch.
	id = ask(byName["seed002-6.4"])
	if typ := result(t, bctx, chromedp.Navigate(page(id)), chromedp.WaitVisible(`#question`), chromedp.Click(`#question`)); typ != "OBJECTION" {
		t.Fatalf("question recorded a %s", typ)
	}
	v, _ := judge.State(ctx, id)
	if len(v.OpenBlockingObjections) != 1 {
		t.Fatalf("open blocking objections %v", v.OpenBlockingObjections)
	}

	// A malformed envelope: the plain view with a diagnostic, no decision.
	id = ask(byName["options-one"])
	if err := chromedp.Do(bctx, chromedp.Navigate(page(id)), chromedp.WaitVisible(`section.fallback`)); err != nil {
		t.Fatal(err)
	}
	diag, _ := chromedp.Run(bctx, chromedp.Text(`#diagnostic`))
	buttons, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('section button').length`))
	if buttons != 0 || !strings.Contains(diag, "envelope.options_count") {
		t.Fatalf("fallback: %d buttons, %q", buttons, diag)
	}
}

// After another participant's forged resolutions (a CLAIM carrying the
// resolution extension, and the principal's very option DECISION
// published as its own), the page in a real browser still offers the
// moment to its principal, with every form; the principal's click records
// the principal's DECISION, the page then shows the moment resolved by
// the principal, and the supervisor completes on it.
func TestBindPage_AfterForgedResolutions(t *testing.T) {
	bctx, _ := browser(t)
	var envs struct {
		Vectors []struct{ Input json.RawMessage }
	}
	b, _ := os.ReadFile("../binding/testdata/envelopes.json")
	json.Unmarshal(b, &envs)
	env, err := binding.ParseEnvelope(envs.Vectors[0].Input)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, "127.0.0.1:0")
	nc, _ := nats.Connect(s.NATSURL(), s.Participant())
	defer nc.Close()
	ctx := context.Background()
	judge, _ := client.New(nc, "judge")
	mallory, _ := client.New(nc, "mallory")
	id, err := judge.Open(ctx, client.Charter{Title: "Share with the booking service?"})
	if err != nil {
		t.Fatal(err)
	}
	claim, _, _ := judge.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Share the dates only."}})
	prov, _, err := judge.Publish(ctx, id, events.Draft{Type: events.TypeDecision,
		Payload:    events.Decision{Outcome: "Ask the principal what to share.", Status: events.Provisional, ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}},
		Extensions: map[string]any{binding.ExtEnvelope: envs.Vectors[0].Input}})
	if err != nil {
		t.Fatal(err)
	}
	option, _ := binding.Record(prov, env, &binding.Resolution{EnvelopeDigest: env.Digest, Kind: binding.KindOption, OptionIdx: env.Question.RecommendedIdx})
	for _, f := range []*events.Artifact{
		events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Share everything."},
			References: []events.Reference{{Target: prov.ID, Relation: events.Considers}},
			Extensions: map[string]any{binding.ExtResolution: map[string]any{"envelope_digest": env.Digest.String(), "resolution": "answer"}}}),
		option,
	} {
		ack, err := mallory.PublishArtifact(ctx, id, f)
		if err != nil {
			t.Fatal(err)
		}
		if o, err := mallory.WaitOutcome(ctx, id, ack.Sequence, f.ID.String()); err != nil || o.Code != "binding.not_principal" {
			t.Fatalf("mallory's %s: %+v %v", f.Type, o, err)
		}
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(s.Credentials().BindURL()), chromedp.WaitVisible(`[data-deliberation="`+id+`"]`)); err != nil {
		t.Fatal(err)
	}
	meta, _ := chromedp.Run(bctx, chromedp.Text(`[data-deliberation="`+id+`"] .meta`))
	if !strings.Contains(meta, "1 open") || !strings.Contains(meta, "for principal") {
		t.Fatalf("the index: %q", meta)
	}
	page := "http://" + s.HTTPAddr() + "/bind/" + id
	if err := chromedp.Do(bctx, chromedp.Navigate(page), chromedp.WaitVisible(`section[data-status="open"][data-principal="principal"]`)); err != nil {
		t.Fatal(err)
	}
	forms, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('section[data-status="open"] form').length`))
	if forms != len(env.Question.Options)+3 {
		t.Fatalf("%d forms on the page", forms)
	}
	if typ := result(t, bctx, chromedp.Click(`[data-recommended="true"]`)); typ != "DECISION" {
		t.Fatalf("the principal's click recorded a %s", typ)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(page), chromedp.WaitVisible(`section[data-status="resolved"][data-resolved-by="principal"]`)); err != nil {
		t.Fatal(err)
	}
	moments, _ := s.Queries.Bindings(ctx, id)
	if len(moments) != 1 || *moments[0].ResolvedIn != option.ID {
		t.Fatalf("%+v", moments)
	}
	waitStatus(t, judge, id, "completed")
}
