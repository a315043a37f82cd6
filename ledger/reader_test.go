package ledger

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/wire"
)

// readerServer starts a server listening on a port, with the stream, and
// returns it with a client connection that reconnects for ever.
func readerServer(t *testing.T, cfg embedded.Config) (*server.Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	cfg.Host, cfg.Port = "127.0.0.1", -1
	s, err := embedded.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { embedded.Stop(s) })
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := Ensure(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	return s, nc, js
}

func publish(t *testing.T, js jetstream.JetStream, subject, body string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := js.Publish(ctx, subject, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// expect reads the next message and checks its subject, body and position.
func expect(t *testing.T, r *Reader, subject, body string, seq uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := r.Next(ctx)
	if err != nil {
		t.Fatalf("want %s at %d: %v", body, seq, err)
	}
	meta, _ := m.Metadata()
	if m.Subject != subject || string(m.Data) != body || meta.Sequence.Stream != seq {
		t.Fatalf("read %s %q at %d, want %s %q at %d", m.Subject, m.Data, meta.Sequence.Stream, subject, body, seq)
	}
}

// A Reader returns the messages of its filter from its position, in
// order, those published before it and after; with no filter, every one.
func TestReader_Next(t *testing.T) {
	_, nc, js := readerServer(t, embedded.Config{})
	a, b := "parley.0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "parley.0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c"
	var seqs []uint64
	for i := range 6 {
		d := a
		if i%2 == 1 {
			d = b
		}
		seqs = append(seqs, publish(t, js, d+".art.alice", fmt.Sprint(i)))
	}
	ctx := context.Background()
	r, err := Read(ctx, nc, a+".>", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	for _, i := range []int{0, 2, 4} {
		expect(t, r, a+".art.alice", fmt.Sprint(i), seqs[i])
	}
	live := publish(t, js, a+".ctl", `{"op":"suspend"}`)
	expect(t, r, a+".ctl", `{"op":"suspend"}`, live)

	from, err := Read(ctx, nc, "", seqs[3])
	if err != nil {
		t.Fatal(err)
	}
	defer from.Stop()
	expect(t, from, b+".art.alice", "3", seqs[3])
	expect(t, from, a+".art.alice", "4", seqs[4])
	expect(t, from, b+".art.alice", "5", seqs[5])
	expect(t, from, a+".ctl", `{"op":"suspend"}`, live)

	// Nothing more: Next waits until its context ends.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if m, err := r.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("read %v, %v", m, err)
	}
}

// The server restarts (its consumers are gone with it) while a Reader
// waits: the Reader makes a new consumer from the position it reached and
// reads on, with no message twice and none missing.
func TestReader_ServerRestart(t *testing.T) {
	dir := t.TempDir()
	s, nc, js := readerServer(t, embedded.Config{Dir: dir})
	subject := "parley.0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.art.alice"
	first := publish(t, js, subject, "before")
	r, err := Read(context.Background(), nc, subject, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	expect(t, r, subject, "before", first)

	port := s.Addr().(*net.TCPAddr).Port
	embedded.Stop(s)
	s2, err := embedded.Start(embedded.Config{Dir: dir, Host: "127.0.0.1", Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { embedded.Stop(s2) })
	second := publish(t, js, subject, "after")
	expect(t, r, subject, "after", second)
	third := publish(t, js, subject, "and again")
	expect(t, r, subject, "and again", third)
}

// A user who may publish only ReaderSubjects (and subscribe to its
// inbox) reads the stream with a Reader: no pull, no other API.
func TestReader_NeedsOnlyReaderSubjects(t *testing.T) {
	perms := &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: ReaderSubjects},
		Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
	}
	s, err := embedded.Start(embedded.Config{Dir: t.TempDir(), Host: "127.0.0.1", Port: -1, Users: []*server.User{
		{Username: "admin", Password: "admin"},
		{Username: "reader", Password: "reader", Permissions: perms},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { embedded.Stop(s) })
	admin, err := nats.Connect(s.ClientURL(), nats.UserInfo("admin", "admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	js, _ := jetstream.New(admin)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := Ensure(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	subject := "parley.0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.art.alice"
	seq := publish(t, js, subject, "one")

	var violations []string
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("reader", "reader"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		violations = append(violations, err.Error())
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r, err := Read(ctx, nc, "parley.*.art.alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, r, subject, "one", seq)
	r.Stop()
	// Stopped, its consumer is deleted.
	for {
		info, err := js.Stream(ctx, wire.StreamName)
		if err != nil {
			t.Fatal(err)
		}
		if info.CachedInfo().State.Consumers == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the reader's consumer outlives it")
		case <-time.After(20 * time.Millisecond):
		}
	}
	nc.Flush()
	if len(violations) > 0 {
		t.Errorf("violations: %v", violations)
	}
}

// Another's push consumer delivering onto the Reader's inbox (any
// participant may make one: the inbox is under _INBOX., and whoever may
// subscribe to _INBOX.> sees it in the Reader's heartbeats) while the
// Reader waits for its first message: the library takes the delivery as
// its consumer's first and hands it on. A message of another subject, or
// of a position before the Reader's start, is skipped; so is a message
// without JetStream metadata (published onto the inbox by a user who may
// publish there). The Reader then reads its own.
func TestReader_SkipsWhatIsNotItsOwn(t *testing.T) {
	_, nc, js := readerServer(t, embedded.Config{})
	mine, theirs := "parley.0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.art.principal", "parley.0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c.art.mallory"
	old := publish(t, js, mine, "old")
	forged := publish(t, js, theirs, "forged")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	from := forged + 1 // each Reader starts after every message so far
	for i, tc := range []struct {
		name   string
		inject func(inbox string)
	}{
		{"another subject", func(inbox string) {
			if _, err := js.CreateOrUpdatePushConsumer(ctx, wire.StreamName, jetstream.ConsumerConfig{Name: "onto-the-inbox-0", DeliverSubject: inbox,
				AckPolicy: jetstream.AckNonePolicy, FilterSubject: theirs}); err != nil {
				t.Fatal(err)
			}
		}},
		{"before the start", func(inbox string) {
			if _, err := js.CreateOrUpdatePushConsumer(ctx, wire.StreamName, jetstream.ConsumerConfig{Name: "onto-the-inbox-1", DeliverSubject: inbox,
				AckPolicy: jetstream.AckNonePolicy, FilterSubject: mine, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: old}); err != nil {
				t.Fatal(err)
			}
		}},
		{"plain", func(inbox string) {
			if err := nc.Publish(inbox, []byte("plain")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Read(ctx, nc, mine, from)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Stop()
			r.mu.Lock()
			inbox := r.sub.Subject
			r.mu.Unlock()
			tc.inject(inbox)
			// What the library handed on, the Reader has skipped by now:
			// the next message is its own.
			body := fmt.Sprint("mine ", i)
			next := publish(t, js, mine, body)
			expect(t, r, mine, body, next)
			from = next + 1
		})
	}
}

func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		filter, subject string
		want            bool
	}{
		{"", "parley.a.ctl", true},
		{">", "parley.a.ctl", true},
		{"parley.a.>", "parley.a.ctl", true},
		{"parley.a.>", "parley.a.art.alice", true},
		{"parley.a.>", "parley.a", false},
		{"parley.a.>", "parley.b.ctl", false},
		{"parley.*.art.alice", "parley.a.art.alice", true},
		{"parley.*.art.alice", "parley.a.art.bob", false},
		{"parley.*.art.alice", "parley.a.art.alice.x", false},
		{"parley.a.ctl", "parley.a.ctl", true},
		{"parley.a.ctl", "parley.a.ct", false},
		{"parley.a.ctl", "parley.a", false},
	} {
		if got := matches(tc.filter, tc.subject); got != tc.want {
			t.Errorf("matches(%q, %q) = %v", tc.filter, tc.subject, got)
		}
	}
}

// A Reader whose caller does not keep up holds no more than its bound
// (lowered here to 1 MiB, ten messages): the library drops the excess and
// the Reader reads on after the last message it kept, with no message
// twice and none missing.
func TestReader_BoundedWhenSlow(t *testing.T) {
	saved := readerPending
	readerPending.bytes = 1 << 20
	t.Cleanup(func() { readerPending = saved })
	_, nc, js := readerServer(t, embedded.Config{})
	subject := "parley.0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.art.alice"
	body := make([]byte, 100<<10)
	const n = 100 // 10 MiB
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var seqs []uint64
	for i := range n {
		copy(body, fmt.Sprintf("%04d", i))
		ack, err := js.Publish(ctx, subject, body)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	r, err := Read(ctx, nc, subject, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	// Wait, reading nothing, until the bound is reached and the library
	// drops what comes (it counts the drops).
	r.mu.Lock()
	sub := r.sub
	r.mu.Unlock()
	for {
		if d, _ := sub.Dropped(); d > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("nothing dropped: the bound is not reached")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, b, _ := sub.MaxPending(); b > readerPending.bytes+len(body)+1024 {
		t.Errorf("held %d bytes, bound %d", b, readerPending.bytes)
	}
	for i := range n {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		meta, _ := m.Metadata()
		if meta.Sequence.Stream != seqs[i] || string(m.Data[:4]) != fmt.Sprintf("%04d", i) {
			t.Fatalf("message %d: %q at %d, want %d", i, m.Data[:4], meta.Sequence.Stream, seqs[i])
		}
	}
	if _, b, _ := sub.MaxPending(); b > readerPending.bytes+len(body)+1024 {
		t.Errorf("held %d bytes, bound %d", b, readerPending.bytes)
	}
}
