package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

// hostile is a deployment on deploy/nats.conf: the engine with its own
// user, and participants who log in as themselves.
type hostile struct {
	t *testing.T
	s *service.Service
}

func startHostile(t *testing.T) *hostile {
	t.Helper()
	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0",
		NATSConfig: "../deploy/nats.conf", User: "engine", Password: "change-me-engine"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &hostile{t: t, s: s}
}

// login connects as user (deploy/nats.conf's passwords) and returns a
// client publishing as token.
func (h *hostile) login(user, token string) (*client.Client, *nats.Conn, jetstream.JetStream) {
	h.t.Helper()
	nc, err := nats.Connect(h.s.NATSURL(), nats.UserInfo(user, "change-me-"+user))
	if err != nil {
		h.t.Fatalf("%s: %v", user, err)
	}
	h.t.Cleanup(nc.Close)
	c, err := client.New(nc, token)
	if err != nil {
		h.t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	return c, nc, js
}

// projected waits until the engine has applied position seq and returns
// the deliberation then.
func (h *hostile) projected(ctx context.Context, id string, seq uint64) api.View {
	h.t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := h.s.Runner.WaitFor(wctx, seq); err != nil {
		h.t.Fatal(err)
	}
	v, err := h.s.Queries.Get(id)
	if err != nil {
		h.t.Fatal(err)
	}
	return v
}

func (h *hostile) rejection(id string, seq uint64) string {
	list, err := h.s.Queries.Rejections(id)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, r := range list.Rejections {
		if r.Position == seq {
			return r.Code
		}
	}
	return ""
}

// The attacks of issue "the record holds against its own participants",
// each tried as a participant logged in with deploy/nats.conf would, each
// refused: alice ends the deliberation over bob's open blocking objection
// with her own TERMINATION, bob cancels it with his, alice squats the
// dedupe ids of bob's next artifact, of the orchestrator's next round and
// of the supervisor's completion. The status never changes but through the
// supervisor; bob's artifact and the round are in the record; the audit of
// the exported recording exits 1 naming the refused ends.
func TestAttacks_HostileParticipants(t *testing.T) {
	h := startHostile(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	orch, _, _ := h.login("orchestrator", "relay")
	alice, aliceNC, aliceJS := h.login("alice", "alice")
	bob, _, _ := h.login("bob", "bob")
	id, err := orch.Open(ctx, client.Charter{Title: "Adopt the cache?", Participants: []string{"alice", "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	claim, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The cache halves p99."}})
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := bob.Publish(ctx, id, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "One workload only.", Blocking: true},
		References: []events.Reference{{Target: claim.ID, Relation: events.ObjectsTo}}})
	if err != nil {
		t.Fatal(err)
	}
	hiding, ack, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "adopt", Status: events.Final},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}}})
	if err != nil {
		t.Fatal(err)
	}
	// The supervisor answers the hiding decision with a FAILURE.
	deadline := time.Now().Add(15 * time.Second)
	for v := h.projected(ctx, id, ack.Sequence); v.Counts[events.TypeFailure] == 0; v = h.projected(ctx, id, ack.Sequence) {
		if time.Now().After(deadline) {
			t.Fatalf("no supervisor FAILURE: %+v", v)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// 1. Self-termination: alice completes her own decision, bob cancels.
	for _, tc := range []struct {
		who *client.Client
		d   events.Draft
	}{
		{alice, events.Draft{Type: events.TypeTermination, Payload: events.Termination{State: events.Completed, Reason: "done"},
			References: []events.Reference{{Target: hiding.ID, Relation: events.Decides}}}},
		{bob, events.Draft{Type: events.TypeTermination, Payload: events.Termination{State: events.Cancelled, Reason: "bored"}}},
	} {
		_, ack, err := tc.who.Publish(ctx, id, tc.d)
		if err != nil {
			t.Fatal(err)
		}
		v := h.projected(ctx, id, ack.Sequence)
		if code := h.rejection(id, ack.Sequence); code != projector.CodeTerminationUnauthorized || v.Status != api.StatusOpen || len(v.OpenBlockingObjections) != 1 {
			t.Fatalf("%s's TERMINATION: rejection %q, status %s, open %v", tc.who.Participant(), code, v.Status, v.OpenBlockingObjections)
		}
	}

	// 3. Dedupe squatting. alice reads the ids of what is stored (she may:
	// participants read the stream) and stores junk on her own subject
	// under every id she can think of for bob's next artifact, the
	// orchestrator's next round and the supervisor's completion.
	var seen []string
	for _, m := range readStream(t, aliceNC, ack.Sequence) {
		if id := m.Header.Get(jetstream.MsgIDHeader); id != "" {
			seen = append(seen, id)
		}
	}
	if len(seen) < 3 {
		t.Fatalf("alice saw %d ids", len(seen))
	}
	bobsNext := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "And the cost?", Blocking: false},
		References: []events.Reference{{Target: hiding.ID, Relation: events.ObjectsTo}}})
	fixed := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "adopt after a second workload", Status: events.Final,
		ObjectionDispositions: []events.Disposition{{Objection: obj.ID, Disposition: events.Addressed, Rationale: "measured on two workloads"}}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}, {Target: obj.ID, Relation: events.Considers}}})
	guesses := append(seen, id+":"+bobsNext.ID.String(), id+":round-2", id+":"+fixed.ID.String())
	squat := func(ids ...string) {
		for _, g := range ids {
			if _, err := aliceJS.Publish(ctx, wire.ArtifactSubject(id, "alice"), []byte("junk"), jetstream.WithMsgID(g)); err != nil {
				t.Fatal(err)
			}
		}
	}
	squat(guesses...)
	nack, err := bob.PublishArtifact(ctx, id, bobsNext)
	if err != nil {
		t.Fatal(err)
	}
	if nack.Duplicate {
		t.Fatal("bob's objection was taken for a duplicate of alice's junk")
	}
	if err := orch.Round(ctx, id, 2); err != nil {
		t.Fatal(err)
	}
	// The supervisor's completion, as its rules will make it once the
	// fixed decision is in (alice can fold the stream too): squatted
	// under the old predictable id (the junk is the next message, the
	// fixed decision the one after).
	eventually(t, "round 2 projected", func() bool { return h.projected(ctx, id, nack.Sequence).Round == 2 })
	var messages int
	h.s.Runner.ReadDeliberation(id, func(d *projector.Deliberation) { messages = d.Messages() })
	completion := events.MustSeal(events.Draft{Type: events.TypeTermination,
		Payload:    events.Termination{State: events.Completed, Reason: fmt.Sprintf("the final decision in message %d verifies", messages+2)},
		References: []events.Reference{{Target: fixed.ID, Relation: events.Decides}}})
	squat(id + ":" + completion.ID.String())
	fack, err := alice.PublishArtifact(ctx, id, fixed)
	if err != nil {
		t.Fatal(err)
	}
	v := h.projected(ctx, id, fack.Sequence)
	if v.Round != 2 || v.Participants["bob"] != 2 {
		t.Fatalf("round %d, bob's artifacts %d: the squatting worked", v.Round, v.Participants["bob"])
	}
	// The supervisor completes through the fixed decision, with the very
	// TERMINATION alice squatted.
	deadline = time.Now().Add(15 * time.Second)
	for v.Status != api.StatusCompleted {
		if time.Now().After(deadline) {
			t.Fatalf("status %s", v.Status)
		}
		time.Sleep(50 * time.Millisecond)
		v = h.projected(ctx, id, fack.Sequence)
	}
	if len(v.Terminations) != 1 || v.Terminations[0] != completion.ID {
		t.Fatalf("terminations %v, squatted %s", v.Terminations, completion.ID)
	}

	// 2. The audit of the recording names the refused ends and exits 1.
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	cmd := exec.Command(engineBin, "export", "--nats", h.s.NATSURL(), "--user", "admin", "--password", "change-me-admin", "--deliberation", id, "--out", rec)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	out, err := exec.Command(engineBin, "audit", rec).Output()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 || !strings.HasPrefix(string(out), "audit        FINDINGS") || strings.Count(string(out), "audit.unjustified_end") != 2 ||
		!strings.Contains(string(out), "status       completed") {
		t.Fatalf("audit: %v\n%s", err, out)
	}
	_ = os.Remove(rec)
}

// A supervisor artifact its rules would not emit is refused live, even
// from the engine's own credentials (a stale or second supervisor, or
// stolen credentials): a forged TERMINATION exhausted does not end a
// healthy deliberation, and a forged FAILURE judging a decision does not
// stop the real supervisor from completing it.
func TestAttacks_ForgedSupervisorRefusedLive(t *testing.T) {
	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", NoSupervisor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, _ := jetstream.New(s.Conn())
	pnc, err := nats.Connect(s.NATSURL(), s.Participant()) // a participant: the engine's own user publishes only what the engine does
	if err != nil {
		t.Fatal(err)
	}
	defer pnc.Close()
	orch, _ := client.New(pnc, "relay")
	id, err := orch.Open(ctx, client.Charter{Title: "healthy"})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := orch.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The cache halves p99."}})
	if err != nil {
		t.Fatal(err)
	}
	dec, _, err := orch.Publish(ctx, id, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "adopt", Status: events.Final},
		References: []events.Reference{{Target: c.ID, Relation: events.Decides}}})
	if err != nil {
		t.Fatal(err)
	}
	super := wire.ArtifactSubject(id, wire.SupervisorToken)
	for _, forged := range []*events.Artifact{
		events.MustSeal(events.Draft{Type: events.TypeTermination, Payload: events.Termination{State: events.Exhausted, Reason: "exhausted.budget: forged"}}),
		events.MustSeal(events.Draft{Type: events.TypeFailure, Payload: events.Failure{Code: "closure.hidden_blocking_objection", Description: "forged"},
			References: []events.Reference{{Target: dec.ID, Relation: events.Considers}}}),
	} {
		ack, err := js.Publish(ctx, super, forged.Canonical)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Runner.WaitFor(ctx, ack.Sequence); err != nil {
			t.Fatal(err)
		}
		v, _ := s.Queries.Get(id)
		list, _ := s.Queries.Rejections(id)
		last := list.Rejections[len(list.Rejections)-1]
		if v.Status != api.StatusOpen || last.Position != ack.Sequence || last.Code != projector.CodeSupervisorUnjustified {
			t.Fatalf("forged %s: status %s, rejection %+v", forged.Type, v.Status, last)
		}
	}
	// The real supervisor's rules still call for the completion.
	var es []termination.Emission
	s.Runner.ReadDeliberation(id, func(d *projector.Deliberation) { es = termination.Decide(d, time.Now()) })
	if len(es) != 1 || es[0].Artifact.TerminationPayload() == nil || es[0].Artifact.TerminationPayload().State != events.Completed {
		t.Fatalf("the supervisor decides %+v", es)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.Supervisor.Step(ctx)
		v, _ := s.Queries.Get(id)
		if v.Status == api.StatusCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %s", v.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
