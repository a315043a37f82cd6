package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

func start(t *testing.T, http string) *service.Service {
	t.Helper()
	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: http})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// record is a deliberation published through the client: a claim, its
// evidence, a blocking objection, a revision answering it, a final
// decision that disposes of the objection (the supervisor completes it),
// and one message the engine refuses.
type record struct {
	id                                             string
	claim, evidence, objection, revision, decision *events.Artifact
}

func publish(t *testing.T, s *service.Service) record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	arch, _ := client.New(nc, "architect")
	critic, _ := client.New(nc, "critic")
	judge, _ := client.New(nc, "judge")
	var r record
	if r.id, err = arch.Open(ctx, client.Charter{Title: "Adopt a read-through cache?"}); err != nil {
		t.Fatal(err)
	}
	must := func(a *events.Artifact, _ *jetstream.PubAck, err error) *events.Artifact {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	r.claim = must(arch.Publish(ctx, r.id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "A read-through cache halves p99 latency."}}))
	r.evidence = must(arch.Publish(ctx, r.id, events.Draft{Type: events.TypeEvidence,
		Payload:    events.Evidence{Content: "p99 fell from 80 ms to 41 ms over 10,000 requests.", ProvenanceClass: events.TraceVerifiedObservation},
		References: []events.Reference{{Target: r.claim.ID, Relation: events.Supports}}}))
	r.objection = must(critic.Publish(ctx, r.id, events.Draft{Type: events.TypeObjection,
		Payload:    events.Objection{Statement: "Only one workload was measured.", Blocking: true},
		References: []events.Reference{{Target: r.claim.ID, Relation: events.ObjectsTo}}}))
	r.revision = must(arch.Publish(ctx, r.id, events.Draft{Type: events.TypeRevision,
		Payload:    events.RevisionPayload{Statement: "The cache halves p99 on the read-heavy and the mixed workloads."},
		References: []events.Reference{{Target: r.claim.ID, Relation: events.Revises}, {Target: r.objection.ID, Relation: events.Considers}}}))
	// A message the engine refuses: not JSON.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, wire.ArtifactSubject(r.id, "critic"), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	var ack *jetstream.PubAck
	r.decision, ack, err = judge.Publish(ctx, r.id, events.Draft{Type: events.TypeDecision,
		Payload: events.Decision{Outcome: "Adopt the cache as revised.", Status: events.Final,
			ObjectionDispositions: []events.Disposition{{Objection: r.objection.ID, Disposition: events.Addressed, Rationale: "The revision measured the mixed workload."}},
			UnresolvedIssues:      []events.Issue{}},
		References: []events.Reference{{Target: r.revision.ID, Relation: events.Decides}, {Target: r.objection.ID, Relation: events.Considers}}})
	if err != nil {
		t.Fatal(err)
	}
	judge.WaitPosition(ctx, r.id, ack.Sequence)
	waitStatus(t, judge, r.id, "completed")
	return r
}

func waitStatus(t *testing.T, c *client.Client, id, want string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		v, _ := c.State(context.Background(), id)
		if string(v.Status) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %s, want %s", v.Status, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// browser returns a headless Chromium context (skipping without one,
// failing instead when PARLEY_REQUIRE_BROWSER is set, as CI sets it) and
// the page's problems: console errors, uncaught exceptions, failed
// requests and answers of 400 or more.
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("PARLEY_REQUIRE_BROWSER") != "" {
			t.Fatal("chromium is required and not installed")
		}
		t.Skip("SKIPPED: no chromium (apt-get install chromium); the explorer is not tested")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Flag("headless", true), chromedp.WindowSize(1400, 1000))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	ctx, cancel3 := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancel3)
	var mu sync.Mutex
	var problems []string
	note := func(s string) { mu.Lock(); problems = append(problems, s); mu.Unlock() }
	err = chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value))
				}
				note("console " + string(e.Type) + ": " + strings.Join(args, " "))
			}
		case *cdplog.EventEntryAdded:
			// The browser's own: a refused script or style, a failed load.
			if e.Entry.Level == cdplog.EntryLevelError || e.Entry.Level == cdplog.EntryLevelWarning {
				note("browser " + string(e.Entry.Level) + ": " + e.Entry.Text + " " + e.Entry.URL)
			}
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			note(fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber+1, msg))
		case *network.EventLoadingFailed:
			if !e.Canceled {
				note("request failed: " + e.ErrorText)
			}
		case *network.EventResponseReceived:
			if e.Response.Status >= 400 {
				note("answer " + e.Response.StatusText + " " + e.Response.URL)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), problems...) }
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

// The explorer in a real browser: the list, a deliberation's page with
// what was claimed, objected to, revised and decided, the inspector, and
// a second deliberation updating live, without reload; no console error
// and no failed request throughout.
func TestExplorer(t *testing.T) {
	bctx, problems := browser(t)
	s := start(t, "127.0.0.1:0")
	r := publish(t, s)
	base := "http://" + s.HTTPAddr()

	// The list: the deliberation with its status, counts and participants.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(`tr[data-id="`+r.id+`"]`)); err != nil {
		t.Fatal(err)
	}
	row := eval[string](t, bctx, `document.querySelector('tr[data-id="`+r.id+`"]').innerText`)
	for _, want := range []string{"Adopt a read-through cache?", "completed", "6 artifacts", "1 objection", "architect 3", "critic 1", "judge 1"} {
		if !strings.Contains(row, want) {
			t.Errorf("the list's row lacks %q: %q", want, row)
		}
	}
	// Search and filter: nothing matches a foreign word, nor status open.
	if err := chromedp.Do(bctx, chromedp.SendKeys(`#q`, "zebra"), chromedp.Click(`#filters button`), chromedp.WaitVisible(`#none`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/?q=CACHE&status=completed"), chromedp.WaitVisible(`tr[data-id="`+r.id+`"]`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/?status=open"), chromedp.WaitVisible(`#none`)); err != nil {
		t.Fatal(err)
	}

	// The deliberation's page.
	page := base + "/deliberations/" + r.id
	if err := chromedp.Do(bctx, chromedp.Navigate(page), chromedp.WaitVisible(`#final-closure`), chromedp.WaitVisible(`#dag .node`)); err != nil {
		t.Fatal(err)
	}
	type pageFacts struct {
		Title, Status, Banner, Objection, ObjState, Decision, Closure, Rejection, Live string
		Nodes, Edges, Relations                                                        int
		TypesOnNodes                                                                   []string
	}
	f := eval[pageFacts](t, bctx, `(() => {
		const q = s => document.querySelector(s);
		return {
			Title: q('#title').textContent, Status: q('#status').textContent, Banner: q('#outcome').innerText,
			Objection: q('#objections tr[data-id="`+r.objection.ID.String()+`"]').innerText,
			ObjState: q('#dag .node[data-id="`+r.objection.ID.String()+`"]').dataset.state,
			Decision: q('#decisions .card').innerText,
			Closure: q('#final-closure').dataset.ok,
			Rejection: (q('#rejections tr[data-code]') || {}).innerText || '',
			Live: q('#live').dataset.state,
			Nodes: document.querySelectorAll('#dag .node').length,
			Edges: document.querySelectorAll('#dag path.edge').length,
			Relations: new Set([...document.querySelectorAll('#dag path.edge')].map(p => p.getAttribute('class'))).size,
			TypesOnNodes: [...document.querySelectorAll('#dag .node text.hd')].map(t => t.textContent.split(' ')[1]),
		};
	})()`)
	if f.Title != "Adopt a read-through cache?" || f.Status != "completed" || f.Closure != "true" {
		t.Errorf("head: %+v", f)
	}
	if !strings.Contains(f.Banner, "Ended: completed") || !strings.Contains(f.Banner, "closure verified") {
		t.Errorf("banner: %q", f.Banner)
	}
	if !strings.Contains(f.Objection, "Only one workload was measured.") || !strings.Contains(f.Objection, "DISPOSED · ADDRESSED") ||
		!strings.Contains(f.Objection, "The revision measured the mixed workload.") || f.ObjState != "disposed" {
		t.Errorf("objection: %q (node %q)", f.Objection, f.ObjState)
	}
	if !strings.Contains(f.Decision, "FINAL DECISION") || !strings.Contains(f.Decision, "Adopt the cache as revised.") ||
		!strings.Contains(f.Decision, "Closure verifies at #") || !strings.Contains(f.Decision, "addressed") {
		t.Errorf("decision: %q", f.Decision)
	}
	if !strings.Contains(f.Rejection, "critic") || !strings.HasPrefix(f.Rejection, "#6") || !strings.Contains(f.Rejection, "json.syntax") || !strings.Contains(f.Rejection, "malformed_input") {
		t.Errorf("rejection: %q", f.Rejection)
	}
	// 6 artifacts (the supervisor's TERMINATION among them), 7 references
	// (evidence 1, objection 1, revision 2, decision 2, termination 1), of
	// 5 relations.
	if f.Nodes != 6 || f.Edges != 7 || f.Relations != 5 || f.Live != "off" {
		t.Errorf("graph: %d nodes, %d edges, %d relations, live %q", f.Nodes, f.Edges, f.Relations, f.Live)
	}
	if !strings.Contains(strings.Join(f.TypesOnNodes, " "), "TERMINATION") {
		t.Errorf("node types: %v", f.TypesOnNodes)
	}

	// The inspector: the objection's payload, references both ways, and
	// its canonical bytes as the API serves them.
	if err := chromedp.Do(bctx, chromedp.Click(`#dag .node[data-id="`+r.objection.ID.String()+`"]`), chromedp.WaitVisible(`#insp-bytes`)); err != nil {
		t.Fatal(err)
	}
	type insp struct{ ID, Bytes, Out, In, Payload string }
	in := eval[insp](t, bctx, `({ID: document.querySelector('#insp-id').textContent, Bytes: document.querySelector('#insp-bytes').textContent,
		Out: document.querySelector('#insp-out').innerText, In: document.querySelector('#insp-in').innerText, Payload: document.querySelector('#insp-payload').innerText})`)
	resp, err := http.Get(base + "/api/v1/deliberations/" + r.id + "/artifacts/" + r.objection.ID.String())
	if err != nil {
		t.Fatal(err)
	}
	canonical, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if in.ID != r.objection.ID.String() || in.Bytes != string(canonical) {
		t.Errorf("inspector: id %s, bytes %q, want %q", in.ID, in.Bytes, canonical)
	}
	if !strings.Contains(in.Out, "objects-to") || !strings.Contains(in.Out, "CLAIM") || !strings.Contains(in.In, "REVISION") || !strings.Contains(in.In, "DECISION") ||
		!strings.Contains(in.Payload, "Only one workload was measured.") || !strings.Contains(in.Payload, "true") {
		t.Errorf("inspector: %+v", in)
	}

	// A link to an artifact opens the page with it in the inspector.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/"), chromedp.Navigate(page+"#"+r.evidence.ID.String()), chromedp.WaitVisible(`#insp-id`)); err != nil {
		t.Fatal(err)
	}
	if got := eval[string](t, bctx, `document.querySelector('#insp-id').textContent`); got != r.evidence.ID.String() {
		t.Errorf("linked artifact: %s", got)
	}

	// Live: a second deliberation's page, then an objection published;
	// it arrives without reload.
	nc, _ := nats.Connect(s.NATSURL(), s.Participant())
	defer nc.Close()
	ctx := context.Background()
	alice, _ := client.New(nc, "alice")
	bob, _ := client.New(nc, "bob")
	id2, err := alice.Open(ctx, client.Charter{Title: "Second deliberation"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if resp, err := http.Get(base + "/api/v1/deliberations/" + id2); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the second deliberation is not projected")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/deliberations/"+id2), chromedp.WaitVisible(`#dag text.empty`)); err != nil {
		t.Fatal(err)
	}
	if live := eval[string](t, bctx, `window.marker = 'same page'; document.querySelector('#live').dataset.state`); live != "on" {
		t.Errorf("live: %q", live)
	}
	claim, _, err := alice.Publish(ctx, id2, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Ship on Friday."}})
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.WaitVisible(`#dag .node[data-id="`+claim.ID.String()+`"]`)); err != nil {
		t.Fatal(err)
	}
	obj, _, err := bob.Publish(ctx, id2, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "Fridays break on-call.", Blocking: true},
		References: []events.Reference{{Target: claim.ID, Relation: events.ObjectsTo}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.WaitVisible(`#dag .node[data-id="`+obj.ID.String()+`"]`)); err != nil {
		t.Fatal(err)
	}
	type liveFacts struct{ Marker, State, Banner, Timeline, Participants string }
	lf := eval[liveFacts](t, bctx, `({Marker: window.marker, State: document.querySelector('#dag .node[data-id="`+obj.ID.String()+`"]').dataset.state,
		Banner: document.querySelector('#outcome').innerText, Timeline: document.querySelector('#timeline').innerText,
		Participants: document.querySelector('#participants').innerText})`)
	if lf.Marker != "same page" || lf.State != "open" || !strings.Contains(lf.Banner, "1 blocking objection open") || !strings.Contains(lf.Timeline, "Fridays break on-call.") ||
		!strings.Contains(lf.Participants, "alice · 1") || !strings.Contains(lf.Participants, "bob · 1") {
		t.Errorf("live update: %+v", lf)
	}

	// A final decision that leaves a blocking objection open: its closure
	// does not verify, and the supervisor's FAILURE says so.
	id3, _ := alice.Open(ctx, client.Charter{Title: "Decided too soon"})
	c3, _, _ := alice.Publish(ctx, id3, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Rewrite it in a weekend."}})
	o3, _, _ := bob.Publish(ctx, id3, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "Nobody has estimated it.", Blocking: true},
		References: []events.Reference{{Target: c3.ID, Relation: events.ObjectsTo}}})
	if _, _, err := alice.Publish(ctx, id3, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "Rewrite it.", Status: events.Final,
		ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}}, References: []events.Reference{{Target: c3.ID, Relation: events.Decides}}}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/deliberations/"+id3), chromedp.WaitVisible(`#failures`), chromedp.WaitVisible(`#final-closure`), chromedp.WaitVisible(`#dag .node.t-FAILURE`)); err != nil {
		t.Fatal(err)
	}
	type failFacts struct{ Closure, Failures, Decision, ObjState string }
	ff := eval[failFacts](t, bctx, `({Closure: document.querySelector('#final-closure').dataset.ok, Failures: document.querySelector('#failures').innerText,
		Decision: document.querySelector('#decisions .card').innerText, ObjState: document.querySelector('#dag .node[data-id="`+o3.ID.String()+`"]').dataset.state})`)
	if ff.Closure != "false" || !strings.Contains(ff.Failures, "1 FAILURE") || !strings.Contains(ff.Failures, "_supervisor") ||
		!strings.Contains(ff.Decision, "Closure does not verify") || !strings.Contains(ff.Decision, "closure.") || ff.ObjState != "open" {
		t.Errorf("a decision that does not verify: %+v", ff)
	}

	// A binding moment: listed with its status and a link to /bind.
	var envs struct {
		Vectors []struct {
			Name  string
			Input json.RawMessage
		}
	}
	b, err := os.ReadFile("../binding/testdata/envelopes.json")
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(b, &envs)
	var env json.RawMessage
	for _, v := range envs.Vectors {
		if v.Name == "seed002-6.4" {
			env = v.Input
		}
	}
	id4, _ := alice.Open(ctx, client.Charter{Title: "Share with the booking service?"})
	c4, _, _ := alice.Publish(ctx, id4, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Share the dates only."}})
	if _, _, err := alice.Publish(ctx, id4, events.Draft{Type: events.TypeDecision,
		Payload:    events.Decision{Outcome: "Ask the principal what to share.", Status: events.Provisional, ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: c4.ID, Relation: events.Decides}},
		Extensions: map[string]any{binding.ExtEnvelope: env}}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/deliberations/"+id4), chromedp.WaitVisible(`#bindings li[data-status="open"] a.bindlink`)); err != nil {
		t.Fatal(err)
	}
	if href := eval[string](t, bctx, `document.querySelector('#bindings a.bindlink').getAttribute('href')`); href != "/bind/"+id4 {
		t.Errorf("binding link %q", href)
	}
	// Resolved (the principal chooses the first option): the page says so,
	// live.
	moments, err := s.Queries.Bindings(ctx, id4)
	if err != nil || len(moments) != 1 {
		t.Fatal(moments, err)
	}
	req, _ := http.NewRequest("POST", base+"/api/v1/deliberations/"+id4+"/bindings/"+moments[0].EnvelopeDigest,
		strings.NewReader(`{"binding_moment_resolution":{"envelope_digest":"`+moments[0].EnvelopeDigest+`","resolution":"option","option_idx":0}}`))
	req.Header.Set("Authorization", "Bearer "+s.Credentials().HTTPToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("resolve: %d", resp.StatusCode)
	}
	if err := chromedp.Do(bctx, chromedp.WaitVisible(`#bindings li[data-status="resolved"]`)); err != nil {
		t.Fatal(err)
	}
	if txt := eval[string](t, bctx, `document.querySelector('#bindings li').innerText`); !strings.Contains(txt, "chose option 1") || !strings.Contains(txt, "principal") {
		t.Errorf("resolved: %q", txt)
	}

	if p := problems(); len(p) > 0 {
		t.Errorf("the pages had problems:\n%s", strings.Join(p, "\n"))
	}
}

// With reads protected (the API listens beyond loopback), the explorer
// asks for the token, keeps it in the engine's cookie, and then works,
// its live feed included.
func TestExplorerSignIn(t *testing.T) {
	bctx, problems := browser(t)
	s := start(t, "0.0.0.0:0")
	r := publish(t, s)
	_, port, _ := strings.Cut(s.HTTPAddr(), "]:")
	if port == "" {
		_, port, _ = strings.Cut(s.HTTPAddr(), ":")
	}
	base := "http://127.0.0.1:" + port
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("/ without the token: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/deliberations/"+r.id), chromedp.WaitVisible(`#signin`)); err != nil {
		t.Fatal(err)
	}
	refused := len(problems()) // the page's own 401
	if err := chromedp.Do(bctx, chromedp.SendKeys(`#signin input[name=token]`, s.Credentials().HTTPToken), chromedp.Submit(`#signin`),
		chromedp.WaitVisible(`#final-closure`), chromedp.WaitVisible(`#dag .node`)); err != nil {
		t.Fatal(err)
	}
	if p := problems()[refused:]; refused == 0 || len(p) > 0 {
		t.Errorf("%d problems before signing in; after: %v", refused, p)
	}
	loc, _ := chromedp.Run(bctx, chromedp.Location())
	if loc != base+"/deliberations/"+r.id {
		t.Errorf("after signing in: %s", loc)
	}
	if n := eval[int](t, bctx, `document.querySelectorAll('#dag .node').length`); n != 6 {
		t.Errorf("%d nodes", n)
	}
}

// sseEvent is one server-sent event.
type sseEvent struct{ Name, ID, Data string }

// readEvents reads events from the feed until stop says so.
func readEvents(t *testing.T, url string, header http.Header, stop func(sseEvent) bool) []sseEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out []sseEvent
	var ev sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Name != "" {
				out = append(out, ev)
				if stop(ev) {
					return out
				}
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			ev.Name = line[7:]
		case strings.HasPrefix(line, "id: "):
			ev.ID = line[4:]
		case strings.HasPrefix(line, "data: "):
			ev.Data = line[6:]
		}
	}
	t.Fatalf("the feed ended: %v (%d events)", sc.Err(), len(out))
	return nil
}

// The live feed: everything, then ready; resumed from Last-Event-ID it
// sends only what came after; ?after= starts from a stream position; it
// ends with the deliberation; bad input is refused with a code.
func TestLiveFeed(t *testing.T) {
	s := start(t, "127.0.0.1:0")
	base := "http://" + s.HTTPAddr()
	nc, _ := nats.Connect(s.NATSURL(), s.Participant())
	defer nc.Close()
	ctx := context.Background()
	alice, _ := client.New(nc, "alice")
	id, _ := alice.Open(ctx, client.Charter{Title: "feed"})
	claim, ack, _ := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "one"}})
	alice.WaitPosition(ctx, id, ack.Sequence)
	url := base + "/api/v1/deliberations/" + id + "/events"

	first := readEvents(t, url, nil, func(e sseEvent) bool { return e.Name == "ready" })
	var arts []string
	last := ""
	for _, e := range first {
		if e.Name == "artifacts" {
			var list []struct {
				ArtifactID string `json:"artifact_id"`
				Ordinal    int    `json:"ordinal"`
				Canonical  string `json:"canonical"`
			}
			json.Unmarshal([]byte(e.Data), &list)
			for _, a := range list {
				arts = append(arts, a.ArtifactID)
				if a.Ordinal != 2 || !strings.Contains(a.Canonical, `"statement":"one"`) {
					t.Errorf("artifact: %s", e.Data)
				}
			}
		}
		if e.ID != "" {
			last = e.ID
		}
	}
	if len(arts) != 1 || arts[0] != claim.ID.String() || last == "" {
		t.Fatalf("first read: %v, last id %q", first, last)
	}

	// Resume: a second claim arrives while away.
	second, ack, _ := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "two"}})
	alice.WaitPosition(ctx, id, ack.Sequence)
	resumed := readEvents(t, url, http.Header{"Last-Event-Id": {last}}, func(e sseEvent) bool { return e.Name == "ready" })
	var got []string
	for _, e := range resumed {
		if e.Name == "artifacts" {
			got = append(got, e.Data)
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], second.ID.String()) || strings.Contains(got[0], claim.ID.String()) {
		t.Fatalf("resumed: %v", resumed)
	}
	// ?after= a stream position: the claim's position gives the second.
	after := readEvents(t, url+"?after="+itoa(first, claim.ID.String()), nil, func(e sseEvent) bool { return e.Name == "ready" })
	if n := count(after, "artifacts"); n != 1 || !strings.Contains(first1(after, "artifacts"), second.ID.String()) || strings.Contains(first1(after, "artifacts"), claim.ID.String()) {
		t.Fatalf("after: %v", after)
	}

	// Live: an artifact published while the feed is open arrives; then
	// the deliberation is cancelled and the feed ends.
	feeds := s.Explorer()
	eventually.True(t, 10*time.Second, "the feeds read above close", func() bool { return feeds.FeedStats().Open == 0 })
	go func() {
		if !eventually.Within(10*time.Second, func() bool { return feeds.FeedStats().Open == 1 }) {
			t.Error("the live feed never opened")
		}
		alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "three"}})
		alice.Cancel(ctx, id, "done")
	}()
	rest := readEvents(t, url, http.Header{"Last-Event-Id": {last}}, func(e sseEvent) bool { return e.Name == "end" })
	if n := strings.Count(all(rest, "artifacts"), `"artifact_id"`); n != 2 {
		t.Errorf("live: %d artifacts in %v", n, rest)
	}
	if e := rest[len(rest)-1]; !strings.Contains(e.Data, `"status":"cancelled"`) {
		t.Errorf("end: %v", e)
	}

	for _, c := range []struct {
		url, lastID string
		status      int
		code        string
	}{
		{base + "/api/v1/deliberations/nope/events", "", 404, "not_found"},
		{url, "garbage", 400, "bad_request"},
		{url + "?after=x", "", 400, "bad_request"},
	} {
		req, _ := http.NewRequest("GET", c.url, nil)
		if c.lastID != "" {
			req.Header.Set("Last-Event-ID", c.lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Code string }
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != c.status || e.Code != c.code {
			t.Errorf("%s %q: %d %q", c.url, c.lastID, resp.StatusCode, e.Code)
		}
	}
}

// A backlog of several batches arrives whole, once each, in stream order,
// and what is published after it follows; an artifact that references one
// not yet published is refused and never sent.
func TestLiveFeedBacklog(t *testing.T) {
	s := start(t, "127.0.0.1:0")
	nc, _ := nats.Connect(s.NATSURL(), s.Participant())
	defer nc.Close()
	ctx := context.Background()
	alice, _ := client.New(nc, "alice")
	id, _ := alice.Open(ctx, client.Charter{Title: "backlog"})
	const n = 700
	var last uint64
	var futures []jetstream.PubAckFuture
	for i := range n {
		a := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprintf("claim %d", i)}})
		f, err := alice.PublishArtifactAsync(id, a)
		if err != nil {
			t.Fatal(err)
		}
		futures = append(futures, f)
	}
	// y is referenced by x before it is published: x is refused.
	y := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "y"}})
	x := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "x objects to y"}, References: []events.Reference{{Target: y.ID, Relation: events.ObjectsTo}}})
	if _, err := alice.PublishArtifact(ctx, id, x); err != nil {
		t.Fatal(err)
	}
	z, ack, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "z"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range futures {
		<-f.Ok()
	}
	last = ack.Sequence
	alice.WaitPosition(ctx, id, last)

	url := "http://" + s.HTTPAddr() + "/api/v1/deliberations/" + id + "/events"
	seen := map[string]int{}
	var positions []uint64
	published := false
	evs := readEvents(t, url, nil, func(e sseEvent) bool {
		if e.Name == "artifacts" {
			var list []struct {
				ArtifactID string `json:"artifact_id"`
				Position   uint64 `json:"position"`
			}
			json.Unmarshal([]byte(e.Data), &list)
			for _, a := range list {
				seen[a.ArtifactID]++
				if !published {
					positions = append(positions, a.Position)
				}
			}
		}
		if e.Name == "ready" && !published {
			published = true
			go alice.PublishArtifact(ctx, id, y)
		}
		return seen[y.ID.String()] > 0
	})
	if len(positions) != n+1 || !slices.IsSorted(positions) || seen[z.ID.String()] != 1 {
		t.Fatalf("backlog: %d artifacts, sorted %v, z %d", len(positions), slices.IsSorted(positions), seen[z.ID.String()])
	}
	for a, k := range seen {
		if k != 1 {
			t.Errorf("%s sent %d times", a, k)
		}
	}
	if seen[x.ID.String()] != 0 {
		t.Errorf("the refused objection was sent")
	}
	if count(evs, "ready") != 1 || count(evs, "artifacts") < 3 {
		t.Errorf("%d ready, %d artifacts events", count(evs, "ready"), count(evs, "artifacts"))
	}
}

// An open feed does not hold the engine's shutdown: it ends, and the HTTP
// server closes without waiting it out.
func TestLiveFeedShutdown(t *testing.T) {
	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	nc, _ := nats.Connect(s.NATSURL(), s.Participant())
	defer nc.Close()
	alice, _ := client.New(nc, "alice")
	id, _ := alice.Open(context.Background(), client.Charter{Title: "open feed"})
	_, ack, _ := alice.Publish(context.Background(), id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "one"}})
	alice.WaitPosition(context.Background(), id, ack.Sequence)
	resp, err := http.Get("http://" + s.HTTPAddr() + "/api/v1/deliberations/" + id + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && sc.Text() != "event: ready" {
	}
	ended := make(chan struct{})
	go func() {
		io.Copy(io.Discard, resp.Body)
		close(ended)
	}()
	if err := s.Close(); err != nil {
		t.Fatalf("close with a feed open: %v", err)
	}
	<-ended
}

func first1(evs []sseEvent, name string) string {
	for _, e := range evs {
		if e.Name == name {
			return e.Data
		}
	}
	return ""
}

func all(evs []sseEvent, name string) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Name == name {
			b.WriteString(e.Data)
		}
	}
	return b.String()
}

func count(evs []sseEvent, name string) int {
	n := 0
	for _, e := range evs {
		if e.Name == name {
			n++
		}
	}
	return n
}

// itoa returns the stream position of artifact id in the events.
func itoa(evs []sseEvent, id string) string {
	for _, e := range evs {
		var list []struct {
			ArtifactID string          `json:"artifact_id"`
			Position   json.RawMessage `json:"position"`
		}
		if e.Name == "artifacts" && json.Unmarshal([]byte(e.Data), &list) == nil {
			for _, a := range list {
				if a.ArtifactID == id {
					return string(a.Position)
				}
			}
		}
	}
	return "0"
}

// The list's endpoint pages: every deliberation once, newest first.
func TestListPages(t *testing.T) {
	s := start(t, "127.0.0.1:0")
	nc, _ := nats.Connect(s.NATSURL(), s.Participant())
	defer nc.Close()
	ctx := context.Background()
	alice, _ := client.New(nc, "alice")
	var ids []string
	for i := range 5 {
		id, err := alice.Open(ctx, client.Charter{Title: fmt.Sprintf("deliberation %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	_, ack, _ := alice.Publish(ctx, ids[4], events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "x"}})
	alice.WaitPosition(ctx, ids[4], ack.Sequence)
	var got []string
	before := ""
	for pages := 0; ; pages++ {
		resp, err := http.Get("http://" + s.HTTPAddr() + "/api/v1/explorer/deliberations?limit=2" + before)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Deliberations []struct {
				ID           string
				Artifacts    int
				Participants []struct{ ID string }
				LastActivity *time.Time `json:"last_activity"`
			}
			NextBefore uint64 `json:"next_before"`
		}
		json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		for _, d := range page.Deliberations {
			got = append(got, d.ID)
			if d.LastActivity == nil || (d.ID == ids[4]) != (d.Artifacts == 1 && len(d.Participants) == 1) {
				t.Errorf("row %+v", d)
			}
		}
		if page.NextBefore == 0 || pages > 5 {
			break
		}
		before = "&before=" + strconv.FormatUint(page.NextBefore, 10)
	}
	slices.Reverse(ids)
	if !slices.Equal(got, ids) {
		t.Errorf("pages: %v, want %v", got, ids)
	}
}

// The list's endpoint refuses bad input with a code.
func TestListErrors(t *testing.T) {
	s := start(t, "127.0.0.1:0")
	base := "http://" + s.HTTPAddr() + "/api/v1/explorer/deliberations"
	for q, code := range map[string]string{"?limit=0": "limit.invalid", "?limit=101": "limit.invalid", "?before=x": "before.invalid",
		"?status=done": "status.invalid", "?q=" + strings.Repeat("a", 201): "q.invalid"} {
		resp, err := http.Get(base + q)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Code string }
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 400 || e.Code != code {
			t.Errorf("%s: %d %q", q, resp.StatusCode, e.Code)
		}
	}
}
