package web_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
)

// lying is a title that, drawn as it is, reads "Harmless status: completed":
// U+202E RIGHT-TO-LEFT OVERRIDE lays the rest out from right to left.
const lying = "Harmless \u202edetelpmoc :sutats"

// shownInOrder is a script that reports, for the element of a selector,
// whether its characters are laid out left to right in the order they
// stand in the text (each one's box starts right of the one before: no
// override or right-to-left run reorders them), and what the visible
// escapes in it say.
const shownInOrder = `((sel) => {
	const root = document.querySelector(sel);
	if (!root) return {Found: false};
	const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
	const xs = [];
	for (let n; (n = walk.nextNode()); ) {
		for (let i = 0; i < n.length; i++) {
			if (/\s/.test(n.data[i])) continue;
			const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
			const b = r.getBoundingClientRect();
			if (b.width > 0) xs.push(b.left);
		}
	}
	let ordered = xs.length > 1;
	for (let i = 1; i < xs.length; i++) if (xs[i] <= xs[i - 1]) ordered = false;
	const ctl = [...root.querySelectorAll('.ctl')];
	return {Found: true, Ordered: ordered, Text: root.textContent,
		Escapes: ctl.map(c => c.textContent), Visible: ctl.length > 0 && ctl.every(c => c.offsetWidth > 0 && getComputedStyle(c).visibility === 'visible')};
})`

type layout struct {
	Found, Ordered, Visible bool
	Text                    string
	Escapes                 []string
}

// Attack: a title, a statement (arriving on the live feed) and a binding
// moment's envelope carry U+202E and other invisible characters, so that
// the list reads "Harmless status: completed". In a real browser, the
// list's row, the deliberation's page, its live feed and the /bind pages
// (server-rendered) lay every character out in its own order, and show
// each control as a visible escape (\u202e), never as itself.
func TestExplorerBidiText(t *testing.T) {
	bctx, problems := browser(t)
	s := start(t, "127.0.0.1:0")
	base := "http://" + s.HTTPAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	m, _ := client.New(nc, "mallory")
	id, err := m.Open(ctx, client.Charter{Title: lying})
	if err != nil {
		t.Fatal(err)
	}
	check := func(where, sel string, escapes ...string) {
		t.Helper()
		l := eval[layout](t, bctx, shownInOrder+"("+strings.ReplaceAll(jsString(sel), "\n", "")+")")
		if !l.Found {
			t.Errorf("%s: no %s", where, sel)
			return
		}
		if !l.Ordered {
			t.Errorf("%s: the text is not laid out in its order: %q", where, l.Text)
		}
		for _, r := range l.Text {
			if r == 0x202e || r == 0x200b || r == 0x2066 || r == 0x2069 {
				t.Errorf("%s: %U is on the page as itself: %q", where, r, l.Text)
			}
		}
		if !l.Visible || strings.Join(l.Escapes, " ") != strings.Join(escapes, " ") {
			t.Errorf("%s: escapes %q (visible %v), want %q", where, l.Escapes, l.Visible, escapes)
		}
	}

	// The list.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(`tr[data-id="`+id+`"]`)); err != nil {
		t.Fatal(err)
	}
	check("the list", `tr[data-id="`+id+`"] td a`, `\u202e`)
	if row := eval[string](t, bctx, `document.querySelector('tr[data-id="`+id+`"]').innerText`); !strings.Contains(row, `Harmless \u202edetelpmoc :sutats`) || !strings.Contains(row, "open") {
		t.Errorf("the row: %q", row)
	}

	// The deliberation's page, then a statement on its live feed.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/deliberations/"+id), chromedp.WaitVisible(`#title`)); err != nil {
		t.Fatal(err)
	}
	check("the page's title", `#title`, `\u202e`)
	claim, _, err := m.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Adopt \u2066it\u2069 \u200bnow \u202eeulav"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.WaitVisible(`#timeline li[data-id="`+claim.ID.String()+`"]`), chromedp.WaitVisible(`#dag .node[data-id="`+claim.ID.String()+`"]`)); err != nil {
		t.Fatal(err)
	}
	check("the live feed's statement", `#timeline li[data-id="`+claim.ID.String()+`"] .text`, `\u2066`, `\u2069`, `\u200b`, `\u202e`)
	if txt := eval[string](t, bctx, `[...document.querySelectorAll('#dag .node[data-id="`+claim.ID.String()+`"] tspan')].map(t => t.textContent).join(' ')`); strings.ContainsAny(txt, "\u2066\u2069\u200b\u202e") || !strings.Contains(txt, `\u202e`) {
		t.Errorf("the graph's node: %q", txt)
	}

	// /bind: a binding moment whose envelope lies too.
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
	env["synopsis"] = "Recommended: \u202eeno siht esoohc"
	q := env["question"].(map[string]any)
	q["options"].([]any)[1].(map[string]any)["label"] = "Option \u202e]dednemmoceR["
	dec, _, err := m.Publish(ctx, id, events.Draft{Type: events.TypeDecision,
		Payload:    events.Decision{Outcome: "Ask.", Status: events.Provisional, ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}},
		Extensions: map[string]any{binding.ExtEnvelope: env}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := binding.EnvelopeOf(dec); err != nil {
		t.Fatalf("the envelope: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if moments, err := s.Queries.Bindings(ctx, id); err == nil && len(moments) == 1 && moments[0].Status == "open" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no open binding moment")
		}
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/bind?token="+s.Credentials().HTTPToken), chromedp.WaitVisible(`li[data-deliberation="`+id+`"]`)); err != nil {
		t.Fatal(err)
	}
	check("the /bind list", `li[data-deliberation="`+id+`"] a`, `\u202e`)
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/bind/"+id), chromedp.WaitVisible(`[data-slot="synopsis"]`)); err != nil {
		t.Fatal(err)
	}
	check("the /bind page's title", `h1`, `\u202e`)
	check("the /bind page's synopsis", `[data-slot="synopsis"]`, `\u202e`)
	check("the /bind page's option", `[data-option="1"] > bdi`, `\u202e`)
	if p := problems(); len(p) > 0 {
		t.Errorf("the pages had problems:\n%s", strings.Join(p, "\n"))
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
