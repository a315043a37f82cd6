package web_test

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/wire"
)

// hostile is participants' text written to run in the explorer: markup
// that closes attributes, elements and the SVG, script, event handlers,
// javascript: links and template syntax. Each sets window.__pwned if it
// runs.
const hostile = `"'><img src=x onerror="window.__pwned='img'"><script>window.__pwned='script'</script>` +
	`</text></svg><svg onload="window.__pwned='svg'"></svg><a href="javascript:window.__pwned='href'">link</a>{{.Title}}`

// A deliberation whose every text a participant chooses is hostile: the
// charter's title, statements, evidence, a decision's outcome,
// rationale and unresolved issue, extension keys and values, a refused
// message, and a binding moment's envelope. In a real browser, on the
// list, the deliberation's page with every artifact inspected, and
// /bind: nothing runs (no flag set, no element of theirs), and the text is shown as
// text.
func TestExplorerHostileText(t *testing.T) {
	bctx, problems := browser(t)
	s := start(t, "127.0.0.1:0")
	base := "http://" + s.HTTPAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	m, _ := client.New(nc, "mallory")
	id, err := m.Open(ctx, client.Charter{Title: "T " + hostile})
	if err != nil {
		t.Fatal(err)
	}
	must := func(a *events.Artifact, _ *jetstream.PubAck, err error) *events.Artifact {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	ext := map[string]any{"x." + hostile: hostile, "javascript:window.__pwned='key'": map[string]any{"href": "javascript:window.__pwned='v'"}}
	claim := must(m.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "C " + hostile}, Extensions: ext}))
	ev := must(m.Publish(ctx, id, events.Draft{Type: events.TypeEvidence, Payload: events.Evidence{Content: "E " + hostile, ProvenanceClass: events.TraceVerifiedObservation},
		References: []events.Reference{{Target: claim.ID, Relation: events.Supports}}}))
	obj := must(m.Publish(ctx, id, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "O " + hostile, Blocking: true},
		References: []events.Reference{{Target: claim.ID, Relation: events.ObjectsTo}}}))
	js, _ := jetstream.New(nc)
	if _, err := js.Publish(ctx, wire.ArtifactSubject(id, "mallory"), []byte(`{"artifact_type":"CLAIM","payload":{"statement":"R `+strings.ReplaceAll(hostile, `"`, `\"`)+`"}}`)); err != nil {
		t.Fatal(err)
	}

	var envs struct {
		Vectors []struct {
			Name  string
			Input map[string]any
		}
	}
	b, err := os.ReadFile("../binding/testdata/envelopes.json")
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(b, &envs)
	var env map[string]any
	for _, v := range envs.Vectors {
		if v.Name == "seed002-6.4" {
			env = v.Input
		}
	}
	env["synopsis"] = "S " + hostile
	env["findings"] = []any{"F " + hostile}
	q := env["question"].(map[string]any)
	q["stem"] = "Q " + hostile
	opts := q["options"].([]any)
	opts[0].(map[string]any)["label"] = "L " + hostile
	opts[0].(map[string]any)["reasoning"] = "W " + hostile
	dec := must(m.Publish(ctx, id, events.Draft{Type: events.TypeDecision,
		Payload: events.Decision{Outcome: "D " + hostile, Status: events.Provisional,
			ObjectionDispositions: []events.Disposition{{Objection: obj.ID, Disposition: events.Addressed, Rationale: "A " + hostile}},
			UnresolvedIssues:      []events.Issue{{Description: "U " + hostile}}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}, {Target: obj.ID, Relation: events.Considers}},
		Extensions: map[string]any{binding.ExtEnvelope: env}}))
	if _, err := binding.EnvelopeOf(dec); err != nil {
		t.Fatalf("the envelope: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		moments, err := s.Queries.Bindings(ctx, id)
		if err == nil && len(moments) == 1 && moments[0].Status == "open" {
			break
		}
		if time.Now().After(deadline) {
			v, _ := m.State(ctx, id)
			rl, _ := m.RejectionPage(ctx, id, client.ListOptions{}, "")
			t.Fatalf("the binding moment: %+v %v; state %+v; rejections %+v", moments, err, v, rl)
		}
	}

	pwned := func(where string) {
		t.Helper()
		if v := eval[string](t, bctx, `String(window.__pwned)`); v != "undefined" {
			t.Errorf("%s: the participants' text ran (window.__pwned = %s)", where, v)
		}
		if n := eval[int](t, bctx, `document.querySelectorAll('main img, main script, #app svg svg, [onerror], [onload], a[href^="javascript:"]').length`); n > 0 {
			t.Errorf("%s: %d elements of the participants' making", where, n)
		}
	}
	// The list, searched with the hostile text too.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(`tr[data-id="`+id+`"]`)); err != nil {
		t.Fatal(err)
	}
	if row := eval[string](t, bctx, `document.querySelector('tr[data-id="`+id+`"]').innerText`); !strings.Contains(row, "T "+hostile) {
		t.Errorf("the list's row does not show the title as text: %q", row)
	}
	pwned("the list")
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/?q="+url.QueryEscape(hostile)), chromedp.WaitReady(`#app`), chromedp.Sleep(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	pwned("the list searched")

	// The deliberation's page, every artifact inspected.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/deliberations/"+id), chromedp.WaitVisible(`#dag .node[data-id="`+dec.ID.String()+`"]`)); err != nil {
		t.Fatal(err)
	}
	body := eval[string](t, bctx, `document.body.innerText`)
	for _, p := range []string{"T ", "O ", "D ", "A ", "U "} {
		if !strings.Contains(body, p+hostile) {
			t.Errorf("the page does not show %q as text", p+hostile)
		}
	}
	for _, aid := range []string{claim.ID.String(), ev.ID.String(), obj.ID.String(), dec.ID.String()} {
		eval[bool](t, bctx, `document.querySelector('#dag .node[data-id="`+aid+`"]').dispatchEvent(new MouseEvent('click', {bubbles: true}))`)
		if err := chromedp.Do(bctx, chromedp.Sleep(200*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		pwned("the inspector of " + aid)
	}
	if insp := eval[string](t, bctx, `document.querySelector('#inspector').innerText`); !strings.Contains(insp, "D "+hostile) {
		t.Errorf("the inspector does not show the decision as text: %q", insp)
	}
	// a link the inspector makes of what it shows goes nowhere but the engine
	hrefs := eval[[]string](t, bctx, `[...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))`)
	for _, h := range hrefs {
		if !strings.HasPrefix(h, "/") && !strings.HasPrefix(h, "#") {
			t.Errorf("a link to %q", h)
		}
	}
	pwned("the deliberation's page")
	// An address with markup in place of the id.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/deliberations/"+url.PathEscape(hostile)), chromedp.WaitReady(`#app`), chromedp.Sleep(500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	pwned("a hostile address")

	// /bind: the envelope's words as text.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/bind/"+id), chromedp.WaitReady(`body`)); err != nil {
		t.Fatal(err)
	}
	bind := eval[string](t, bctx, `document.body.innerText`)
	for _, p := range []string{"S ", "Q ", "L ", "W ", "T "} {
		if !strings.Contains(bind, p+hostile) {
			t.Errorf("/bind does not show %q as text:\n%s", p+hostile, bind)
		}
	}
	if v := eval[string](t, bctx, `String(window.__pwned)`); v != "undefined" {
		t.Errorf("/bind: the participants' text ran (%s)", v)
	}
	if n := eval[int](t, bctx, `document.querySelectorAll('body img, body script, [onerror], [onload], a[href^="javascript:"]').length`); n > 0 {
		t.Errorf("/bind: %d elements of the participants' making", n)
	}
	var real []string
	for _, p := range problems() {
		// the hostile address is a 404 of the API, which the page reports
		if !strings.Contains(p, "Not Found") || !strings.Contains(p, "__pwned") {
			real = append(real, p)
		}
	}
	if len(real) > 0 {
		t.Errorf("the pages had problems:\n%s", strings.Join(real, "\n"))
	}
}
