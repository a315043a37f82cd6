package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/jstest"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// lines collects what a running command writes, line by line.
type lines struct {
	ch chan string
	pw *io.PipeWriter
}

func newLines() *lines {
	pr, pw := io.Pipe()
	l := &lines{ch: make(chan string, 1000), pw: pw}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			l.ch <- sc.Text()
		}
		close(l.ch)
	}()
	return l
}

func (l *lines) Write(p []byte) (int, error) { return l.pw.Write(p) }

// next waits for the next line.
func (l *lines) next(t *testing.T) string {
	t.Helper()
	select {
	case s, ok := <-l.ch:
		if !ok {
			t.Fatal("the output ended")
		}
		return s
	case <-time.After(20 * time.Second):
		t.Fatal("no line within 20s")
	}
	return ""
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freePort(t *testing.T) string {
	return "127.0.0.1:" + strconv.Itoa(jstest.FreePort(t))
}

// engine watch follows a deliberation live as the engine judges it: every
// message with its ordinal (the API's), the artifacts' text and
// references, a rejection with its code (an objection to what is not yet
// there, then admitted when published again after it), the supervisor's FAILURE and TERMINATION; it survives the
// engine's restart, resuming where it was, and ends when the deliberation
// does. The engine ran another deliberation first, so that stream
// positions are not ordinals.
func TestWatch_Live(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	data, addr := t.TempDir(), freePort(t)
	start := func() *service.Service {
		s, err := service.Start(ctx, service.Config{DataDir: data, Listen: addr, HTTP: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := start()
	defer func() { s.Close() }()
	url := s.NATSURL()
	nc, err := nats.Connect(url, s.Participant(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	alice, _ := client.New(nc, "alice")
	bob, _ := client.New(nc, "bob")
	carol, _ := client.New(nc, "carol")
	other, err := alice.Open(ctx, client.Charter{Title: "another one"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		alice.Publish(ctx, other, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprint("other ", i)}})
	}
	id, err := alice.Open(ctx, client.Charter{Title: "Adopt the cache?", Participants: []string{"alice", "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.WaitPosition(ctx, id, 1); err != nil {
		t.Fatal(err)
	}
	claim, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The cache halves p99 latency."}})
	if err != nil {
		t.Fatal(err)
	}

	out, errb := newLines(), &syncBuf{}
	code := make(chan int, 1)
	go func() {
		code <- Run(ctx, []string{"watch", "--json", "--nats", url, "--data", data, "--timeout", "5s", id}, strings.NewReader(""), out, errb)
		out.pw.Close()
	}()
	type got struct {
		watchLine
		End    bool   `json:"end"`
		Status string `json:"status"`
	}
	read := func() got {
		t.Helper()
		var g got
		s := out.next(t)
		if err := json.Unmarshal([]byte(s), &g); err != nil {
			t.Fatalf("not a JSON line: %q", s)
		}
		return g
	}
	var all []got
	expect := func(kind, typ string) got {
		t.Helper()
		g := read()
		all = append(all, g)
		if g.Kind != kind || g.ArtifactType != typ {
			t.Fatalf("line %+v, want %s %s (stderr %s)", g, kind, typ, errb.String())
		}
		return g
	}
	if g := expect("control", ""); g.Op != "open" || g.Ordinal != 1 || g.Position == 1 || !strings.Contains(g.Text, "Adopt the cache?") {
		t.Fatalf("open: %+v", g)
	}
	if g := expect("artifact", "CLAIM"); g.Ordinal != 2 || g.Text != "The cache halves p99 latency." || g.Participant != "alice" || len(g.Artifact) == 0 {
		t.Fatalf("claim: %+v", g)
	}
	// A rejected message, then an objection to evidence not yet published.
	carol.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "I am not in the charter."}})
	if g := expect("rejected", "CLAIM"); g.Code != projector.CodeNotInCharter || g.Ordinal != 3 || g.Message == "" {
		t.Fatalf("rejection: %+v", g)
	}
	evidence := events.MustSeal(events.Draft{Type: events.TypeEvidence, Payload: events.Evidence{Content: "p99 77 ms", ProvenanceClass: "TRACE_VERIFIED_OBSERVATION"},
		References: []events.Reference{{Target: claim.ID, Relation: events.Supports}}})
	obj := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "Only one workload was measured.", Blocking: true},
		References: []events.Reference{{Target: claim.ID, Relation: events.ObjectsTo}, {Target: evidence.ID, Relation: events.ObjectsTo}}})
	if _, err := bob.PublishArtifact(ctx, id, obj); err != nil {
		t.Fatal(err)
	}
	if g := expect("rejected", "OBJECTION"); g.Code != projector.CodeUnknownTarget || g.Ordinal != 4 {
		t.Fatalf("objection before its target: %+v", g)
	}

	// The engine restarts; the watch says so and resumes.
	s.Close()
	s = start()
	if _, err := alice.PublishArtifact(ctx, id, evidence); err != nil {
		t.Fatal(err)
	}
	if g := expect("artifact", "EVIDENCE"); g.Ordinal != 5 || len(g.References) != 1 || g.References[0].Ordinal != 2 || g.References[0].Relation != "supports" {
		t.Fatalf("evidence: %+v", g)
	}
	bob2, _ := client.New(nc, "bob") // another client: bob's own would absorb it as a retry
	if _, err := bob2.PublishArtifact(ctx, id, obj); err != nil {
		t.Fatal(err)
	}
	if g := expect("artifact", "OBJECTION"); g.Qualifier != "blocking" || g.Ordinal != 6 || g.References[0].Ordinal != 2 || g.References[1].Ordinal != 5 {
		t.Fatalf("objection: %+v", g)
	}
	// A decision that hides the blocking objection: the supervisor's FAILURE.
	dec, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "Adopt the cache.", Status: events.Final,
		ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}}})
	if err != nil {
		t.Fatal(err)
	}
	if g := expect("artifact", "DECISION"); g.Ordinal != 7 || !strings.HasPrefix(g.Qualifier, "final") {
		t.Fatalf("decision: %+v", g)
	}
	if g := expect("artifact", "FAILURE"); g.Participant != wire.SupervisorToken || !strings.HasPrefix(g.Text, "closure.hidden_blocking_objection: ") ||
		g.References[0].Ordinal != 7 || g.References[0].ArtifactID != dec.ID.String() {
		t.Fatalf("supervisor FAILURE: %+v", g)
	}
	if err := alice.Cancel(ctx, id, "the benchmark is rerun first"); err != nil {
		t.Fatal(err)
	}
	if g := expect("control", ""); g.Op != "cancel" || g.Text != "the benchmark is rerun first" {
		t.Fatalf("cancel: %+v", g)
	}
	if g := expect("artifact", "TERMINATION"); g.Participant != wire.SupervisorToken || !strings.HasPrefix(g.Text, "cancelled") {
		t.Fatalf("TERMINATION: %+v", g)
	}
	if g := read(); !g.End || g.Status != "cancelled" {
		t.Fatalf("end: %+v", g)
	}
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d: %s", c, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end with the deliberation")
	}
	if e := errb.String(); !strings.Contains(e, "is lost after #4; reconnecting") || !strings.Contains(e, "reconnected to "+url+"; resuming after #4") {
		t.Errorf("stderr %q", e)
	}
	// Ordinals follow one another, none twice, and are the query API's.
	ordinals := map[string]uint64{}
	for e, err := range alice.Artifacts(ctx, id, client.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		ordinals[e.ArtifactID.String()] = e.Ordinal
	}
	var want uint64 = 1
	for _, g := range all {
		if g.Ordinal != want {
			t.Errorf("ordinal %d where %d was due: %+v", g.Ordinal, want, g)
		}
		want++
		if (g.Kind == "artifact") && ordinals[g.ArtifactID] != g.Ordinal {
			t.Errorf("%s: watch #%d, API ordinal %d", g.ArtifactType, g.Ordinal, ordinals[g.ArtifactID])
		}
	}
	rl, err := alice.RejectionPage(ctx, id, client.ListOptions{}, "")
	if err != nil || len(rl.Rejections) != 2 || rl.Rejections[0].Ordinal != 3 || rl.Rejections[0].Position == 3 || rl.Rejections[1].Ordinal != 4 {
		t.Errorf("rejections: %v %+v", err, rl.Rejections)
	}
	// Over HTTP too.
	resp, err := http.Get(s.HTTPURL() + "/api/v1/deliberations/" + id + "/artifacts")
	if err != nil {
		t.Fatal(err)
	}
	var entries []api.ArtifactEntry
	json.NewDecoder(resp.Body).Decode(&entries)
	resp.Body.Close()
	if len(entries) != 6 || entries[0].Ordinal != 2 || entries[0].Position == 2 {
		t.Errorf("HTTP artifacts: %+v", entries)
	}

	// The same deliberation, ended, for people: it is read whole and ends.
	var human, herr syncBuf
	c := Run(ctx, []string{"watch", "--nats", url, "--data", data, id}, strings.NewReader(""), &human, &herr)
	h := human.String()
	for _, want := range []string{
		"#1    control      open        \"Adopt the cache?\" participants alice, bob\n",
		"#2    alice        CLAIM       The cache halves p99 latency.  [" + shortRef(claim.ID) + "]\n",
		"#3    carol        CLAIM       REJECTED participant.not_in_charter: ",
		"#4    bob          OBJECTION   REJECTED reference.unavailable: ",
		"#5    alice        EVIDENCE    (TRACE_VERIFIED_OBSERVATION) p99 77 ms  supports #2",
		"#6    bob          OBJECTION   (blocking) Only one workload was measured.  objects-to #2  objects-to #5  [" + shortRef(obj.ID) + "]\n",
		"#8    supervisor   FAILURE     closure.hidden_blocking_objection: ",
		"considers #7",
		"#9    control      cancel      the benchmark is rerun first\n",
		"#10   supervisor   TERMINATION cancelled",
		"ended: cancelled after 10 messages",
	} {
		if !strings.Contains(h, want) {
			t.Errorf("the watch lacks %q:\n%s", want, h)
		}
	}
	if c != 0 {
		t.Errorf("exit %d: %s", c, herr.String())
	}
	// --from prints from an ordinal on.
	human = syncBuf{}
	if c := Run(ctx, []string{"watch", "--nats", url, "--data", data, "--from", "9", id}, strings.NewReader(""), &human, &herr); c != 0 ||
		!strings.HasPrefix(human.String(), "#9    control      cancel") {
		t.Errorf("--from 9: exit %d %q", c, human.String())
	}
}

// An unknown deliberation, no engine, a bad id: a clear error and a
// non-zero exit, at once.
func TestWatch_Errors(t *testing.T) {
	s, natsArg := liveEngine(t)
	unknown := "01a2317d-feca-7918-92ea-3e2dca781370"
	start := time.Now()
	code, _, errs := run(t, "", append(append([]string{"watch"}, natsArg[:2]...), unknown)...)
	if code != exitRejected || !strings.Contains(errs, "deliberation "+unknown+": the engine at "+s.NATSURL()+" does not know it") {
		t.Errorf("unknown: exit %d %q", code, errs)
	}
	code, _, errs = run(t, "", "watch", "--nats", "nats://"+freePort(t), unknown)
	if code != exitUsage || !strings.Contains(errs, "engine watch: connect to nats://") {
		t.Errorf("no engine: exit %d %q", code, errs)
	}
	code, _, errs = run(t, "", "watch", "not-a-uuid")
	if code != exitUsage || !strings.Contains(errs, "canonical UUID") {
		t.Errorf("bad id: exit %d %q", code, errs)
	}
	// A NATS server with no engine behind it: no responders, said so.
	ns := freeNATS(t)
	code, _, errs = run(t, "", "watch", "--nats", ns, unknown)
	if code != exitUsage || !strings.Contains(errs, "no engine answers its query API") {
		t.Errorf("no engine behind NATS: exit %d %q", code, errs)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the errors took %s", d)
	}
}

// freeNATS starts a NATS server with no engine behind it.
func freeNATS(t *testing.T) string {
	t.Helper()
	srv, err := embedded.Start(embedded.Config{Dir: t.TempDir(), Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { embedded.Stop(srv) })
	return srv.ClientURL()
}

// On an engine without its supervisor a cancelled deliberation gets no
// TERMINATION: the watch ends after --grace, and says why.
func TestWatch_NoSupervisor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", NoSupervisor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, _ := nats.Connect(s.NATSURL(), s.Participant())
	defer nc.Close()
	c, _ := client.New(nc, "alice")
	id, err := c.Open(ctx, client.Charter{Title: "no supervisor"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Cancel(ctx, id, "done"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, out, errs := run(t, "", "watch", "--nats", s.NATSURL(), "--data", s.DataDir(), "--grace", "1s", id)
	if code != 0 || !strings.Contains(out, "#2    control      cancel      done\n") || !strings.Contains(out, "ended: cancelled after 2 messages") ||
		!strings.Contains(out, "note: the deliberation ended with no TERMINATION on the record within --grace") {
		t.Errorf("exit %d %q %q", code, out, errs)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %s", d)
	}
}

// The ordinal is the engine's when its verdicts carry one; with an engine
// whose verdicts do not, the messages are counted from the applied open on.
func TestWatch_OrdinalOf(t *testing.T) {
	type step struct {
		kind string
		o    api.OutcomeReport
		want uint64 // 0: not one of the deliberation's messages
	}
	open := api.OutcomeReport{Outcome: api.VerdictApplied, Op: "open"}
	art := api.OutcomeReport{Outcome: api.VerdictAccepted}
	early := api.OutcomeReport{Outcome: api.VerdictRejected, Code: projector.CodeNotOpen}
	foreign := api.OutcomeReport{Outcome: api.VerdictRejected, Code: projector.CodeImporting}
	with := func(o api.OutcomeReport, n uint64) api.OutcomeReport { o.Ordinal = n; return o }
	for name, steps := range map[string][]step{
		"reported": {{"art", early, 0}, {"ctl", with(open, 1), 1}, {"art", with(art, 2), 2}, {"art", foreign, 0},
			{"art", with(early, 3), 3}, {"art", with(art, 4), 4}},
		"counted": {{"art", early, 0}, {"ctl", open, 1}, {"art", art, 2}, {"art", foreign, 0}, {"art", early, 3}, {"art", art, 4}},
	} {
		w := &watcher{}
		for i, s := range steps {
			got, ok := w.ordinalOf(s.kind, s.o)
			if ok != (s.want > 0) || got != s.want {
				t.Fatalf("%s: step %d: %d %v, want %d", name, i, got, ok, s.want)
			}
			if ok {
				w.ordinal = got
			}
		}
	}
}
