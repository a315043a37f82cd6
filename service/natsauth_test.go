package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/natsconn"
	"github.com/parley-engine/parley/partition"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// outsider is a client of the embedded default over a real TCP connection,
// recording the permission violations the server reports to it.
type outsider struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	mu   sync.Mutex
	errs []string
}

func connectOutsider(t *testing.T, url string, opts ...nats.Option) *outsider {
	t.Helper()
	o := &outsider{}
	opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		o.mu.Lock()
		o.errs = append(o.errs, err.Error())
		o.mu.Unlock()
	}))
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	o.nc = nc
	o.js, _ = jetstream.New(nc, jetstream.WithDefaultTimeout(2*time.Second))
	return o
}

// violated reports whether the server told o that publishing on subject
// is not permitted.
func (o *outsider) violated(subject string) bool {
	return eventually.Within(10*time.Second, func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return strings.Contains(strings.Join(o.errs, "\n"), `Permissions Violation for Publish to "`+subject+`"`)
	})
}

// violatedPrefix reports whether the server refused the outsider a
// publish on a subject beginning with prefix.
func (o *outsider) violatedPrefix(prefix string) bool {
	return eventually.Within(10*time.Second, func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return strings.Contains(strings.Join(o.errs, "\n"), `Permissions Violation for Publish to "`+prefix)
	})
}

// streamNames lists the streams of the engine's account, read with the
// engine's own connection.
func streamNames(t *testing.T, s *service.Service) []string {
	t.Helper()
	js, _ := jetstream.New(s.Conn())
	var out []string
	names := js.StreamNames(context.Background())
	for n := range names.Name() {
		out = append(out, n)
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Attack: a local process with no credentials forges the supervisor (a
// TERMINATION exhausted of a healthy deliberation), resolves as the
// principal, and erases or reconfigures the record through the JetStream
// API. On the embedded default, the server refuses every one of these
// publishes and nothing reaches the stream; the same client still opens a
// deliberation, publishes as alice and reads the state; the engine's own
// supervisor still publishes.
//
// On both layouts of the record: partitioned, the server checks the
// permissions on the mapped subjects (docs/SCALING.md), and a publish
// straight to a mapped subject is refused as well.
func TestEmbeddedDefault_RefusesReservedTokensAndStreamAdmin(t *testing.T) {
	for _, l := range []ledger.Layout{ledger.Unpartitioned, ledger.Partitioned} {
		t.Run(l.String(), func(t *testing.T) { refusesReservedTokensAndStreamAdmin(t, l) })
	}
}

func refusesReservedTokensAndStreamAdmin(t *testing.T, l ledger.Layout) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", SnapshotEvery: 50 * time.Millisecond,
		Partitioned: l.Partitioned()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Runner.Layout(); got != l {
		t.Fatalf("the engine reads the %s record", got)
	}
	if !strings.HasPrefix(s.NATSURL(), "nats://127.0.0.1:") {
		t.Fatalf("NATS URL %s", s.NATSURL())
	}
	o := connectOutsider(t, s.NATSURL(), s.Participant())
	alice, _ := client.New(o.nc, "alice")
	id, err := alice.Open(ctx, client.Charter{Title: "Adopt the cache?"})
	if err != nil {
		t.Fatalf("a participant cannot open a deliberation: %v", err)
	}
	claim, ack, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The cache halves p99."}})
	if err != nil {
		t.Fatalf("a participant cannot publish as alice: %v", err)
	}
	if _, err := alice.WaitPosition(ctx, id, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	claimSeq := ack.Sequence
	before, err := s.Stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The forgeries.
	forged := events.MustSeal(events.Draft{Type: events.TypeTermination, Payload: events.Termination{State: events.Exhausted, Reason: "forged"},
		References: []events.Reference{{Target: claim.ID, Relation: events.Considers}}})
	for _, tok := range []string{wire.SupervisorToken, wire.PrincipalToken} {
		subject := wire.ArtifactSubject(id, tok)
		short, cancel := context.WithTimeout(ctx, time.Second)
		_, err := o.js.Publish(short, subject, forged.Canonical)
		cancel()
		if err == nil {
			t.Errorf("published as %s", tok)
		}
		if !o.violated(l.Stored(subject)) {
			t.Errorf("no permissions violation for %s", l.Stored(subject))
		}
	}
	if l.Partitioned() {
		// Straight to a mapped subject, one's own included: mapped to
		// partition.Refused, which nobody may publish on.
		for _, tok := range []string{wire.SupervisorToken, "alice"} {
			subject := l.Stored(wire.ArtifactSubject(id, tok))
			short, cancel := context.WithTimeout(ctx, time.Second)
			_, err := o.js.Publish(short, subject, forged.Canonical)
			cancel()
			if err == nil {
				t.Errorf("published straight to %s", subject)
			}
		}
		if !o.violated(partition.Refused) {
			t.Errorf("no permissions violation for %s", partition.Refused)
		}
	}
	// The stream's administration: delete, purge, update, delete a
	// message, create another stream; the leases' bucket.
	cfg := ledger.StreamConfig(1)
	cfg.MaxMsgs = 1
	update, _ := json.Marshal(cfg)
	for _, req := range []struct{ subject, body string }{
		{"$JS.API.STREAM.DELETE." + l.Stream(), ""},
		{"$JS.API.STREAM.PURGE." + l.Stream(), "{}"},
		{"$JS.API.STREAM.UPDATE." + l.Stream(), string(update)},
		{"$JS.API.STREAM.MSG.DELETE." + l.Stream(), `{"seq":1}`},
		{"$JS.API.STREAM.CREATE.X", `{"name":"X","subjects":["x.>"]}`},
		// Nor a partition's lease (engine serve --leases).
		{"$KV.PARLEY_LEASES.partition.0001", `{"owner":"mallory"}`},
	} {
		if _, err := o.nc.Request(req.subject, []byte(req.body), time.Second); err == nil {
			t.Errorf("%s answered", req.subject)
		}
		if !o.violated(req.subject) {
			t.Errorf("no permissions violation for %s", req.subject)
		}
	}
	if _, err := s.Stream.Info(ctx); err != nil {
		t.Fatalf("the stream is gone: %v", err)
	}
	if names := streamNames(t, s); len(names) != 1 || names[0] != l.Stream() {
		t.Errorf("streams %v", names)
	}
	// A push consumer may be created (participants read with consumers),
	// but delivering into the JetStream API erases nothing.
	if _, err := o.js.CreateOrUpdatePushConsumer(ctx, l.Stream(), jetstream.ConsumerConfig{Name: "into-the-api",
		DeliverSubject: "$JS.API.STREAM.DELETE." + l.Stream(), AckPolicy: jetstream.AckNonePolicy}); err != nil {
		t.Logf("push consumer refused: %v", err)
	}
	// Nothing to wait for but time: were the deliveries to erase
	// anything, they would have within this pause (the outsider may not
	// read the consumer's progress).
	time.Sleep(500 * time.Millisecond)

	after, err := s.Stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.State.Msgs != before.State.Msgs || after.State.LastSeq != before.State.LastSeq || after.Config.MaxMsgs != -1 {
		t.Fatalf("the stream changed: %d messages (last %d, max_msgs %d), was %d (last %d)",
			after.State.Msgs, after.State.LastSeq, after.Config.MaxMsgs, before.State.Msgs, before.State.LastSeq)
	}
	for _, tok := range []string{wire.SupervisorToken, wire.PrincipalToken} {
		if _, err := s.Stream.GetLastMsgForSubject(ctx, l.Stored(wire.ArtifactSubject(id, tok))); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Errorf("a message as %s is stored: %v", tok, err)
		}
	}

	// A reserved-looking token NATS cannot tell apart (permissions match
	// whole tokens) reaches the stream and is refused by the projector, on
	// the record.
	ack, err = o.js.Publish(ctx, wire.ArtifactSubject(id, "_other"), forged.Canonical)
	if err != nil {
		t.Fatalf("_other: %v", err)
	}
	if err := s.Runner.WaitFor(ctx, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	if rej, _ := s.Queries.Rejections(id); rej.ByCode[projector.CodeParticipantInvalid] != 1 {
		t.Errorf("rejections %v", rej.ByCode)
	}

	// The participant reads: the micro API, and the stream with an ordered
	// push consumer (no pulls: TestEmbeddedDefault_NoPullOntoStreamSubjects).
	v, err := alice.State(ctx, id)
	if err != nil || v.Status != api.StatusOpen || v.Artifacts != 1 {
		t.Fatalf("state over the micro API: %v %+v", err, v)
	}
	rd, err := l.Read(ctx, o.nc, l.Filter(id), 0)
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for range 3 {
		m, err := rd.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		subjects = append(subjects, m.Subject)
	}
	rd.Stop()
	if len(subjects) != 3 || subjects[1] != wire.ArtifactSubject(id, "alice") {
		t.Errorf("read %v", subjects)
	}
	// Stream info, but no direct get (its answer goes to any reply
	// subject: TestEmbeddedDefault_NoDeliveryOntoEngineSubjects); a
	// message's bytes come from the query API.
	if ps, err := o.js.Stream(ctx, l.Stream()); err != nil {
		t.Errorf("stream info: %v", err)
	} else {
		short, cancel := context.WithTimeout(ctx, time.Second)
		_, err := ps.GetMsg(short, claimSeq)
		cancel()
		if err == nil || !o.violated("$JS.API.DIRECT.GET."+l.Stream()) {
			t.Errorf("direct get: %v", err)
		}
	}
	if b, found, err := alice.Artifact(ctx, id, claim.ID.String()); err != nil || !found || string(b) != string(claim.Canonical) {
		t.Errorf("the claim over the query API: %v %v", found, err)
	}

	// The engine's own supervisor publishes: a final decision completes
	// the deliberation with a TERMINATION by _supervisor.
	if _, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "Adopt it.", Status: events.Final,
		ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}}}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if err := alice.Watch(wctx, id, func(w api.View) bool { v = w; return w.Status != api.StatusCompleted }); err != nil {
		t.Fatalf("never completed: %v (%+v)", err, v)
	}
	if _, err := s.Stream.GetLastMsgForSubject(ctx, l.Stored(wire.ArtifactSubject(id, wire.SupervisorToken))); err != nil {
		t.Errorf("no supervisor TERMINATION: %v", err)
	}
}

// A message above the server's max_payload (4 MiB) is refused at the door
// and never reaches the record; one between the engine's artifact limit
// and max_payload is recorded as a limit.size rejection
// (TestService_EndToEnd).
func TestEmbeddedDefault_MaxPayload(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := start(t, t.TempDir())
	defer s.Close()
	o := connectOutsider(t, s.NATSURL(), s.Participant())
	if max := o.nc.MaxPayload(); max != embedded.DefaultMaxPayload {
		t.Errorf("max_payload %d", max)
	}
	before := lastSeq(t, s)
	_, err := o.js.Publish(ctx, wire.ArtifactSubject("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "alice"), make([]byte, embedded.DefaultMaxPayload+1))
	if !errors.Is(err, nats.ErrMaxPayload) {
		t.Errorf("publish above max_payload: %v", err)
	}
	if after := lastSeq(t, s); after != before {
		t.Errorf("the stream moved from %d to %d", before, after)
	}
}

// The operator's credentials, in the data directory with mode 0600 while
// the engine runs: they publish what a participant may not (as import
// republishes a recording's supervisor messages) and still cannot erase or
// reconfigure the stream; a wrong password is refused. The file goes when
// the engine stops.
func TestEmbeddedDefault_OperatorCredentials(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	s := start(t, dir)
	defer s.Close()
	path := filepath.Join(dir, service.CredentialsFile)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("credentials file mode %v", st.Mode().Perm())
	}
	c, err := service.ReadCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	if *c != s.Credentials() || c.NATSUser != natsconn.OperatorUser || len(c.NATSPassword) < 32 || c.NATSURL != s.NATSURL() ||
		c.HTTPURL != "http://"+s.HTTPAddr() || len(c.HTTPToken) < 32 || c.HTTPParticipant != wire.PrincipalToken {
		t.Fatalf("credentials %+v", c)
	}
	if _, err := nats.Connect(s.NATSURL(), nats.UserInfo(natsconn.OperatorUser, "wrong")); err == nil {
		t.Error("a wrong operator password was accepted")
	}
	if _, err := nats.Connect(s.NATSURL(), nats.UserInfo(natsconn.EngineUser, "")); err == nil {
		t.Error("the engine user without its password was accepted")
	}
	op := connectOutsider(t, c.NATSURL, nats.UserInfo(c.NATSUser, c.NATSPassword))
	id := "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	claim := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "x"}})
	for _, subject := range []string{wire.ControlSubject(id), wire.ArtifactSubject(id, wire.SupervisorToken), wire.ArtifactSubject(id, wire.PrincipalToken)} {
		if _, err := op.js.Publish(ctx, subject, claim.Canonical); err != nil {
			t.Errorf("operator on %s: %v", subject, err)
		}
	}
	// (A refused request gets no answer: each is given a second.)
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if err := op.js.DeleteStream(short, wire.StreamName); err == nil || !op.violated("$JS.API.STREAM.DELETE."+wire.StreamName) {
		t.Errorf("operator delete: %v", err)
	}
	short, cancelShort = context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	cfg := ledger.StreamConfig(1)
	cfg.MaxAge = time.Hour
	if _, err := op.js.UpdateStream(short, cfg); err == nil || !op.violated("$JS.API.STREAM.UPDATE."+wire.StreamName) {
		t.Errorf("operator update: %v", err)
	}
	if info, err := s.Stream.Info(ctx); err != nil || info.State.Msgs != 3 || info.Config.MaxAge != 0 {
		t.Errorf("stream %v %+v", err, info)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the credentials file outlives the engine: %v", err)
	}
}

// Regression: with a configuration file that has users (deploy/nats.conf),
// the engine without --user failed to connect and crashed on a nil
// connection. It now fails with an error that says what is missing, and
// starts with the engine's user.
func TestStart_NATSConfigUsers(t *testing.T) {
	ctx := context.Background()
	conf := "../deploy/nats.conf"
	_, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", NATSConfig: conf})
	if err == nil || !strings.Contains(err.Error(), "--user") || !strings.Contains(err.Error(), "connect to the embedded NATS server") {
		t.Fatalf("without a user: %v", err)
	}
	_, err = service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", NATSConfig: conf,
		User: "engine", Password: "wrong"})
	if err == nil || !errors.Is(err, nats.ErrAuthorization) || !strings.Contains(err.Error(), "password") {
		t.Fatalf("a wrong password: %v", err)
	}
	dir := t.TempDir()
	s, err := service.Start(ctx, service.Config{DataDir: dir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", NATSConfig: conf,
		User: "engine", Password: "change-me-engine"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The server's users are the file's: no operator user was generated.
	if c := s.Credentials(); c.NATSUser != "" || c.NATSPassword != "" || c.HTTPToken == "" {
		t.Errorf("credentials %+v", c)
	}
	alice := connectOutsider(t, s.NATSURL(), nats.UserInfo("alice", "change-me-alice"))
	if _, err := alice.js.Stream(ctx, wire.StreamName); err != nil {
		t.Errorf("alice reads the stream info: %v", err)
	}
	// The embedded default's users are not taken with a file.
	if _, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", User: "engine", Password: "x"}); err == nil {
		t.Error("--user without --nats-config was accepted")
	}
}

// Attack: a direct get answers with a stored message's bytes on the reply
// subject its requester names, and the server does not check that
// subject against the requester's permissions: a client without
// credentials stored any bytes as alice, then had the server publish them
// onto the principal's artifact subject, where the stream stored them as
// the principal's. Participants may no longer make direct gets: the
// request is refused and nothing is stored as the principal.
func TestEmbeddedDefault_NoDeliveryOntoEngineSubjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := start(t, t.TempDir())
	defer s.Close()
	o := connectOutsider(t, s.NATSURL(), s.Participant())
	id := "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	ack, err := o.js.Publish(ctx, wire.ArtifactSubject(id, "alice"), []byte(`{"forged":"a decision"}`))
	if err != nil {
		t.Fatal(err)
	}
	principal := wire.ArtifactSubject(id, wire.PrincipalToken)
	m := nats.NewMsg("$JS.API.DIRECT.GET." + wire.StreamName)
	m.Reply = principal
	m.Data = []byte(`{"seq":` + strconv.FormatUint(ack.Sequence, 10) + `,"no_hdr":true}`)
	if err := o.nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	if !o.violated("$JS.API.DIRECT.GET." + wire.StreamName) {
		t.Error("no permissions violation for the direct get")
	}
	if _, err := s.Stream.GetLastMsgForSubject(ctx, principal); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("a message as the principal: %v", err)
	}
}

// Attack: a pull request's messages, and the status the server answers it
// with, go to the reply subject its requester names, which the server
// does not check against the requester's permissions. A client without
// credentials stores a final DECISION as alice (without a dedupe id),
// makes a pull consumer on it and pulls it onto the principal's artifact
// subject and the control subject, and pulls an empty consumer onto the
// supervisor's and the importer's subjects (the server stores its "404 No
// Messages" status there, as an empty message). Participants may not
// pull: each request is a permissions violation and the stream holds
// nothing but alice's message; they read the stream with ordered push
// consumers, which the server never lets deliver onto a stream subject.
func TestEmbeddedDefault_NoPullOntoStreamSubjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := start(t, t.TempDir())
	defer s.Close()
	o := connectOutsider(t, s.NATSURL(), s.Participant())
	id := "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	aliceSubject := wire.ArtifactSubject(id, "alice")
	claim := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Book the 9:40."}})
	decision := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "Book the 9:40.", Status: events.Final,
		ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}}})
	ack, err := o.js.Publish(ctx, aliceSubject, decision.Canonical)
	if err != nil {
		t.Fatal(err)
	}
	pulls := []struct {
		onto string
		from uint64
	}{
		{wire.ArtifactSubject(id, wire.PrincipalToken), ack.Sequence},
		{wire.ControlSubject(id), ack.Sequence},
		{wire.ArtifactSubject(id, wire.SupervisorToken), ack.Sequence + 1000},
		{wire.ImportSubject(id), ack.Sequence + 1000},
	}
	for i, p := range pulls {
		name := "pull-" + strconv.Itoa(i)
		if _, err := o.js.CreateConsumer(ctx, wire.StreamName, jetstream.ConsumerConfig{Name: name, AckPolicy: jetstream.AckExplicitPolicy,
			FilterSubject: aliceSubject, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: p.from}); err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg("$JS.API.CONSUMER.MSG.NEXT." + wire.StreamName + "." + name)
		m.Reply, m.Data = p.onto, []byte(`{"batch":1,"no_wait":true}`)
		if err := o.nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		if !o.violated(m.Subject) {
			t.Errorf("pulled onto %s", p.onto)
		}
	}
	info, err := s.Stream.Info(ctx, jetstream.WithSubjectFilter(wire.DeliberationFilter(id)))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Subjects) != 1 || info.State.Subjects[aliceSubject] != 1 {
		t.Errorf("the stream holds %v, want alice's message only", info.State.Subjects)
	}
	// A push consumer may not deliver onto a stream subject.
	_, err = o.js.CreateOrUpdatePushConsumer(ctx, wire.StreamName, jetstream.ConsumerConfig{Name: "push-onto-principal",
		DeliverSubject: pulls[0].onto, AckPolicy: jetstream.AckNonePolicy, FilterSubject: aliceSubject})
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10081 { // JSConsumerDeliverCycleErr
		t.Errorf("a push consumer onto the principal's subject: %v", err)
	}
}

// Attack: a local process without credentials writes to the record on the
// embedded default (an open, a claim, a control message), each of which
// the stream would keep for good and the server would index. It is a
// reader: every publish is a permissions violation and the stream holds
// nothing new, while it still reads what participants read (the state
// through the query service, the stream through an ordered consumer).
// With --anonymous-writes the same client is a participant again.
func TestEmbeddedDefault_AnonymousClientsOnlyRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := start(t, t.TempDir())
	defer s.Close()
	p := connectOutsider(t, s.NATSURL(), s.Participant())
	alice, _ := client.New(p.nc, "alice")
	id, err := alice.Open(ctx, client.Charter{Title: "Adopt the cache?", Participants: []string{"alice"}})
	if err != nil {
		t.Fatalf("the participant user cannot open: %v", err)
	}
	_, ack, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The cache halves p99."}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.WaitPosition(ctx, id, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	before := lastSeq(t, s)

	o := connectOutsider(t, s.NATSURL())
	claim := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Junk."}})
	for _, subject := range []string{
		wire.ArtifactSubject(id, "alice"),
		wire.ArtifactSubject("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "mallory"),
		wire.ControlSubject(id),
		wire.ControlSubject("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"),
	} {
		short, cancel := context.WithTimeout(ctx, time.Second)
		_, err := o.js.Publish(short, subject, claim.Canonical)
		cancel()
		if err == nil {
			t.Errorf("a client without credentials published on %s", subject)
		}
		if !o.violated(subject) {
			t.Errorf("no permissions violation for %s", subject)
		}
	}
	if after := lastSeq(t, s); after != before {
		t.Errorf("the stream went from %d to %d messages", before, after)
	}
	// It still reads.
	reader, _ := client.New(o.nc, "reader")
	v, err := reader.State(ctx, id)
	if err != nil || v.Artifacts != 1 {
		t.Fatalf("a client without credentials reads the state: %+v %v", v.Artifacts, err)
	}
	// But not the stream itself: a consumer outlives the request that
	// made it, and a client without credentials may make none.
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	rd, err := ledger.Read(short, o.nc, wire.DeliberationFilter(id), 0)
	if err == nil {
		_, err = rd.Next(short)
		rd.Stop()
	}
	cancelShort()
	if err == nil {
		t.Errorf("a client without credentials read the stream with a consumer")
	}
	if consumer := "$JS.API.CONSUMER.CREATE." + wire.StreamName; !o.violatedPrefix(consumer) {
		t.Errorf("no permissions violation for %s…", consumer)
	}
	// The participant reads it.
	prd, err := ledger.Read(ctx, p.nc, wire.DeliberationFilter(id), 0)
	if err != nil {
		t.Fatalf("the participant reads the stream: %v", err)
	}
	defer prd.Stop()
	if m, err := prd.Next(ctx); err != nil || m.Subject != wire.ControlSubject(id) {
		t.Fatalf("first message %v %v", m, err)
	}
	s.Close()

	w, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", AnonymousWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	anon := connectOutsider(t, w.NATSURL())
	bob, _ := client.New(anon.nc, "bob")
	if _, err := bob.Open(ctx, client.Charter{Title: "Open to all"}); err != nil {
		t.Errorf("with --anonymous-writes, a client without credentials cannot open: %v", err)
	}
}

// The participant user's password is kept in the data directory across
// restarts, so that a participant reconnects to a restarted engine; the
// credentials file names it.
func TestEmbeddedDefault_ParticipantPasswordKept(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir)
	c := s.Credentials()
	s.Close()
	if c.NATSParticipantUser != natsconn.ParticipantUser || len(c.NATSParticipantPassword) != 64 {
		t.Fatalf("credentials %+v", c)
	}
	fi, err := os.Stat(filepath.Join(dir, service.ParticipantSecretFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v", service.ParticipantSecretFile, fi, err)
	}
	s = start(t, dir)
	defer s.Close()
	if got := s.Credentials().NATSParticipantPassword; got != c.NATSParticipantPassword {
		t.Errorf("the password changed at the restart")
	}
	nc, err := nats.Connect(s.NATSURL(), nats.UserInfo(natsconn.ParticipantUser, c.NATSParticipantPassword))
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if err := os.WriteFile(filepath.Join(dir, service.ParticipantSecretFile), []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := service.Start(context.Background(), service.Config{DataDir: dir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"}); err == nil ||
		!strings.Contains(err.Error(), "holds no secret") {
		t.Errorf("a short secret: %v", err)
	}
}

// deploy/nats-partitioned.conf on the embedded server, the record
// partitioned: its users' permissions are on the mapped subjects. The
// orchestrator opens, alice publishes as alice and the engine's
// supervisor completes the deliberation; alice publishing as bob is
// refused on bob's mapped subject, and her publish straight to her own
// mapped subject is refused too (mapped to parley.refused). Nothing of
// either is stored.
func TestStart_PartitionedNATSConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0",
		NATSConfig: "../deploy/nats-partitioned.conf", User: "engine", Password: "change-me-engine", Partitioned: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := s.Runner.Layout()
	if !l.Partitioned() {
		t.Fatalf("the engine reads the %s record", l)
	}
	// The engine says which record it reads, over HTTP and NATS.
	var info api.EngineInfo
	if code := get(t, s, "/api/v1/engine", &info); code != 200 || info.Stream != "PARLEY_0000_1023" || !info.Partitioned || info.Key == "" {
		t.Errorf("GET /api/v1/engine: %d %+v", code, info)
	}
	orch := connectOutsider(t, s.NATSURL(), nats.UserInfo("orchestrator", "change-me-orchestrator"))
	if m, err := orch.nc.Request(wire.MicroPrefix+".engine", []byte("{}"), 5*time.Second); err != nil {
		t.Errorf("%s.engine: %v", wire.MicroPrefix, err)
	} else if info = (api.EngineInfo{}); json.Unmarshal(m.Data, &info) != nil || info.Stream != "PARLEY_0000_1023" || !info.Partitioned {
		t.Errorf("%s.engine: %s", wire.MicroPrefix, m.Data)
	}
	oc, _ := client.New(orch.nc, "orchestrator")
	id, err := oc.Open(ctx, client.Charter{Title: "Adopt the cache?"})
	if err != nil {
		t.Fatal(err)
	}
	a := connectOutsider(t, s.NATSURL(), nats.UserInfo("alice", "change-me-alice"))
	alice, _ := client.New(a.nc, "alice")
	claim, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The cache halves p99."}})
	if err != nil {
		t.Fatalf("alice cannot publish as alice: %v", err)
	}
	forged := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "bob says so"}})
	for _, subject := range []string{wire.ArtifactSubject(id, "bob"), l.Stored(wire.ArtifactSubject(id, "alice"))} {
		short, cancel := context.WithTimeout(ctx, time.Second)
		_, err := a.js.Publish(short, subject, forged.Canonical)
		cancel()
		if err == nil {
			t.Errorf("alice published on %s", subject)
		}
	}
	for _, subject := range []string{l.Stored(wire.ArtifactSubject(id, "bob")), partition.Refused} {
		if !a.violated(subject) {
			t.Errorf("no permissions violation for %s", subject)
		}
	}
	if _, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "Adopt it.", Status: events.Final,
		ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}}}); err != nil {
		t.Fatal(err)
	}
	var v api.View
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if err := alice.Watch(wctx, id, func(w api.View) bool { v = w; return w.Status != api.StatusCompleted }); err != nil {
		t.Fatalf("never completed: %v (%+v)", err, v)
	}
	if v.Artifacts != 3 {
		t.Errorf("%d artifacts: alice's two and the supervisor's TERMINATION, and nothing as bob", v.Artifacts)
	}
	if _, err := s.Stream.GetLastMsgForSubject(ctx, l.Stored(wire.ArtifactSubject(id, "bob"))); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("a message as bob is stored: %v", err)
	}
}
