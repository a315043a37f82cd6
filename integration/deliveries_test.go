package integration

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/wire"
)

// metricValue reads one sample of the engine's /metrics.
func (h *hostile) metricValue(sample string) float64 {
	h.t.Helper()
	resp, err := http.Get("http://" + h.s.HTTPAddr() + "/metrics")
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// eventually waits, up to 10 s, until ok holds.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// pullOnto asks the consumer for batch messages, with the request's reply
// subject, which is where the server delivers them, set to onto.
func pullOnto(t *testing.T, nc *nats.Conn, consumer, onto string, batch int) {
	t.Helper()
	m := nats.NewMsg("$JS.API.CONSUMER.MSG.NEXT." + wire.StreamName + "." + consumer)
	m.Reply = onto
	m.Data = []byte(`{"batch":` + strconv.Itoa(batch) + `,"no_wait":true}`)
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// Attack: alice (deploy/nats.conf: she may publish only as herself) has
// the NATS server deliver stream messages onto subjects only the engine
// publishes on or serves. She stores a forged binding announcement (a
// well-formed one, with a real envelope and its digest) and a query-shaped
// body as her own artifacts (the projector rejects both), then has them
// delivered onto parley.<id>.binding and parley.api.deliberation by push
// consumers whose deliver subject is there (she may not pull:
// TestAttacks_PullOntoStreamSubjects); and asks the query API with reply
// subjects on the binding subject and the principal's artifact subject.
// Her push consumers deliver until the engine deletes them, milliseconds
// later; the same deliveries are made here, without that race, by the
// admin's pull requests whose reply subject is there. The server delivers
// (a raw subscriber sees it); the engine's query service never answers a
// delivery (it would acknowledge it: the consumer's pending count stays)
// nor a request with such a reply subject, and counts both;
// client.SubscribeBindings never hands on a delivery; the engine deletes
// both push consumers; nothing is stored as the principal. A real binding
// moment still reaches the subscriber.
func TestAttacks_DeliveriesOntoEngineSubjects(t *testing.T) {
	h := startHostile(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	orch, _, _ := h.login("orchestrator", "relay")
	alice, aliceNC, aliceJS := h.login("alice", "alice")
	_, adminNC, _ := h.login("admin", "admin")
	id, err := orch.Open(ctx, client.Charter{Title: "Share with the booking service?"})
	if err != nil {
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
	var env *binding.Envelope
	for _, v := range envs.Vectors {
		if v.Name == "seed002-6.4" {
			env, err = binding.ParseEnvelope(v.Input)
		}
	}
	if env == nil || err != nil {
		t.Fatalf("envelope: %v", err)
	}
	forged, _ := json.Marshal(map[string]any{"deliberation": id, "decision": "sha256:" + strings.Repeat("ab", 32), "decider": "judge",
		"position": 1, "envelope_digest": env.Digest.String(), "envelope": json.RawMessage(env.Canonical)})
	aliceSubject := wire.ArtifactSubject(id, "alice")
	forgedAck, err := aliceJS.Publish(ctx, aliceSubject, forged)
	if err != nil {
		t.Fatal(err)
	}
	query, err := aliceJS.Publish(ctx, aliceSubject, []byte(`{"id":"`+id+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	h.projected(ctx, id, query.Sequence)

	// The renderer's subscription, and a raw one that shows what the
	// server delivers.
	var announced atomic.Int64
	var got atomic.Value
	subs, err := client.SubscribeBindings(adminNC, id, func(a binding.Announcement) { announced.Add(1); got.Store(a) })
	if err != nil {
		t.Fatal(err)
	}
	defer subs.Unsubscribe()
	raw, _ := adminNC.SubscribeSync(wire.BindingSubject(id))
	adminNC.Flush()

	// 1. A delivery of the forged announcement onto the binding subject.
	if _, err := aliceJS.CreateConsumer(ctx, wire.StreamName, jetstream.ConsumerConfig{Name: "onto-binding", AckPolicy: jetstream.AckExplicitPolicy,
		FilterSubject: aliceSubject, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: forgedAck.Sequence}); err != nil {
		t.Fatal(err)
	}
	pullOnto(t, adminNC, "onto-binding", wire.BindingSubject(id), 1)
	m, err := raw.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("the server did not deliver: %v", err)
	}
	if string(m.Data) != string(forged) || !strings.HasPrefix(m.Reply, "$JS.ACK.") {
		t.Fatalf("delivered %q reply %q", m.Data, m.Reply)
	}
	eventually(t, "the subscriber drops the delivery", func() bool { return subs.Dropped() >= 1 })
	if n := announced.Load(); n != 0 {
		t.Fatalf("the subscriber took %d deliveries for announcements", n)
	}

	// 2. A delivery of the query-shaped body onto the query API: the
	// engine does not answer (an answer would acknowledge it).
	before := h.metricValue(`parley_ignored_messages_total{reason="jetstream_delivery"}`)
	api, err := aliceJS.CreateConsumer(ctx, wire.StreamName, jetstream.ConsumerConfig{Name: "onto-api", AckPolicy: jetstream.AckExplicitPolicy,
		FilterSubject: aliceSubject, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: query.Sequence})
	if err != nil {
		t.Fatal(err)
	}
	pullOnto(t, adminNC, "onto-api", wire.MicroPrefix+".deliberation", 1)
	eventually(t, "the engine counts the delivery", func() bool {
		return h.metricValue(`parley_ignored_messages_total{reason="jetstream_delivery"}`) > before
	})
	api, err = h.s.Stream.Consumer(ctx, api.CachedInfo().Name) // participants may not read a consumer's info
	if err != nil {
		t.Fatal(err)
	}
	info := api.CachedInfo()
	if info.Delivered.Stream != query.Sequence || info.NumAckPending != 1 || info.AckFloor.Stream >= query.Sequence {
		t.Fatalf("the engine answered the delivery: delivered %d, ack pending %d, ack floor %d", info.Delivered.Stream, info.NumAckPending, info.AckFloor.Stream)
	}

	// 3. Requests whose reply subject is the binding subject, or the
	// principal's artifacts: not answered.
	beforeReply := h.metricValue(`parley_ignored_messages_total{reason="reply_subject"}`)
	principal := wire.ArtifactSubject(id, wire.PrincipalToken)
	for _, reply := range []string{wire.BindingSubject(id), principal} {
		r := nats.NewMsg(wire.MicroPrefix + ".deliberation")
		r.Reply, r.Data = reply, []byte(`{"id":"`+id+`"}`)
		if err := aliceNC.PublishMsg(r); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the engine counts the requests", func() bool {
		return h.metricValue(`parley_ignored_messages_total{reason="reply_subject"}`) >= beforeReply+2
	})

	// 4. Push consumers delivering there: the engine deletes them.
	removed := h.metricValue("parley_consumers_removed_total")
	for _, c := range []struct{ name, onto string }{{"push-api", wire.MicroPrefix + ".deliberation"}, {"push-binding", wire.BindingSubject(id)}} {
		if _, err := aliceJS.CreateOrUpdatePushConsumer(ctx, wire.StreamName, jetstream.ConsumerConfig{Name: c.name, DeliverSubject: c.onto,
			AckPolicy: jetstream.AckNonePolicy, FilterSubject: aliceSubject}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	for _, name := range []string{"push-api", "push-binding"} {
		eventually(t, "the engine deletes "+name, func() bool {
			_, err := h.s.Stream.PushConsumer(ctx, name)
			return errors.Is(err, jetstream.ErrConsumerNotFound)
		})
	}
	// The engine counts a deletion once the server has made it (the
	// consumer is gone before the count moves).
	eventually(t, "parley_consumers_removed_total counts both deletions", func() bool {
		return h.metricValue("parley_consumers_removed_total") >= removed+2
	})
	// A pull consumer stays.
	if _, err := h.s.Stream.Consumer(ctx, "onto-api"); err != nil {
		t.Errorf("the pull consumer is gone: %v", err)
	}

	// Whatever reached the binding subject was the server's delivery, and
	// none was handed on; nothing was stored as the principal.
	adminNC.Flush()
	for {
		m, err := raw.NextMsg(10 * time.Millisecond)
		if err != nil {
			break
		}
		if !strings.HasPrefix(m.Reply, "$JS.ACK.") {
			t.Errorf("the engine answered onto the binding subject: %s", m.Data)
		}
	}
	if n := announced.Load(); n != 0 {
		t.Fatalf("the subscriber took %d deliveries for announcements", n)
	}
	if _, err := h.s.Stream.GetLastMsgForSubject(ctx, principal); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("a message as the principal: %v", err)
	}

	// A real binding moment reaches the subscriber.
	claim, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Share the dates only."}})
	if err != nil {
		t.Fatal(err)
	}
	dec, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeDecision,
		Payload:    events.Decision{Outcome: "Ask the principal.", Status: events.Provisional, ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}},
		Extensions: map[string]any{binding.ExtEnvelope: json.RawMessage(env.Canonical)}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the announcement", func() bool { return announced.Load() == 1 })
	if a := got.Load().(binding.Announcement); a.Decision != dec.ID || a.Decider != "alice" || a.Parsed == nil || a.Parsed.Digest != env.Digest {
		t.Errorf("announcement %+v", a)
	}
}

// Attack: NATS lets whoever sends a request choose its reply subject, and
// a pull request's messages, and the status the server answers it with,
// are delivered there. alice (deploy/nats.conf: she may publish only as
// herself) uses pull consumers to have the server publish onto stream
// subjects she may not publish on:
//
//   - a copy of the orchestrator's suspend, pulled onto the deliberation's
//     control subject after the orchestrator resumed it: the stream
//     stores the copy and the deliberation is suspended again;
//   - the status of an empty pull ("404 No Messages"), pulled onto the
//     principal's, the importer's, the supervisor's and the control
//     subjects: the stream stores an empty message under each;
//   - her own cancel, final DECISION, artifact with forged import headers
//     and TERMINATION (stored without a dedupe id), pulled onto the
//     control, principal's, importer's and supervisor's subjects (nats-
//     server v2.15.2 stores such a copy under the message's own subject;
//     stored under the reply subject, it would be a forgery).
//
// Participants may not pull: each request is a permissions violation;
// the control subject holds the orchestrator's three messages, the
// reserved subjects nothing, alice's subject only what she published, and
// the deliberation is open. A push consumer delivering onto a stream
// subject is refused by the server, and alice still reads the stream,
// with an ordered push consumer.
func TestAttacks_PullOntoStreamSubjects(t *testing.T) {
	h := startHostile(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	orch, _, _ := h.login("orchestrator", "relay")
	var mu sync.Mutex
	var violations []string
	aliceNC, err := nats.Connect(h.s.NATSURL(), nats.UserInfo("alice", "change-me-alice"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			mu.Lock()
			violations = append(violations, err.Error())
			mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer aliceNC.Close()
	aliceJS, _ := jetstream.New(aliceNC)
	violated := func(subject string) bool {
		want := `Permissions Violation for Publish to "` + subject + `"`
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			all := strings.Join(violations, "\n")
			mu.Unlock()
			if strings.Contains(all, want) {
				return true
			}
		}
		return false
	}
	consumers := 0
	pull := func(filter string, from uint64, onto string) {
		t.Helper()
		consumers++
		name := "pull-" + strconv.Itoa(consumers)
		if _, err := aliceJS.CreateConsumer(ctx, wire.StreamName, jetstream.ConsumerConfig{Name: name, AckPolicy: jetstream.AckExplicitPolicy,
			FilterSubject: filter, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from}); err != nil {
			t.Fatal(err)
		}
		pullOnto(t, aliceNC, name, onto, 1)
		if !violated("$JS.API.CONSUMER.MSG.NEXT." + wire.StreamName + "." + name) {
			t.Errorf("alice pulled onto %s", onto)
		}
	}

	id, err := orch.Open(ctx, client.Charter{Title: "Book the flight?"})
	if err != nil {
		t.Fatal(err)
	}
	ctl := wire.ControlSubject(id)
	if err := orch.Suspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	suspend, err := h.s.Stream.GetLastMsgForSubject(ctx, ctl)
	if err != nil {
		t.Fatal(err)
	}
	if err := orch.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}

	// 1. The orchestrator's suspend, again.
	pull(ctl, suspend.Sequence, ctl)

	// 2. Her own messages onto the reserved subjects, and an empty pull's
	// status onto each.
	aliceSubject := wire.ArtifactSubject(id, "alice")
	claim := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Book the 9:40."}})
	decision := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "Book the 9:40.", Status: events.Final,
		ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}}})
	termination := events.MustSeal(events.Draft{Type: events.TypeTermination, Payload: events.Termination{State: events.Completed, Reason: "forged"},
		References: []events.Reference{{Target: decision.ID, Relation: events.Decides}}})
	imported := nats.NewMsg(aliceSubject)
	imported.Data = decision.Canonical
	imported.Header.Set(wire.OriginalSubjectHeader, wire.ArtifactSubject(id, wire.PrincipalToken))
	imported.Header.Set(wire.OriginalPositionHeader, "2")
	imported.Header.Set(wire.OriginalTimeHeader, "2020-01-01T00:00:00Z")
	reserved := []string{wire.ArtifactSubject(id, wire.PrincipalToken), wire.ImportSubject(id), wire.ArtifactSubject(id, wire.SupervisorToken)}
	targets := []struct {
		onto string
		body *nats.Msg
	}{
		{ctl, &nats.Msg{Subject: aliceSubject, Data: []byte(`{"op":"cancel","reason":"forged"}`)}},
		{reserved[0], &nats.Msg{Subject: aliceSubject, Data: decision.Canonical}},
		{reserved[1], imported},
		{reserved[2], &nats.Msg{Subject: aliceSubject, Data: termination.Canonical}},
	}
	var last uint64
	for _, tc := range targets {
		ack, err := aliceJS.PublishMsg(ctx, tc.body)
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
		pull(aliceSubject, ack.Sequence, tc.onto)
	}
	for _, onto := range append([]string{ctl}, reserved...) {
		pull(aliceSubject, last+1000, onto)
	}

	info, err := h.s.Stream.Info(ctx, jetstream.WithSubjectFilter(wire.DeliberationFilter(id)))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[ctl]; n != 3 {
		t.Errorf("%d control messages, want the orchestrator's 3", n)
	}
	if n := info.State.Subjects[aliceSubject]; n != uint64(len(targets)) {
		t.Errorf("%d messages on alice's subject, want the %d she published", n, len(targets))
	}
	for _, s := range reserved {
		if n := info.State.Subjects[s]; n != 0 {
			t.Errorf("%d messages on %s", n, s)
		}
	}
	if len(info.State.Subjects) != 2 {
		t.Errorf("subjects %v", info.State.Subjects)
	}
	if v := h.projected(ctx, id, info.State.LastSeq); v.Status != api.StatusOpen {
		t.Errorf("the deliberation is %s", v.Status)
	}

	// A push consumer may not deliver onto a stream subject.
	_, err = aliceJS.CreateOrUpdatePushConsumer(ctx, wire.StreamName, jetstream.ConsumerConfig{Name: "push-onto-principal",
		DeliverSubject: reserved[0], AckPolicy: jetstream.AckNonePolicy, FilterSubject: aliceSubject})
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10081 { // JSConsumerDeliverCycleErr
		t.Errorf("a push consumer onto the principal's subject: %v", err)
	}

	// alice still reads the stream: an ordered push consumer.
	got := readStream(t, aliceNC, last)
	if m := got[last]; m == nil || string(m.Data) != string(termination.Canonical) || m.Subject != aliceSubject {
		t.Errorf("alice read %v", m)
	}
}
