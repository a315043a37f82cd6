package partition_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/partition"
	"github.com/parley-engine/parley/wire"
)

// startConf starts an embedded server on the configuration text conf.
func startConf(tb testing.TB, conf string) *server.Server {
	tb.Helper()
	dir := tb.TempDir()
	file := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		tb.Fatal(err)
	}
	s, err := embedded.Start(embedded.Config{Dir: filepath.Join(dir, "store"), ConfigFile: file, DontListen: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { embedded.Stop(s) })
	return s
}

func connect(tb testing.TB, s *server.Server, opts ...nats.Option) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect("", append([]nats.Option{nats.InProcessServer(s)}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// randomToken is a subject token of random bytes: anything but the
// separator, the wildcards and white space, non-ASCII bytes included.
func randomToken(r *rand.Rand) string {
	n := 1 + r.IntN(40)
	b := make([]byte, 0, n)
	for len(b) < n {
		c := byte(r.IntN(256))
		if c <= ' ' || c == '.' || c == '*' || c == '>' || c == 0x7f {
			continue
		}
		b = append(b, c)
	}
	return string(b)
}

// The partition the server's mapping computes is Of, for UUIDs (parley's
// deliberation ids) and for arbitrary tokens: a publish on
// parley.<d>.ctl and parley.<d>.art.<p> arrives on Subject's mapped
// subject, and nowhere else.
func TestOf_MatchesServerMapping(t *testing.T) {
	s := startConf(t, partition.MappingBlock(""))
	nc := connect(t, s)
	sub, err := nc.SubscribeSync(partition.Prefix + ">")
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var sent []string
	for i := range 3000 {
		var d string
		switch {
		case i < 2000:
			d = uuid.NewString()
		case i < 2100:
			u, _ := uuid.NewV7()
			d = u.String()
		default:
			d = randomToken(r)
		}
		subj := wire.ControlSubject(d)
		if i%2 == 1 {
			subj = wire.ArtifactSubject(d, "alice")
		}
		if err := nc.Publish(subj, []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, subj)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	hit := make([]bool, partition.Count)
	for i, subj := range sent {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("message %d (%s): %v", i, subj, err)
		}
		if string(m.Data) != strconv.Itoa(i) {
			t.Fatalf("message %d arrived as %s", i, m.Data)
		}
		want, ok := partition.Subject(subj)
		if !ok {
			t.Fatalf("Subject(%q) not mapped", subj)
		}
		if m.Subject != want {
			t.Fatalf("%q: the server mapped it to %q, Subject says %q", subj, m.Subject, want)
		}
		orig, p, err := partition.Original(m.Subject)
		if err != nil || orig != subj {
			t.Fatalf("Original(%q) = %q, %v", m.Subject, orig, err)
		}
		hit[p] = true
	}
	// 3000 draws over 1024 partitions leave about 5% unhit; a constant
	// function would hit one.
	n := 0
	for _, h := range hit {
		if h {
			n++
		}
	}
	if n < partition.Count*9/10 {
		t.Fatalf("the ids hit %d of %d partitions", n, partition.Count)
	}
}

// jsStreams creates the layout's streams.
func jsStreams(tb testing.TB, js jetstream.JetStream, l partition.Layout) {
	tb.Helper()
	for _, r := range l.Streams() {
		_, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
			Name: r.Name(), Subjects: r.Subjects(), Storage: jetstream.FileStorage,
		})
		if err != nil {
			tb.Fatalf("stream %s: %v", r.Name(), err)
		}
	}
}

// JetStream through the mapping: a publish on a deliberation's subject is
// stored in its partition's stream under the mapped subject;
// Nats-Msg-Id deduplicates; Nats-Expected-Last-Subject-Sequence holds;
// Nats-Expected-Last-Subject-Sequence-Subject needs the mapped filter
// (with the unmapped one the server checks against nothing); a publish
// straight to a mapped subject is refused.
func TestMapping_JetStreamHeaders(t *testing.T) {
	s := startConf(t, partition.MappingBlock(""))
	nc := connect(t, s)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	l, err := partition.NewLayout(4)
	if err != nil {
		t.Fatal(err)
	}
	jsStreams(t, js, l)
	ctx := context.Background()

	d := uuid.NewString()
	stream := l.Stream(d).Name()
	subj := wire.ArtifactSubject(d, "alice")
	mapped, _ := partition.Subject(subj)

	// Stored in the partition's stream, under the mapped subject.
	ack, err := js.Publish(ctx, subj, []byte("a1"), jetstream.WithMsgID("a1"), jetstream.WithExpectStream(stream))
	if err != nil {
		t.Fatal(err)
	}
	if ack.Stream != stream || ack.Duplicate {
		t.Fatalf("ack %+v, want stream %s, not a duplicate", ack, stream)
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetMsg(ctx, ack.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != mapped {
		t.Fatalf("stored as %q, want %q", m.Subject, mapped)
	}
	// Any other stream refuses it.
	other := l.Streams()[(l.Stream(d).Index+1)%l.N()].Name()
	if _, err := js.Publish(ctx, subj, []byte("x"), jetstream.WithExpectStream(other)); err == nil {
		t.Fatalf("a publish expecting stream %s was stored", other)
	}

	// Nats-Msg-Id: the same id again is a duplicate.
	ack2, err := js.Publish(ctx, subj, []byte("a1"), jetstream.WithMsgID("a1"))
	if err != nil {
		t.Fatal(err)
	}
	if !ack2.Duplicate || ack2.Sequence != ack.Sequence {
		t.Fatalf("a republish with the same Nats-Msg-Id: %+v, want a duplicate of %d", ack2, ack.Sequence)
	}

	// Nats-Expected-Last-Subject-Sequence: compared with the mapped
	// subject's last sequence.
	if _, err := js.Publish(ctx, subj, []byte("stale"), jetstream.WithExpectLastSequencePerSubject(ack.Sequence+100)); !wrongLast(err) {
		t.Fatalf("a wrong expected subject sequence: %v, want wrong last sequence", err)
	}
	ack3, err := js.Publish(ctx, subj, []byte("a2"), jetstream.WithExpectLastSequencePerSubject(ack.Sequence))
	if err != nil {
		t.Fatalf("the right expected subject sequence: %v", err)
	}

	// Nats-Expected-Last-Subject-Sequence-Subject names a filter the
	// server does not map: the unmapped one matches nothing stored, so a
	// publish expecting 0 passes although the deliberation has messages.
	withFilter := func(filter string, last uint64, data string) error {
		msg := nats.NewMsg(wire.ControlSubject(d))
		msg.Data = []byte(data)
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
		msg.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, filter)
		_, err := js.PublishMsg(ctx, msg)
		return err
	}
	if err := withFilter(wire.DeliberationFilter(d), 0, "unguarded"); err != nil {
		t.Fatalf("the unmapped filter, expecting 0: %v (the server was expected to find nothing under it)", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := info.State.LastSeq
	if err := withFilter(partition.DeliberationFilter(d), 0, "x"); !wrongLast(err) {
		t.Fatalf("the mapped filter, expecting 0: %v, want wrong last sequence", err)
	}
	if err := withFilter(partition.DeliberationFilter(d), ack3.Sequence, "x"); !wrongLast(err) {
		t.Fatalf("the mapped filter, expecting a past sequence: %v, want wrong last sequence", err)
	}
	if err := withFilter(partition.DeliberationFilter(d), last, "guarded"); err != nil {
		t.Fatalf("the mapped filter, expecting its last sequence: %v", err)
	}

	// A publish straight to a mapped subject, the right partition or a
	// wrong one, is mapped to Refused: no stream answers.
	wrong := partition.Prefix + partition.Token((partition.Of(d)+1)%partition.Count) + "." + d + ".ctl"
	for _, direct := range []string{mapped, wrong, partition.Prefix + partition.Token(partition.Of(d)) + "." + d + ".ctl"} {
		_, err := js.Publish(ctx, direct, []byte("direct"))
		if !errors.Is(err, jetstream.ErrNoStreamResponse) {
			t.Fatalf("a publish to %s: %v, want no stream response", direct, err)
		}
	}
	info, err = st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 4 {
		t.Fatalf("stream %s holds %d messages, want 4 (a1, a2, unguarded, guarded)", stream, info.State.Msgs)
	}
}

func wrongLast(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Every layout's streams are accepted by the server, hold every message
// of their partitions and none of the others'.
func TestLayout_StreamsOnServer(t *testing.T) {
	s := startConf(t, partition.MappingBlock(""))
	nc := connect(t, s)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	l, err := partition.NewLayout(3)
	if err != nil {
		t.Fatal(err)
	}
	jsStreams(t, js, l)
	ctx := context.Background()
	want := make([]uint64, l.N())
	for range 300 {
		d := uuid.NewString()
		k := l.Stream(d).Index
		ack, err := js.Publish(ctx, wire.ControlSubject(d), nil)
		if err != nil {
			t.Fatal(err)
		}
		if ack.Stream != l.Streams()[k].Name() {
			t.Fatalf("%s stored in %s, want %s", d, ack.Stream, l.Streams()[k].Name())
		}
		want[k]++
	}
	for k, r := range l.Streams() {
		st, err := js.Stream(ctx, r.Name())
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != want[k] {
			t.Fatalf("%s holds %d, want %d", r.Name(), info.State.Msgs, want[k])
		}
	}
}

// accountConf is a configuration with an account, as deploy/nats.conf
// has, its mapping block inside the account, and users:
//
//	alice     publish permission on the mapped subject (ParticipantPermission)
//	unmapped  publish permission on parley.*.art.alice, the published subject
func accountConf() string {
	js := `"$JS.API.>", "_INBOX.>"`
	return `accounts {
  PARLEY {
    jetstream: enabled
` + partition.MappingBlock("    ") + `    users: [
      {user: admin, password: admin, permissions: {publish: ">", subscribe: ">"}}
      {user: alice, password: alice, permissions: {
        publish: {allow: ["` + partition.ParticipantPermission("alice") + `", ` + js + `]}
        subscribe: {allow: ["_INBOX.>"]}}}
      {user: unmapped, password: unmapped, permissions: {
        publish: {allow: ["parley.*.art.alice", ` + js + `]}
        subscribe: {allow: ["_INBOX.>"]}}}
    ]
  }
}
`
}

// permErrors collects a connection's asynchronous errors.
type permErrors struct {
	mu   sync.Mutex
	errs []string
}

func (p *permErrors) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	p.mu.Lock()
	p.errs = append(p.errs, err.Error())
	p.mu.Unlock()
}

func (p *permErrors) has(s string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.errs {
		if strings.Contains(e, s) {
			return true
		}
	}
	return false
}

// Permissions are checked on the mapped subject: a user allowed only
// the published subject is refused, naming the mapped subject; a user
// allowed the mapped subject of its own token publishes on the ordinary
// subject, but not under another token nor straight to the mapped
// subject.
func TestMapping_PermissionsOnMappedSubject(t *testing.T) {
	s := startConf(t, accountConf())
	admin := connect(t, s, nats.UserInfo("admin", "admin"))
	ajs, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := partition.NewLayout(1)
	jsStreams(t, ajs, l)
	ctx := context.Background()
	st, err := ajs.Stream(ctx, l.Streams()[0].Name())
	if err != nil {
		t.Fatal(err)
	}
	count := func() uint64 {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}

	d := uuid.NewString()
	mapped, _ := partition.Subject(wire.ArtifactSubject(d, "alice"))

	// Allowed the published subject only: refused, on the mapped one.
	var unmappedErrs permErrors
	un := connect(t, s, nats.UserInfo("unmapped", "unmapped"), nats.ErrorHandler(unmappedErrs.handler))
	if err := un.Publish(wire.ArtifactSubject(d, "alice"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "a permissions violation naming "+mapped, func() bool {
		return unmappedErrs.has("Permissions Violation for Publish to \"" + mapped + "\"")
	})

	// Allowed the mapped subject: its ordinary publish is stored.
	var aliceErrs permErrors
	alice := connect(t, s, nats.UserInfo("alice", "alice"), nats.ErrorHandler(aliceErrs.handler))
	js, err := jetstream.New(alice)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := js.Publish(cctx, wire.ArtifactSubject(d, "alice"), []byte("ok")); err != nil {
		t.Fatalf("alice on her own subject: %v", err)
	}
	// Not as bob; not straight to the mapped subject (mapped to Refused).
	bob, _ := partition.Subject(wire.ArtifactSubject(d, "bob"))
	for _, c := range []struct{ publish, violation string }{
		{wire.ArtifactSubject(d, "bob"), bob},
		{mapped, partition.Refused},
	} {
		if err := alice.Publish(c.publish, []byte("no")); err != nil {
			t.Fatal(err)
		}
		eventually.True(t, 10*time.Second, "a permissions violation naming "+c.violation, func() bool {
			return aliceErrs.has("Permissions Violation for Publish to \"" + c.violation + "\"")
		})
	}
	if err := alice.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("the stream holds %d messages, want alice's 1", n)
	}
}
