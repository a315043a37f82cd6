// Command explorer measures the first render of the deliberation
// explorer's page in headless Chromium, for deliberations of several
// sizes side by side in one run, and takes the documentation's
// screenshots.
//
// An engine is started in process (service.Start) on a temporary
// directory. For each size, a deliberation of that many artifacts is
// published through the client (rounds of a revision, an objection against
// it, blocking one round in ten, and evidence supporting it; a final
// decision that disposes of every blocking objection), and the page
// /deliberations/{id} is opened in a fresh tab, -runs times, the sizes
// taking turns. First render is the time from the navigation's start until
// the page has drawn everything the live feed had when it opened (the DAG
// laid out, the lists filled): the page sets it, from performance.now(), in
// body[data-rendered]. Beside it: when the page opened its feed, when the
// feed's backlog had arrived (ready), the time the page's handlers of its
// events took, and dagre's layout.
//
//	go run ./bench/explorer -sizes 100,1000,10000 -runs 3
//
// With -shots DIR it runs examples/relay/twelve-round.json against the
// engine (the relay's scripted and exec participants, no model), opens a
// second deliberation left in progress, forks the first after its message
// 25 with examples/relay/fork.json, publishes a deliberation of 1,000
// artifacts, and writes PNG screenshots of the list, the deliberation
// (light and dark), the inspector, the live page, the large one fitted
// with its overview, the first at an earlier ordinal on the timeline, and
// the fork beside its parent to DIR:
//
//	go run ./bench/explorer -shots docs/img -sizes ""
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/archive"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/benchkit"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/relay"
	"github.com/parley-engine/parley/service"
)

// rendered waits until the page has drawn what its feed had.
var rendered = void(chromedp.Poll[string](`document.body.dataset.rendered`))

func void[T any](a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := a(ctx, t)
		return chromedp.Void{}, err
	}
}

func main() {
	sizes := flag.String("sizes", "100,1000,10000", "artifacts of each deliberation measured (comma-separated; empty: none)")
	runs := flag.Int("runs", 3, "measurements of each size, taking turns")
	shots := flag.String("shots", "", "write the documentation's screenshots to this directory")
	keep := flag.Bool("keep", false, "after the measures, keep the engine running and print the pages' addresses (until interrupted)")
	flag.Parse()
	ctx := context.Background()
	dir := benchkit.TempDir("parley-explorer-bench")
	defer os.RemoveAll(dir)
	s := benchkit.StartEngine(ctx, service.Config{DataDir: filepath.Join(dir, "engine")})
	defer s.Close()
	nc := benchkit.Connect(s.NATSURL(), s.Participant())
	defer nc.Close()
	base := "http://" + s.HTTPAddr()

	path, err := exec.LookPath("chromium")
	if err != nil {
		log.Fatal("chromium is needed (apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Flag("headless", true), chromedp.WindowSize(1400, 1000))
	actx, cancel := chromedp.NewExecAllocator(ctx, opts...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		log.Fatal(err)
	}

	if *shots != "" {
		if err := screenshots(ctx, bctx, s, nc, base, *shots); err != nil {
			log.Fatal(err)
		}
	}
	var ns []int
	for _, f := range strings.Split(*sizes, ",") {
		if f = strings.TrimSpace(f); f != "" {
			n, err := strconv.Atoi(f)
			if err != nil || n < 4 {
				log.Fatalf("-sizes: %q is not a size of at least 4", f)
			}
			ns = append(ns, n)
		}
	}
	if len(ns) == 0 {
		return
	}
	ids := map[int]string{}
	for _, n := range ns {
		t0 := time.Now()
		id, err := synth(ctx, nc, n)
		if err != nil {
			log.Fatal(err)
		}
		ids[n] = id
		fmt.Printf("published %d artifacts in %.1f s\n", n, time.Since(t0).Seconds())
	}
	type m struct{ Rendered, Ready, Layout, Nodes, Artifacts, Feed, Connect, Ingest int }
	results := map[int][]m{}
	for r := 0; r < *runs; r++ {
		for _, n := range ns {
			tctx, cancel := chromedp.NewContext(bctx)
			tctx, cancel2 := context.WithTimeout(tctx, 5*time.Minute)
			var got m
			err := chromedp.Do(tctx, chromedp.Navigate(base+"/deliberations/"+ids[n]), rendered)
			if err == nil {
				got, err = chromedp.Run(tctx, chromedp.Evaluate[m](`({Rendered: +document.body.dataset.rendered, Ready: window.parleyExplorer.readyAt,
					Layout: window.parleyExplorer.layoutMs, Nodes: +document.querySelector('#dag').dataset.nodes, Artifacts: window.parleyExplorer.arts.size,
					Connect: window.parleyExplorer.connectAt, Ingest: Math.round(window.parleyExplorer.ingestMs || 0)})`))
			}
			cancel2()
			cancel()
			if err != nil {
				log.Fatalf("%d artifacts: %v", n, err)
			}
			if got.Artifacts != n {
				log.Fatalf("%d artifacts: the page has %d", n, got.Artifacts)
			}
			// The control: the feed's backlog read by a plain HTTP client.
			if got.Feed, err = feed(base + "/api/v1/deliberations/" + ids[n] + "/events"); err != nil {
				log.Fatal(err)
			}
			results[n] = append(results[n], got)
			fmt.Printf("run %d, %6d artifacts: first render %6d ms (feed opened %5d ms, ready %6d ms, the page's handling %5d ms; layout %5d ms of %d nodes; the feed alone over HTTP %5d ms)\n",
				r+1, n, got.Rendered, got.Connect, got.Ready, got.Ingest, got.Layout, got.Nodes, got.Feed)
		}
	}
	if *keep {
		defer func() {
			for _, n := range ns {
				fmt.Printf("%6d artifacts: %s/deliberations/%s\n", n, base, ids[n])
			}
			fmt.Println("nats", s.NATSURL(), "- interrupt to stop")
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
			<-sig
		}()
	}
	median := func(n int, f func(m) int) int {
		var v []int
		for _, x := range results[n] {
			v = append(v, f(x))
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	first := median(ns[0], func(x m) int { return x.Rendered })
	fmt.Printf("\nmedians of %d runs\n%9s %12s %10s %10s %10s %8s\n", *runs, "artifacts", "first render", "feed ready", "layout", "feed alone", "ratio")
	for _, n := range ns {
		r := median(n, func(x m) int { return x.Rendered })
		fmt.Printf("%9d %9d ms %7d ms %7d ms %7d ms %7.1fx\n", n, r, median(n, func(x m) int { return x.Ready }), median(n, func(x m) int { return x.Layout }),
			median(n, func(x m) int { return x.Feed }), float64(r)/float64(max(first, 1)))
	}
}

// feed reads a live feed until its ready event and returns how long that
// took, in milliseconds.
func feed(url string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		if sc.Text() == "event: ready" {
			return int(time.Since(t0).Milliseconds()), nil
		}
	}
	return 0, fmt.Errorf("the feed ended before ready: %v", sc.Err())
}

// synth publishes a deliberation of n artifacts: rounds of a revision (a
// claim first), an objection against it (blocking one round in ten) and
// evidence supporting it, then a final decision disposing of every
// blocking objection; the supervisor's TERMINATION is the nth.
func synth(ctx context.Context, nc *nats.Conn, n int) (string, error) {
	cl := map[string]*client.Client{}
	for _, p := range []string{"architect", "critic", "verifier", "judge"} {
		c, err := client.New(nc, p)
		if err != nil {
			return "", err
		}
		cl[p] = c
	}
	id, err := cl["architect"].Open(ctx, client.Charter{Title: fmt.Sprintf("Synthetic deliberation of %d artifacts", n)})
	if err != nil {
		return "", err
	}
	var futures []jetstream.PubAckFuture
	pub := func(p string, d events.Draft) (canon.Digest, error) {
		a, err := events.Seal(d)
		if err != nil {
			return canon.Digest{}, err
		}
		f, err := cl[p].PublishArtifactAsync(id, a)
		if err != nil {
			return canon.Digest{}, err
		}
		futures = append(futures, f)
		return a.ID, nil
	}
	var prev canon.Digest
	var blocking []events.Disposition
	body := n - 2 // the decision, the supervisor's TERMINATION
	for i := 0; i < body; {
		round := i/3 + 1
		var rev canon.Digest
		if i == 0 {
			rev, err = pub("architect", events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "A read-through cache in front of the ledger halves p99 read latency."}})
		} else {
			rev, err = pub("architect", events.Draft{Type: events.TypeRevision, Payload: events.RevisionPayload{Statement: fmt.Sprintf("Revision %d: the cache, bounded to %d MiB, with invalidation on every append.", round, 64+round)},
				References: []events.Reference{{Target: prev, Relation: events.Revises}}})
		}
		if err != nil {
			return "", err
		}
		prev = rev
		i++
		if i == body {
			break
		}
		block := round%10 == 0
		obj, err := pub("critic", events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: fmt.Sprintf("Round %d: the revision does not show its effect on the tail latency of the mixed workload.", round), Blocking: block},
			References: []events.Reference{{Target: rev, Relation: events.ObjectsTo}}})
		if err != nil {
			return "", err
		}
		if block {
			blocking = append(blocking, events.Disposition{Objection: obj, Disposition: events.Addressed, Rationale: "Measured in the next round."})
		}
		i++
		if i == body {
			break
		}
		if _, err := pub("verifier", events.Draft{Type: events.TypeEvidence, Payload: events.Evidence{Content: fmt.Sprintf("Round %d: p99 %d ms under the mixed workload.", round, 40+round%7), ProvenanceClass: events.TraceVerifiedObservation},
			References: []events.Reference{{Target: rev, Relation: events.Supports}, {Target: obj, Relation: events.Considers}}}); err != nil {
			return "", err
		}
		i++
	}
	if blocking == nil {
		blocking = []events.Disposition{}
	}
	if _, err := pub("judge", events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "Adopt the cache as last revised.", Status: events.Final,
		ObjectionDispositions: blocking, UnresolvedIssues: []events.Issue{}}, References: []events.Reference{{Target: prev, Relation: events.Decides}}}); err != nil {
		return "", err
	}
	var last uint64
	for _, f := range futures {
		select {
		case ack := <-f.Ok():
			last = max(last, ack.Sequence)
		case err := <-f.Err():
			return "", err
		case <-time.After(time.Minute):
			return "", fmt.Errorf("no acknowledgement in a minute")
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		v, err := cl["judge"].WaitPosition(ctx, id, last)
		if err == nil && v.Artifacts == n && v.Status.Terminal() {
			return id, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("deliberation of %d: %d artifacts, %s, %v", n, v.Artifacts, v.Status, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// screenshots runs the twelve-round relay and a deliberation left in
// progress, and takes the documentation's pictures.
func screenshots(ctx context.Context, bctx context.Context, s *service.Service, nc *nats.Conn, base, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfg, err := relay.Load("examples/relay/twelve-round.json")
	if err != nil {
		return fmt.Errorf("run from the repository's root: %w", err)
	}
	runDir, err := os.MkdirTemp("", "parley-explorer-relay")
	if err != nil {
		return err
	}
	defer os.RemoveAll(runDir)
	sum, err := relay.Run(ctx, cfg, relay.Options{NATS: s.NATSURL(), Dir: runDir})
	if err != nil {
		return err
	}
	// A second deliberation, in progress: a claim and an open blocking
	// objection.
	alice, _ := client.New(nc, "alice")
	bob, _ := client.New(nc, "bob")
	id2, err := alice.Open(ctx, client.Charter{Title: "Ship the migration on Friday?"})
	if err != nil {
		return err
	}
	claim, _, err := alice.Publish(ctx, id2, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The migration is ready to ship on Friday."}})
	if err != nil {
		return err
	}
	_, ack, err := bob.Publish(ctx, id2, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "Fridays have the thinnest on-call cover; a failed migration would wait until Monday.", Blocking: true},
		References: []events.Reference{{Target: claim.ID, Relation: events.ObjectsTo}}})
	if err != nil {
		return err
	}
	alice.WaitPosition(ctx, id2, ack.Sequence)
	// A fork of the twelve-round deliberation after its message 25
	// (examples/relay/fork.json: the architect turns to write-through).
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	var rec bytes.Buffer
	if _, err := archive.Export(ctx, js, sum.Deliberation, recording.Stream, &rec); err != nil {
		return err
	}
	rd, err := recording.NewReader(&rec)
	if err != nil {
		return err
	}
	forkCfg, err := relay.Load("examples/relay/fork.json")
	if err != nil {
		return err
	}
	forkDir, err := os.MkdirTemp("", "parley-explorer-fork")
	if err != nil {
		return err
	}
	defer os.RemoveAll(forkDir)
	forked, err := relay.Run(ctx, forkCfg, relay.Options{NATS: s.NATSURL(), Dir: forkDir, Fork: rd, ForkAt: 25})
	if err != nil {
		return err
	}
	// A large deliberation, for the overview.
	large, err := synth(ctx, nc, 1000)
	if err != nil {
		return err
	}

	shot := func(name, url string, w, h int64, dark bool, steps ...chromedp.Action[chromedp.Void]) error {
		tctx, cancel := chromedp.NewContext(bctx)
		defer cancel()
		tctx, cancel2 := context.WithTimeout(tctx, time.Minute)
		defer cancel2()
		scheme := "light"
		if dark {
			scheme = "dark"
		}
		if _, err := chromedp.Call(tctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}}); err != nil {
			return err
		}
		all := append([]chromedp.Action[chromedp.Void]{chromedp.EmulateViewport(w, h), chromedp.Navigate(url), rendered}, steps...)
		all = append(all, chromedp.Sleep(300*time.Millisecond))
		if err := chromedp.Do(tctx, all...); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		png, err := chromedp.Run(tctx, chromedp.CaptureScreenshot())
		if err != nil {
			return err
		}
		fmt.Println("wrote", filepath.Join(dir, name))
		return os.WriteFile(filepath.Join(dir, name), png, 0o644)
	}
	page := base + "/deliberations/" + sum.Deliberation
	var objection string
	{
		tctx, cancel := chromedp.NewContext(bctx)
		err := chromedp.Do(tctx, chromedp.Navigate(page), rendered)
		if err == nil {
			objection, err = chromedp.Run(tctx, chromedp.Evaluate[string](`[...window.parleyExplorer.order].filter(a => a.type === 'OBJECTION' && a.body.payload.blocking).pop().artifact_id`))
		}
		cancel()
		if err != nil {
			return err
		}
	}
	b, _ := json.Marshal(objection)
	steps := []struct {
		name, url string
		w, h      int64
		dark      bool
		extra     []chromedp.Action[chromedp.Void]
	}{
		{"explorer-list.png", base + "/", 1400, 560, false, nil},
		{"explorer-deliberation.png", page, 1400, 1000, false, nil},
		{"explorer-deliberation-dark.png", page, 1400, 1000, true, nil},
		{"explorer-decision.png", page, 1400, 1000, false, []chromedp.Action[chromedp.Void]{void(chromedp.Evaluate[bool](`document.querySelector('#decisions').scrollIntoView(), true`))}},
		{"explorer-inspector.png", page, 1400, 1000, false, []chromedp.Action[chromedp.Void]{void(chromedp.Evaluate[bool](`window.parleyExplorer.select(` + string(b) + `), true`))}},
		{"explorer-live.png", base + "/deliberations/" + id2, 1400, 760, false, nil},
		{"explorer-overview.png", base + "/deliberations/" + large, 1400, 1000, false, []chromedp.Action[chromedp.Void]{
			void(chromedp.Poll[bool](`document.querySelector('#dag').dataset.nodes === '1000'`)), chromedp.Click(`#fit`)}},
		{"explorer-timeline.png", page, 1400, 1000, false, []chromedp.Action[chromedp.Void]{
			void(chromedp.Evaluate[bool](`window.parleyExplorer.at_(window.parleyExplorer.arts.get(` + string(b) + `).ordinal + 1), true`)),
			void(chromedp.Poll[bool](`document.querySelector('#dag').dataset.at !== ''`))}},
		{"explorer-fork.png", base + "/deliberations/" + forked.Deliberation, 1400, 1000, false, []chromedp.Action[chromedp.Void]{
			chromedp.WaitVisible(`#compare-open`), chromedp.Click(`#compare-open`), chromedp.WaitVisible(`#compare-fork li`)}},
	}
	for _, st := range steps {
		if err := shot(st.name, st.url, st.w, st.h, st.dark, st.extra...); err != nil {
			return err
		}
	}
	return nil
}
