package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/archive"
	"github.com/parley-engine/parley/audit"
	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/relay"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/termination"
)

// waitJS waits until expression is truthy in the page. A page that
// navigates while the poll runs takes the poll's execution context with
// it ("Cannot find context with specified id"); the poll then starts
// again in the new page, for up to 20 s in all.
func waitJS(t *testing.T, ctx context.Context, what, expression string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expression))
		if err == nil {
			return
		}
		if !contextGone(err) || time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// contextGone reports whether err is the browser saying that the page's
// JavaScript context went away under a command (a navigation).
func contextGone(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Cannot find context with specified id") || strings.Contains(s, "Execution context was destroyed")
}

// newestInView reports the newest artifact drawn in the graph (its
// ordinal), whether its box lies inside the graph's pane, and whether the
// page follows the newest.
const newestInView = `(() => {
	const pane = document.querySelector('#dag').getBoundingClientRect();
	const nodes = [...document.querySelectorAll('#dag .node')];
	if (!nodes.length) return {Ordinal: 0, In: false, Follow: document.querySelector('#follow').getAttribute('aria-pressed') === 'true'};
	const newest = nodes.reduce((a, b) => (+a.dataset.ordinal > +b.dataset.ordinal ? a : b));
	const r = newest.getBoundingClientRect();
	return {Ordinal: +newest.dataset.ordinal, Nodes: nodes.length,
		In: r.width > 0 && r.left >= pane.left - 1 && r.right <= pane.right + 1 && r.top >= pane.top - 1 && r.bottom <= pane.bottom + 1,
		Follow: document.querySelector('#follow').getAttribute('aria-pressed') === 'true'};
})()`

type inView struct {
	Ordinal, Nodes int
	In, Follow     bool
}

// artifactsOf is the number of artifacts the engine holds for id.
func artifactsOf(base, id string) (int, error) {
	resp, err := http.Get(base + "/api/v1/deliberations/" + id)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", id, resp.Status)
	}
	var v struct{ Artifacts int }
	err = json.NewDecoder(resp.Body).Decode(&v)
	return v.Artifacts, err
}

// progress is a relay's progress writer: the first line names the
// deliberation; every line after it is a turn, which waits until onTurn
// returns.
type progress struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	id     chan string
	sent   bool
	onTurn func(line string)
}

var deliberationLine = regexp.MustCompile(`deliberation ([0-9A-Za-z_-]+):`)

func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf.Write(b)
	for {
		line, err := p.buf.ReadString('\n')
		if err != nil {
			p.buf.WriteString(line)
			return len(b), nil
		}
		if m := deliberationLine.FindStringSubmatch(line); m != nil && !p.sent {
			p.sent = true
			p.id <- m[1]
			continue
		}
		if p.sent && p.onTurn != nil {
			p.onTurn(line)
		}
	}
}

// During a live relay, the newest artifact is in the graph's pane after
// every turn while the page follows; panning by hand stops following, and
// the toggle brings the newest back.
func TestExplorerFollowsLiveRelay(t *testing.T) {
	bctx, problems := browser(t)
	s := start(t, "127.0.0.1:0")
	base := "http://" + s.HTTPAddr()
	cfg, err := relay.Load("../examples/relay/fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Rounds = 7
	var checks []inView
	var checkErr error
	turns := 0
	var id string
	opened := make(chan struct{})
	p := &progress{id: make(chan string, 1)}
	p.onTurn = func(string) {
		<-opened
		turns++
		if checkErr != nil {
			return
		}
		// Each turn: once the page shows every artifact the engine holds,
		// the newest is in view.
		n, err := artifactsOf(base, id)
		if err != nil {
			checkErr = err
			return
		}
		if _, err := chromedp.Run(bctx, chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelectorAll('#dag .node').length >= %d`, n))); err != nil {
			checkErr = fmt.Errorf("turn %d: the page never showed %d artifacts: %v", turns, n, err)
			return
		}
		v, err := chromedp.Run(bctx, chromedp.Evaluate[inView](newestInView))
		if err != nil {
			checkErr = err
			return
		}
		checks = append(checks, v)
	}
	done := make(chan error, 1)
	go func() {
		_, err := relay.Run(context.Background(), cfg, relay.Options{NATS: s.NATSURL(), NATSOptions: []nats.Option{s.Participant()}, Dir: t.TempDir(), Progress: p})
		done <- err
	}()
	id = <-p.id
	eventually.True(t, 10*time.Second, "the relay's deliberation is projected", func() bool { _, err := artifactsOf(base, id); return err == nil })
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/deliberations/"+id), chromedp.WaitVisible(`#follow`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, bctx, "the page to render", `document.body.dataset.rendered`)
	close(opened)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if checkErr != nil {
		t.Fatal(checkErr)
	}
	if len(checks) < 20 {
		t.Fatalf("%d turns checked", len(checks))
	}
	grew := false
	for i, c := range checks {
		if !c.In || !c.Follow {
			t.Errorf("turn %d: the newest artifact #%d (of %d drawn) in view %v, following %v", i+1, c.Ordinal, c.Nodes, c.In, c.Follow)
		}
		if i > 0 && c.Ordinal > checks[0].Ordinal {
			grew = true
		}
	}
	if !grew {
		t.Errorf("the graph did not grow during the relay: %+v", checks)
	}
	// The graph is taller than the pane at a readable zoom: following
	// moved the view (else the test proves nothing).
	tall := eval[bool](t, bctx, `(() => { const g = document.querySelector('#viewport').getBBox(); return g.height * 0.6 > document.querySelector('#dag').getBoundingClientRect().height; })()`)
	if !tall {
		t.Errorf("the relay's graph fits the pane: following was not put to the test")
	}
	// Zooming by hand stops following.
	eval[bool](t, bctx, `document.querySelector('#dag').dispatchEvent(new WheelEvent('wheel', {deltaY: 100, clientX: 300, clientY: 300, bubbles: true, cancelable: true}))`)
	if v := eval[inView](t, bctx, newestInView); v.Follow {
		t.Errorf("zooming by hand left following on")
	}
	// Far from the newest, then the toggle: the newest is in view again.
	eval[bool](t, bctx, `(() => { for (let i = 0; i < 30; i++) document.querySelector('#dag').dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: 10, clientY: 10, bubbles: true, cancelable: true})); return true; })()`)
	if err := chromedp.Do(bctx, chromedp.Click(`#follow`)); err != nil {
		t.Fatal(err)
	}
	if v := eval[inView](t, bctx, newestInView); !v.In || !v.Follow {
		t.Errorf("after the toggle: %+v", v)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page had problems:\n%s", strings.Join(p, "\n"))
	}
}

// synthetic publishes a deliberation of n artifacts: a claim, then rounds
// of a revision, an objection against it and evidence supporting it.
func synthetic(t *testing.T, s *service.Service, n int) string {
	t.Helper()
	ctx := context.Background()
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	arch, _ := client.New(nc, "architect")
	critic, _ := client.New(nc, "critic")
	id, err := arch.Open(ctx, client.Charter{Title: fmt.Sprintf("%d artifacts", n)})
	if err != nil {
		t.Fatal(err)
	}
	var futures []jetstream.PubAckFuture
	pub := func(c *client.Client, d events.Draft) events.Artifact {
		a := events.MustSeal(d)
		f, err := c.PublishArtifactAsync(id, a)
		if err != nil {
			t.Fatal(err)
		}
		futures = append(futures, f)
		return *a
	}
	prev := pub(arch, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "A cache halves p99."}})
	for i := 1; i < n; {
		rev := pub(arch, events.Draft{Type: events.TypeRevision, Payload: events.RevisionPayload{Statement: fmt.Sprintf("Revision %d.", i)},
			References: []events.Reference{{Target: prev.ID, Relation: events.Revises}}})
		prev = rev
		if i++; i == n {
			break
		}
		obj := pub(critic, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: fmt.Sprintf("Objection %d.", i)},
			References: []events.Reference{{Target: rev.ID, Relation: events.ObjectsTo}}})
		if i++; i == n {
			break
		}
		pub(critic, events.Draft{Type: events.TypeEvidence, Payload: events.Evidence{Content: fmt.Sprintf("Measured %d.", i), ProvenanceClass: events.TraceVerifiedObservation},
			References: []events.Reference{{Target: rev.ID, Relation: events.Supports}, {Target: obj.ID, Relation: events.Considers}}})
		i++
	}
	var last uint64
	for _, f := range futures {
		select {
		case ack := <-f.Ok():
			last = max(last, ack.Sequence)
		case err := <-f.Err():
			t.Fatal(err)
		}
	}
	if _, err := arch.WaitPosition(ctx, id, last); err != nil {
		t.Fatal(err)
	}
	return id
}

// A 1,000-artifact DAG: Fit puts all of it in the pane, the overview
// shows it, and zooming in brings the text back.
func TestExplorerFitsLargeGraph(t *testing.T) {
	bctx, problems := browser(t)
	s := start(t, "127.0.0.1:0")
	base := "http://" + s.HTTPAddr()
	const n = 1000
	id := synthetic(t, s, n)
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/deliberations/"+id)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, bctx, "the whole graph drawn", fmt.Sprintf(`document.querySelector('#dag').dataset.nodes === '%d'`, n))
	if err := chromedp.Do(bctx, chromedp.Click(`#fit`)); err != nil {
		t.Fatal(err)
	}
	type fitFacts struct {
		Nodes, Outside, Texts        int
		Far, Overview, Follow        bool
		Layout, View                 string
		PaneW, PaneH, DrawnW, DrawnH float64
	}
	facts := `(() => {
		const pane = document.querySelector('#dag').getBoundingClientRect();
		const nodes = [...document.querySelectorAll('#dag .node')];
		let outside = 0;
		for (const g of nodes) { const r = g.getBoundingClientRect(); if (r.left < pane.left - 1 || r.right > pane.right + 1 || r.top < pane.top - 1 || r.bottom > pane.bottom + 1) outside++; }
		const vp = document.querySelector('#viewport').getBoundingClientRect();
		const mini = document.querySelector('#overview');
		return {Nodes: nodes.length, Outside: outside, Far: document.querySelector('#dag').classList.contains('far'),
			Texts: [...document.querySelectorAll('#dag .node text.hd')].filter(t => getComputedStyle(t).display !== 'none').length,
			Overview: !mini.hidden && mini.getBoundingClientRect().width > 100, View: mini.dataset.view || '',
			Follow: document.querySelector('#follow').getAttribute('aria-pressed') === 'true', Layout: document.querySelector('#dag').dataset.layout,
			PaneW: pane.width, PaneH: pane.height, DrawnW: vp.width, DrawnH: vp.height};
	})()`
	f := eval[fitFacts](t, bctx, facts)
	if f.Nodes != n || f.Outside != 0 || !f.Overview || f.View == "" || f.Follow || f.Layout != "layers" {
		t.Fatalf("fit: %+v", f)
	}
	// Fit fills the pane along one side at least.
	if f.DrawnW < f.PaneW*0.8 && f.DrawnH < f.PaneH*0.8 {
		t.Errorf("fit leaves the pane mostly empty: %+v", f)
	}
	if !f.Far || f.Texts != 0 {
		t.Errorf("a 1,000-node graph fitted is drawn as blocks: %+v", f)
	}
	// Zooming in: the text is back.
	eval[bool](t, bctx, `(() => { const r = document.querySelector('#dag').getBoundingClientRect();
		for (let i = 0; i < 40; i++) document.querySelector('#dag').dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: r.left + r.width / 2, clientY: r.top + r.height / 2, bubbles: true, cancelable: true}));
		return true; })()`)
	z := eval[fitFacts](t, bctx, facts)
	if z.Far || z.Texts == 0 || z.Outside == 0 {
		t.Errorf("zoomed in: %+v", z)
	}
	// The overview moves the view: a click where the first artifact is
	// drawn in it brings that artifact into the pane.
	type clickFacts struct{ Before, After bool }
	first := eval[clickFacts](t, bctx, `(() => {
		const pane = document.querySelector('#dag').getBoundingClientRect();
		const node = document.querySelector('#dag .node[data-ordinal="2"]');
		const seen = () => { const g = node.getBoundingClientRect(); return g.bottom > pane.top && g.top < pane.bottom && g.right > pane.left && g.left < pane.right; };
		const before = seen();
		const m = document.querySelector('#overview'), r = m.getBoundingClientRect();
		const [sc, ox, oy] = m.dataset.map.split(' ').map(Number);
		const tr = node.transform.baseVal.consolidate().matrix, b = node.getBBox();
		const x = r.left + ox + (tr.e + b.width / 2) * sc, y = r.top + oy + (tr.f + b.height / 2) * sc;
		m.dispatchEvent(new PointerEvent('pointerdown', {clientX: x, clientY: y, bubbles: true, pointerId: 1}));
		m.dispatchEvent(new PointerEvent('pointerup', {clientX: x, clientY: y, bubbles: true, pointerId: 1}));
		return {Before: before, After: seen()};
	})()`)
	if first.Before || !first.After {
		t.Errorf("a click on the first artifact in the overview: in view before %v, after %v", first.Before, first.After)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page had problems:\n%s", strings.Join(p, "\n"))
	}
}

// streamMessages returns deliberation id's messages, as engine export
// records them.
func streamMessages(t *testing.T, s *service.Service, id string) []recording.Message {
	t.Helper()
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	var buf bytes.Buffer
	if _, err := archive.Export(context.Background(), js, id, recording.Stream, &buf); err != nil {
		t.Fatal(err)
	}
	rd, err := recording.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var out []recording.Message
	for {
		m, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
}

// foldTo folds the first k messages, as the engine does.
func foldTo(id string, msgs []recording.Message, k int) *projector.Deliberation {
	p := projector.New(projector.Options{Rules: termination.Rules{}})
	for _, m := range msgs[:k] {
		msg := projector.Msg{Seq: m.Position, Subject: m.Subject, Data: m.Data, Time: m.Time, Signature: m.Signature}
		p.Prepare(&msg, nil)
		p.Apply(msg)
	}
	return p.Deliberation(id)
}

// The timeline: scrubbed to each ordinal, the page shows the DAG, the
// open blocking objections, the decisions and the status of the fold of
// the deliberation's messages up to that ordinal.
func TestExplorerTimeline(t *testing.T) {
	bctx, problems := browser(t)
	s := start(t, "127.0.0.1:0")
	r := publish(t, s)
	base := "http://" + s.HTTPAddr()
	msgs := streamMessages(t, s, r.id)
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/deliberations/"+r.id), chromedp.WaitVisible(`#final-closure`), chromedp.WaitVisible(`#scrub`)); err != nil {
		t.Fatal(err)
	}
	max := eval[int](t, bctx, `+document.querySelector('#scrub').max`)
	if max < 8 || max > len(msgs) {
		t.Fatalf("the timeline runs to #%d, the deliberation has %d messages", max, len(msgs))
	}
	type shown struct {
		At, Status, Open, Count, DagAt string
		Nodes, OpenRows                []string
		Decisions                      int
	}
	t.Logf("%d messages, the timeline to #%d", len(msgs), max)
	sawOpen, sawClosed := false, false
	for k := 1; k <= len(msgs); k++ {
		want := ""
		if k < max {
			want = strconv.Itoa(k)
		}
		// Scrubbing: the range moved, as a hand moves it.
		eval[bool](t, bctx, fmt.Sprintf(`(() => { const s = document.querySelector('#scrub'); s.value = '%d'; s.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`, k))
		waitJS(t, bctx, "the page at #"+strconv.Itoa(k), fmt.Sprintf(`document.querySelector('#dag').dataset.at === %q && document.querySelector('#scrubber').dataset.at === %q`, want, want))
		got := eval[shown](t, bctx, `(() => {
			const q = s => document.querySelector(s);
			return {At: q('#scrubber').dataset.at, Status: q('#status').textContent, Open: (q('#open-objections') || {dataset: {ids: ''}}).dataset.ids,
				Count: q('#count').textContent, DagAt: q('#dag').dataset.at,
				Nodes: [...document.querySelectorAll('#dag .node')].map(n => n.dataset.id).sort(),
				OpenRows: [...document.querySelectorAll('#objections tr[data-state="open"]')].map(r => r.dataset.id).sort(),
				Decisions: document.querySelectorAll('#decisions .card').length};
		})()`)
		d := foldTo(r.id, msgs, k)
		var nodes, open []string
		d.Nodes(func(id canon.Digest, _ projector.Node) { nodes = append(nodes, id.String()) })
		for _, o := range d.OpenBlockingObjections() {
			open = append(open, o.String())
		}
		slices.Sort(nodes)
		slices.Sort(open)
		if got.Status != string(d.Status) || got.Count != strconv.Itoa(d.Artifacts()) || !slices.Equal(got.Nodes, nodes) ||
			got.Open != strings.Join(open, " ") || !slices.Equal(got.OpenRows, open) || got.Decisions != len(d.Decisions()) {
			t.Errorf("at #%d the page shows %+v; the fold: status %s, %d artifacts %v, open %v, %d decisions", k, got, d.Status, d.Artifacts(), nodes, open, len(d.Decisions()))
		}
		if len(open) > 0 {
			sawOpen = true
		} else if sawOpen {
			sawClosed = true
		}
	}
	if !sawOpen || !sawClosed {
		t.Errorf("the deliberation's objection was never open and then disposed of (open %v, then closed %v)", sawOpen, sawClosed)
	}
	// Now again.
	if err := chromedp.Do(bctx, chromedp.Click(`#scrub-now`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, bctx, "the page now", `document.querySelector('#dag').dataset.at === '' && document.querySelector('#status').textContent === 'completed'`)
	if loc, _ := chromedp.Run(bctx, chromedp.Location()); strings.Contains(loc, "at=") {
		t.Errorf("now, the address: %s", loc)
	}
	// The address keeps the moment: #5, the objection open.
	eval[bool](t, bctx, `(() => { const s = document.querySelector('#scrub'); s.value = '5'; s.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`)
	loc, _ := chromedp.Run(bctx, chromedp.Location())
	if !strings.HasSuffix(loc, "?at=5") {
		t.Errorf("at #5, the address: %s", loc)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/"), chromedp.Navigate(loc)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, bctx, "the page opened at #5", `document.querySelector('#dag') && document.querySelector('#dag').dataset.at === '5'`)
	if open := eval[string](t, bctx, `(document.querySelector('#open-objections') || {dataset: {}}).dataset.ids`); open != r.objection.ID.String() {
		t.Errorf("opened at #5: open objections %q, want %s", open, r.objection.ID)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page had problems:\n%s", strings.Join(p, "\n"))
	}
}

// A fork links to its parent, the parent lists the fork, and the
// comparison shows, from the fork point, the artifacts each has that the
// other has not. The fork is made as relay fork makes one: the parent's
// first artifacts published again, byte for byte, under a new
// deliberation, then its own.
func TestExplorerFork(t *testing.T) {
	bctx, problems := browser(t)
	s := start(t, "127.0.0.1:0")
	base := "http://" + s.HTTPAddr()
	ctx := context.Background()
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	arch, _ := client.New(nc, "architect")
	critic, _ := client.New(nc, "critic")
	must := func(a *events.Artifact, _ *jetstream.PubAck, err error) *events.Artifact {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	parent, _ := arch.Open(ctx, client.Charter{Title: "Cache or not?"})
	claim := must(arch.Publish(ctx, parent, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "A read-through cache halves p99."}}))
	obj := must(critic.Publish(ctx, parent, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "Invalidation is unsolved.", Blocking: true},
		References: []events.Reference{{Target: claim.ID, Relation: events.ObjectsTo}}}))
	readThrough := must(arch.Publish(ctx, parent, events.Draft{Type: events.TypeRevision, Payload: events.RevisionPayload{Statement: "Invalidate on every append."},
		References: []events.Reference{{Target: claim.ID, Relation: events.Revises}, {Target: obj.ID, Relation: events.Considers}}}))
	other, _ := arch.Open(ctx, client.Charter{Title: "Unrelated"})
	must(arch.Publish(ctx, other, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Something else."}}))

	fork, _ := arch.Open(ctx, client.Charter{Title: "Cache or not? (write-through)"})
	for _, c := range []struct {
		cl *client.Client
		a  *events.Artifact
	}{{arch, claim}, {critic, obj}} {
		if _, err := c.cl.PublishArtifact(ctx, fork, c.a); err != nil {
			t.Fatal(err)
		}
	}
	writeThrough := must(arch.Publish(ctx, fork, events.Draft{Type: events.TypeRevision, Payload: events.RevisionPayload{Statement: "A write-through cache: no invalidation."},
		References: []events.Reference{{Target: claim.ID, Relation: events.Revises}, {Target: obj.ID, Relation: events.Considers}}}))
	_, ack, err := critic.Publish(ctx, fork, events.Draft{Type: events.TypeEvidence, Payload: events.Evidence{Content: "Writes slow by 8%.", ProvenanceClass: events.TraceVerifiedObservation},
		References: []events.Reference{{Target: writeThrough.ID, Relation: events.Supports}}})
	if err != nil {
		t.Fatal(err)
	}
	arch.WaitPosition(ctx, fork, ack.Sequence)

	// The API: the fork's parent, after the parent's claim and objection.
	var l struct {
		Parent *struct {
			ID           string
			Shared       int
			RawForkAfter int `json:"fork_after"`
		}
		Forks []struct{ ID string }
	}
	resp, err := http.Get(base + "/api/v1/explorer/deliberations/" + fork + "/lineage")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&l)
	resp.Body.Close()
	// The parent's messages: the open (1), the claim (2), the objection (3).
	if l.Parent == nil || l.Parent.ID != parent || l.Parent.Shared != 2 || l.Parent.RawForkAfter != 3 || len(l.Forks) != 0 {
		t.Fatalf("the fork's lineage: %+v", l)
	}
	for _, c := range []struct{ url, code string }{
		{"/api/v1/explorer/deliberations/" + parent + "/compare", "lineage.not_a_fork"},
		{"/api/v1/explorer/deliberations/nope/lineage", "not_found"},
		{"/api/v1/explorer/deliberations/nope/compare", "not_found"},
		{"/api/v1/explorer/deliberations/nope/recording", "not_found"},
		{"/api/v1/explorer/deliberations/nope/audit", "not_found"},
	} {
		resp, err := http.Get(base + c.url)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Code string }
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 404 || e.Code != c.code {
			t.Errorf("%s: %d %q", c.url, resp.StatusCode, e.Code)
		}
	}

	// The fork's page links to its parent; the comparison.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/deliberations/"+fork), chromedp.WaitVisible(`#parent a`)); err != nil {
		t.Fatal(err)
	}
	if href := eval[string](t, bctx, `document.querySelector('#parent a').getAttribute('href')`); href != "/deliberations/"+parent {
		t.Errorf("the parent's link: %q", href)
	}
	// The comparison, or the reason it could not be read. The button is
	// clicked from the page itself, as often as it takes: the live page
	// may render the lineage again meanwhile, and a click on the element
	// it replaced does nothing.
	clicked := 0
	eventually.True(t, 60*time.Second, "the comparison or its refusal", func() bool {
		if eval[bool](t, bctx, `!!document.querySelector('#compare-fork li, #compare .bad')`) {
			return true
		}
		if clicked < 20 && eval[bool](t, bctx, `(() => { const b = document.querySelector('#compare-open'); if (!b || !document.querySelector('#compare').hidden) return false; b.click(); return true })()`) {
			clicked++
		}
		return false
	})
	if bad := eval[string](t, bctx, `(document.querySelector('#compare .bad') || {}).textContent || ""`); bad != "" {
		t.Fatalf("the comparison: %s", bad)
	}
	type side struct{ Differs, Same []string }
	read := func(which string) side {
		return eval[side](t, bctx, `({Differs: [...document.querySelectorAll('#compare-`+which+` li[data-differs="true"]')].map(l => l.dataset.id),
			Same: [...document.querySelectorAll('#compare-`+which+` li[data-differs="false"]')].map(l => l.dataset.id)})`)
	}
	ps, fs := read("parent"), read("fork")
	if !slices.Equal(ps.Differs, []string{readThrough.ID.String()}) || len(ps.Same) != 0 {
		t.Errorf("the parent's side: %+v, want only %s", ps, readThrough.ID)
	}
	if len(fs.Differs) != 2 || fs.Differs[0] != writeThrough.ID.String() || len(fs.Same) != 0 {
		t.Errorf("the fork's side: %+v, want %s first", fs, writeThrough.ID)
	}
	text := eval[string](t, bctx, `document.querySelector('#compare').innerText`)
	if !strings.Contains(text, "Invalidate on every append.") || !strings.Contains(text, "A write-through cache: no invalidation.") {
		t.Errorf("the comparison: %q", text)
	}

	// The parent's page lists its fork, and is no fork itself.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/deliberations/"+parent), chromedp.WaitVisible(`#forks a`)); err != nil {
		t.Fatal(err)
	}
	if href := eval[string](t, bctx, `[...document.querySelectorAll('#forks a')].map(a => a.getAttribute('href')).join(' ')`); href != "/deliberations/"+fork {
		t.Errorf("the parent's forks: %q", href)
	}
	if eval[bool](t, bctx, `!!document.querySelector('#parent')`) {
		t.Errorf("the parent shows a parent")
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the pages had problems:\n%s", strings.Join(p, "\n"))
	}
}

// What the relay records with each artifact (round, role, model, tokens,
// cost) is shown; search finds within the deliberation; the recording
// downloads and audits OK, on the page as with engine audit; a binding
// moment answered in the principal's own words shows them.
func TestExplorerRecordedDetails(t *testing.T) {
	bctx, problems := browser(t)
	s := start(t, "127.0.0.1:0")
	base := "http://" + s.HTTPAddr()
	ctx := context.Background()
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	arch, _ := client.New(nc, "architect")
	critic, _ := client.New(nc, "critic")
	id, _ := arch.Open(ctx, client.Charter{Title: "Share with the booking service?"})
	claim, _, err := arch.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Share the dates only."},
		Extensions: map[string]any{"parley.round": 2, "parley.role": "INITIAL_ARCHITECT",
			"parley.model": map[string]any{"provider": "openai-compatible", "model": "gpt-test", "response_model": "gpt-test-2025", "finish_reason": "stop", "latency_ms": 1234},
			"parley.usage": map[string]any{"input_tokens": 1200, "output_tokens": 300, "cost_usd_micros": 4500}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := critic.Publish(ctx, id, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "Passport numbers need invalidation rules."},
		References: []events.Reference{{Target: claim.ID, Relation: events.ObjectsTo}},
		Extensions: map[string]any{"parley.round": 2, "parley.role": "CRITICAL_REVIEWER", "parley.model": map[string]any{"provider": "anthropic", "model": "claude-test"},
			"parley.usage": map[string]any{"input_tokens": 100, "output_tokens": 50, "cost_usd_micros": 500}}}); err != nil {
		t.Fatal(err)
	}
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
	_, ack, err := arch.Publish(ctx, id, events.Draft{Type: events.TypeDecision,
		Payload:    events.Decision{Outcome: "Ask the principal what to share.", Status: events.Provisional, ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}},
		Extensions: map[string]any{binding.ExtEnvelope: env}})
	if err != nil {
		t.Fatal(err)
	}
	arch.WaitPosition(ctx, id, ack.Sequence)

	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/deliberations/"+id), chromedp.WaitVisible(`#usage`), chromedp.WaitVisible(`#bindings li[data-status="open"]`)); err != nil {
		t.Fatal(err)
	}
	type details struct{ Usage, Row, Options string }
	d := eval[details](t, bctx, `({Usage: document.querySelector('#usage').innerText,
		Row: document.querySelector('#timeline li[data-id="`+claim.ID.String()+`"]').innerText,
		Options: [...document.querySelectorAll('#bindings ol.options li')].map(l => l.dataset.option + ' ' + l.innerText).join(' | ')})`)
	for _, want := range []string{"gpt-test · 1 artifact · 1,200 in / 300 out tokens · $0.0045", "claude-test · 1 artifact · 100 in / 50 out tokens · $0.0005", "total 1,650 tokens, $0.0050"} {
		if !strings.Contains(d.Usage, want) {
			t.Errorf("usage lacks %q: %q", want, d.Usage)
		}
	}
	if !strings.Contains(d.Row, "round 2 · INITIAL_ARCHITECT · gpt-test · 1,500 tokens · $0.0045") {
		t.Errorf("the claim's row: %q", d.Row)
	}
	if !strings.Contains(d.Options, "1 Share dates only (recommended)") || !strings.Contains(d.Options, "2 Share dates and passport number") {
		t.Errorf("the options, numbered from 1: %q", d.Options)
	}
	if err := chromedp.Do(bctx, chromedp.Click(`#dag .node[data-id="`+claim.ID.String()+`"]`), chromedp.WaitVisible(`#insp-meta`)); err != nil {
		t.Fatal(err)
	}
	if m := eval[string](t, bctx, `document.querySelector('#insp-meta').innerText`); !strings.Contains(m, "openai-compatible · gpt-test") ||
		!strings.Contains(m, "answered as gpt-test-2025") || !strings.Contains(m, "1,200 in, 300 out") || !strings.Contains(m, "$0.0045") || !strings.Contains(m, "INITIAL_ARCHITECT") {
		t.Errorf("the inspector: %q", m)
	}

	// Search: one artifact says "invalidation".
	if err := chromedp.Do(bctx, chromedp.SendKeys(`#search`, "INVALIDATION rules"), chromedp.WaitVisible(`#timeline li`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, bctx, "the search", `document.querySelector('#search-note').textContent === '1 match'`)
	type found struct {
		Rows []string
		Hits int
	}
	f := eval[found](t, bctx, `({Rows: [...document.querySelectorAll('#timeline li')].map(l => l.innerText), Hits: document.querySelectorAll('#dag .node.hit').length})`)
	if len(f.Rows) != 1 || !strings.Contains(f.Rows[0], "Passport numbers need invalidation rules.") || f.Hits != 1 {
		t.Errorf("search: %+v", f)
	}

	// Answered in the principal's own words.
	moments, err := s.Queries.Bindings(ctx, id)
	if err != nil || len(moments) != 1 {
		t.Fatal(moments, err)
	}
	req, _ := http.NewRequest("POST", base+"/api/v1/deliberations/"+id+"/bindings/"+moments[0].EnvelopeDigest,
		strings.NewReader(`{"binding_moment_resolution":{"envelope_digest":"`+moments[0].EnvelopeDigest+`","resolution":"answer","answer":"The dates, and the passport number only at check-in."}}`))
	req.Header.Set("Authorization", "Bearer "+s.Credentials().HTTPToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("resolve: %d", resp.StatusCode)
	}
	if err := chromedp.Do(bctx, chromedp.WaitVisible(`#bindings li[data-status="resolved"] blockquote.words`)); err != nil {
		t.Fatal(err)
	}
	if txt := eval[string](t, bctx, `document.querySelector('#bindings li[data-status="resolved"]').innerText`); !strings.Contains(txt, "answered in their own words") ||
		!strings.Contains(txt, "The dates, and the passport number only at check-in.") {
		t.Errorf("the resolved moment: %q", txt)
	}

	// The recording, as the page links it: a stream recording that audits OK.
	href := eval[string](t, bctx, `document.querySelector('#dl-recording').getAttribute('href')`)
	resp, err = http.Get(base + href)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	rd, err := recording.NewReader(bytes.NewReader(rec))
	if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") || rd.Format() != recording.Stream {
		t.Fatalf("the recording: %d %v %q", resp.StatusCode, err, rec[:min(len(rec), 200)])
	}
	rep, err := audit.Run(rd)
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.Click(`#run-audit`), chromedp.WaitVisible(`#audit[data-ok="true"], #audit[data-ok="false"]`)); err != nil {
		t.Fatal(err)
	}
	a := eval[string](t, bctx, `document.querySelector('#audit').dataset.ok + ' ' + document.querySelector('#audit').innerText`)
	if !rep.OK || !strings.HasPrefix(a, "true ✓ audit OK ("+strconv.Itoa(rep.Messages)+" messages") {
		t.Errorf("the audit on the page: %q; engine audit of the download: ok %v, %d messages, %v", a, rep.OK, rep.Messages, rep.Findings)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page had problems:\n%s", strings.Join(p, "\n"))
	}
}
