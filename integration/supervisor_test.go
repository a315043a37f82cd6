package integration

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// engineWith starts an in-process engine (embedded NATS) for a test.
func engineWith(t *testing.T, noSupervisor bool) (*service.Service, *nats.Conn) {
	t.Helper()
	return engineOn(t, noSupervisor, false)
}

// engineOn is engineWith on the record's layout, partitioned or not.
func engineOn(t *testing.T, noSupervisor, partitioned bool) (*service.Service, *nats.Conn) {
	t.Helper()
	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", NoSupervisor: noSupervisor,
		Partitioned: partitioned})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return s, nc
}

// operatorConn connects to an in-process engine as the operator user it
// generated: what publishes a recording's (or a second supervisor's)
// _supervisor messages on the embedded default.
func operatorConn(t *testing.T, s *service.Service) *nats.Conn {
	t.Helper()
	c := s.Credentials()
	nc, err := nats.Connect(c.NATSURL, nats.UserInfo(c.NATSUser, c.NATSPassword))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func waitState(t *testing.T, c *client.Client, id string, ok func(api.View) bool) api.View {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		v, err := c.State(context.Background(), id)
		if err == nil && ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("state never came: %+v (%v)", v, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Tried as a user would: a hidden blocking objection is caught live (a
// FAILURE) and offline (engine closure over a recording); a budget-limited
// deliberation ends exhausted with its open objections named; a stalled one
// ends deadlock.
func TestSupervisor_Live(t *testing.T) {
	s, nc := engineWith(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice, _ := client.New(nc, "alice")
	bob, _ := client.New(nc, "bob")

	// Hidden objection.
	id, _ := alice.Open(ctx, client.Charter{Title: "hidden"})
	c, _, _ := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "ship it"}})
	o, _, _ := bob.Publish(ctx, id, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "untested", Blocking: true},
		References: []events.Reference{{Target: c.ID, Relation: events.ObjectsTo}}})
	d, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "ship", Status: events.Final},
		References: []events.Reference{{Target: c.ID, Relation: events.Decides}}})
	if err != nil {
		t.Fatal(err)
	}
	v := waitState(t, alice, id, func(v api.View) bool { return v.Counts[events.TypeFailure] == 1 })
	if v.Status != api.StatusOpen || len(v.OpenBlockingObjections) != 1 {
		t.Errorf("after the failure: %+v", v)
	}
	res, err := s.Queries.Closure(id, d.ID.String(), 0)
	if err != nil || res.OK || res.Findings[0].Code != closure.CodeHidden || res.Findings[0].ArtifactID != o.ID.String() {
		t.Errorf("live closure: %v %+v", err, res)
	}
	// Offline: a recording of the deliberation, verified by engine closure.
	rec := record(t, nc, id)
	out, err := exec.Command(engineBin, "closure", "--decision", d.ID.String(), rec).Output()
	var off closure.Result
	json.Unmarshal(out, &off)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || off.OK || off.Findings[0].Code != closure.CodeHidden {
		t.Errorf("offline closure: %v %s", err, out)
	}

	// Budget.
	id2, _ := alice.Open(ctx, client.Charter{Title: "budget", Limits: map[string]any{"budget_tokens": 1000}})
	c2, _, _ := alice.Publish(ctx, id2, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "expensive"},
		Extensions: map[string]any{"parley.usage": map[string]int{"input_tokens": 700, "output_tokens": 400}}})
	o2, _, _ := bob.Publish(ctx, id2, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "too expensive", Blocking: true},
		References: []events.Reference{{Target: c2.ID, Relation: events.ObjectsTo}}})
	v = waitState(t, alice, id2, func(v api.View) bool { return v.Status == api.StatusExhausted })
	if len(v.Terminations) != 1 || v.Counts[events.TypeFailure] != 1 {
		t.Errorf("exhausted: %+v", v)
	}
	term := fetch(t, s, id2, v.Terminations[0])
	if tp := term.TerminationPayload(); tp == nil || len(tp.UnresolvedObjections) != 1 || tp.UnresolvedObjections[0] != o2.ID {
		t.Errorf("the exhausted TERMINATION does not name the open objection: %s", term.Canonical)
	}

	// Stall.
	id3, _ := alice.Open(ctx, client.Charter{Title: "stall", Limits: map[string]any{"stall_window": 3}})
	c3, _, _ := alice.Publish(ctx, id3, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "x"}})
	for i := 0; i < 3; i++ {
		bob.Publish(ctx, id3, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "no " + string(rune('a'+i)), Blocking: i == 0},
			References: []events.Reference{{Target: c3.ID, Relation: events.ObjectsTo}}})
	}
	waitState(t, alice, id3, func(v api.View) bool { return v.Status == api.StatusDeadlock })
}

// record writes a deliberation's artifacts, in stream order, as the JSONL
// recording engine closure reads.
func record(t *testing.T, nc *nats.Conn, id string) string {
	t.Helper()
	p := replay(t, nc)
	d := p.Deliberation(id)
	var last uint64
	d.Nodes(func(_ canon.Digest, n projector.Node) { last = max(last, n.Seq) })
	msgs := readStream(t, nc, last)
	var lines []string
	d.Nodes(func(_ canon.Digest, n projector.Node) {
		m, ok := msgs[n.Seq]
		if !ok {
			t.Fatalf("no message at %d", n.Seq)
		}
		lines = append(lines, string(m.Data))
	})
	f := t.TempDir() + "/recording.jsonl"
	if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func fetch(t *testing.T, s *service.Service, delib string, id canon.Digest) *events.Artifact {
	t.Helper()
	b, err := s.Queries.Artifact(context.Background(), delib, id.String())
	if err != nil {
		t.Fatal(err)
	}
	a, err := events.Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A resolving artifact arrives while a deadlock is being judged: the
// supervisor's publish is refused, it judges again, and no TERMINATION
// (nor FAILURE) is written.
func TestSupervisor_Race(t *testing.T) {
	s, nc := engineWith(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice, _ := client.New(nc, "alice")
	bob, _ := client.New(nc, "bob")
	id, _ := alice.Open(ctx, client.Charter{Title: "race", Limits: map[string]any{"idle_timeout": "1h"}})
	c, _, _ := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "x"}})
	o, ack, _ := bob.Publish(ctx, id, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "no", Blocking: true},
		References: []events.Reference{{Target: c.ID, Relation: events.ObjectsTo}}})
	s.Runner.WaitFor(ctx, ack.Sequence)

	sup := s.Supervisor
	jobs := sup.Judge(time.Now().Add(2 * time.Hour)) // idle for two hours: deadlock
	if len(jobs) != 1 || len(jobs[0].Emissions) != 2 {
		t.Fatalf("judged %+v", jobs)
	}
	// The resolving artifact lands between the judgment and the publish.
	_, ack, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "narrow the claim", Status: events.Provisional,
		ObjectionDispositions: []events.Disposition{{Objection: o.ID, Disposition: events.Addressed, Rationale: "narrowed"}}},
		References: []events.Reference{{Target: c.ID, Relation: events.Decides}}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := sup.Publish(ctx, jobs[0])
	if n != 0 || !errors.Is(err, runner.ErrSuperseded) {
		t.Fatalf("published %d: %v", n, err)
	}
	s.Runner.WaitFor(ctx, ack.Sequence)
	// Judged again, now: the deliberation is active again (the decision
	// that landed is a judgment, which only a checkpoint follows).
	for _, j := range sup.Judge(time.Now()) {
		if len(j.Emissions) != 0 || j.Checkpoint == nil {
			t.Fatalf("judged again: %+v", j)
		}
	}
	v, _ := s.Queries.Get(id)
	if v.Status != api.StatusOpen || len(v.Terminations) != 0 || v.Counts[events.TypeFailure] != 0 {
		t.Errorf("after the race: %+v", v)
	}
}

// Two supervisors at once, and one that crashes between its FAILURE and its
// TERMINATION: each emission is in the record exactly once.
func TestSupervisor_DoubleRunAndCrash(t *testing.T) {
	s, nc := engineWith(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice, _ := client.New(nc, "alice")
	ojs, _ := jetstream.New(operatorConn(t, s))
	other := runner.NewSupervisor(s.Runner, ojs, nil) // a second supervisor, its own connection

	for _, mode := range []string{"double", "crash"} {
		id, _ := alice.Open(ctx, client.Charter{Title: mode, Limits: map[string]any{"max_artifacts": 2}})
		c, _, _ := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: mode + " 1"}})
		_, ack, _ := alice.Publish(ctx, id, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "no", Blocking: true},
			References: []events.Reference{{Target: c.ID, Relation: events.ObjectsTo}}})
		s.Runner.WaitFor(ctx, ack.Sequence)
		switch mode {
		case "double":
			done := make(chan int, 2)
			go func() { done <- s.Supervisor.Step(ctx) }()
			go func() { done <- other.Step(ctx) }()
			<-done
			<-done
		case "crash":
			// (The other deliberation may have a checkpoint due.)
			var jobs []runner.Job
			for _, j := range s.Supervisor.Judge(time.Now()) {
				if j.Deliberation == id {
					jobs = append(jobs, j)
				}
			}
			if len(jobs) != 1 || len(jobs[0].Emissions) != 2 {
				t.Fatalf("judged %+v", jobs)
			}
			crashed := jobs[0]
			crashed.Emissions = crashed.Emissions[:1] // the FAILURE, then the crash
			if n, err := s.Supervisor.Publish(ctx, crashed); n != 1 || err != nil {
				t.Fatalf("%d %v", n, err)
			}
			info, _ := s.Stream.Info(ctx)
			s.Runner.WaitFor(ctx, info.State.LastSeq)
			other.Step(ctx) // the restarted supervisor
		}
		// Let both finish anything left, then count.
		for i := 0; i < 3; i++ {
			s.Supervisor.Step(ctx)
			other.Step(ctx)
		}
		info, _ := s.Stream.Info(ctx)
		s.Runner.WaitFor(ctx, info.State.LastSeq)
		v, _ := s.Queries.Get(id)
		rej, _ := s.Queries.Rejections(id)
		if v.Status != api.StatusExhausted || v.Counts[events.TypeFailure] != 1 || v.Counts[events.TypeTermination] != 1 || rej.ByCode[projector.CodeDuplicate] != 0 {
			t.Errorf("%s: %+v, rejections %v", mode, v, rej.ByCode)
		}
		// The stream itself holds each emission once.
		// Read as a participant reads (no pulls), up to the stream's end.
		rd, err := ledger.Read(ctx, nc, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for pos := uint64(0); pos < info.State.LastSeq; {
			m, err := rd.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			meta, _ := m.Metadata()
			pos = meta.Sequence.Stream
			if m.Subject == wire.ArtifactSubject(id, wire.SupervisorToken) {
				n++
			}
		}
		rd.Stop()
		if n != 2 {
			t.Errorf("%s: %d supervisor messages in the stream, want 2", mode, n)
		}
	}
}
