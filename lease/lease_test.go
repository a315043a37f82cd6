package lease_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/lease"
	"github.com/parley-engine/parley/partition"
	"github.com/parley-engine/parley/wire"
)

// start runs an embedded server with the partition mapping and the
// record's single stream, and returns a JetStream client and the lease
// bucket (TTL 1 s).
func start(t *testing.T) (*server.Server, jetstream.JetStream, jetstream.KeyValue) {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte(partition.MappingBlock("")), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := embedded.Start(embedded.Config{Dir: filepath.Join(dir, "store"), ConfigFile: conf, DontListen: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { embedded.Stop(s) })
	js := client(t, s)
	l, _ := partition.NewLayout(1)
	r := l.Streams()[0]
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: r.Name(), Subjects: r.Subjects()}); err != nil {
		t.Fatal(err)
	}
	kv, err := lease.Bucket(context.Background(), js, lease.Config{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s, js, kv
}

func client(t *testing.T, s *server.Server) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect("", nats.InProcessServer(s))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func leases(t *testing.T, kv jetstream.KeyValue, owner string) *lease.Leases {
	t.Helper()
	m, err := lease.New(context.Background(), kv, owner)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// One owner at a time; renewals move the revision; a stale revision's
// renewal, check and release fail with ErrLost; a release frees the
// partition at once; an unrenewed lease is taken over, not before TTL.
func TestLeases_AcquireRenewExpire(t *testing.T) {
	_, _, kv := start(t)
	ctx := context.Background()
	a, b := leases(t, kv, "engine-a"), leases(t, kv, "engine-b")

	la, err := a.Acquire(ctx, 17)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Acquire(ctx, 17)
	var held *lease.Error
	if !errors.Is(err, lease.ErrHeld) || !errors.As(err, &held) || held.Holder != "engine-a" || held.Revision != la.Revision {
		t.Fatalf("a second acquire: %v, want held by engine-a at %d", err, la.Revision)
	}
	if _, err := b.Acquire(ctx, 18); err != nil {
		t.Fatalf("another partition: %v", err)
	}
	first := la.Revision
	if err := a.Renew(ctx, la); err != nil || la.Revision <= first {
		t.Fatalf("renew: %v, revision %d after %d", err, la.Revision, first)
	}
	stale := *la
	stale.Revision = first
	if err := a.Renew(ctx, &stale); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("a renewal of a past revision: %v, want lost", err)
	}
	if err := a.Check(ctx, &stale); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("a check of a past revision: %v, want lost", err)
	}
	if err := a.Check(ctx, la); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, &stale); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("a release of a past revision: %v, want lost", err)
	}
	if err := a.Release(ctx, la); err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(ctx, 17)
	if err != nil {
		t.Fatalf("acquire after a release: %v", err)
	}
	if lb.Revision <= la.Revision {
		t.Fatalf("the new owner's revision %d is not above the old one's %d", lb.Revision, la.Revision)
	}
	if err := a.Renew(ctx, la); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("the released lease's renewal: %v, want lost", err)
	}

	// Expiry: b stops renewing; a waits and takes over, not before TTL.
	renewed := time.Now()
	if err := b.Renew(ctx, lb); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	la2, err := a.Wait(wctx, 17, 0)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(renewed)
	if took < a.TTL()-50*time.Millisecond {
		t.Fatalf("taken over %v after the last renewal, before the TTL %v", took, a.TTL())
	}
	t.Logf("taken over %v after the last renewal (TTL %v)", took, a.TTL())
	if la2.Revision <= lb.Revision {
		t.Fatalf("revision %d after %d", la2.Revision, lb.Revision)
	}
	if err := b.Renew(ctx, lb); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("the expired owner's renewal: %v, want lost", err)
	}
	if err := b.Check(ctx, lb); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("the expired owner's check: %v, want lost", err)
	}
}

// Keep holds a lease past many TTLs, and returns ErrLost once another
// owner takes it.
func TestLeases_Keep(t *testing.T) {
	_, _, kv := start(t)
	ctx := context.Background()
	a, b := leases(t, kv, "engine-a"), leases(t, kv, "engine-b")
	la, err := a.Acquire(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	kctx, stop := context.WithCancel(ctx)
	kept := make(chan error, 1)
	go func() { kept <- a.Keep(kctx, la, 200*time.Millisecond) }()
	// b tries for 3 TTLs; the kept lease never expires under it.
	wctx, cancel := context.WithTimeout(ctx, 3*a.TTL())
	defer cancel()
	if l, err := b.Wait(wctx, 3, 100*time.Millisecond); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("a kept lease was taken: %+v, %v", l, err)
	}
	stop()
	if err := <-kept; err != nil {
		t.Fatal(err)
	}
	// Keep after another owner took the key: lost.
	if err := a.Release(ctx, la); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := a.Keep(ctx, la, 50*time.Millisecond); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("keep of a taken lease: %v, want lost", err)
	}
}

func TestLeases_BadInput(t *testing.T) {
	_, js, kv := start(t)
	ctx := context.Background()
	for _, owner := range []string{"", "a b", "é", string(make([]byte, 129))} {
		if _, err := lease.New(ctx, kv, owner); !errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("owner %q: %v, want invalid", owner, err)
		}
	}
	if _, err := lease.Bucket(ctx, js, lease.Config{Bucket: "SHORT", TTL: 100 * time.Millisecond}); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("a TTL below the minimum: %v", err)
	}
	plain, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "PLAIN"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lease.New(ctx, plain, "a"); !errors.Is(err, lease.ErrBucket) {
		t.Fatalf("a bucket without TTL: %v, want bucket error", err)
	}
	m := leases(t, kv, "a")
	for _, p := range []int{-1, 10000} {
		if _, err := m.Acquire(ctx, p); !errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("partition %d: %v", p, err)
		}
	}
}

// terminations counts the TERMINATION writes stored for d.
func terminations(t *testing.T, js jetstream.JetStream, d string) int {
	t.Helper()
	ctx := context.Background()
	st, err := js.Stream(ctx, "PARLEY_0000_1023")
	if err != nil {
		t.Fatal(err)
	}
	subj, _ := partition.Subject(wire.ArtifactSubject(d, wire.SupervisorToken))
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		t.Fatal(err)
	}
	return int(info.State.Subjects[subj])
}

// lastSeq is the last sequence of d's record (0: none), what an owner
// has read when it decides.
func lastSeq(t *testing.T, js jetstream.JetStream, d string) uint64 {
	t.Helper()
	st, err := js.Stream(context.Background(), "PARLEY_0000_1023")
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(context.Background(), partition.DeliberationFilter(d))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return m.Sequence
}

func termination(d string) *nats.Msg {
	m := nats.NewMsg(wire.ArtifactSubject(d, wire.SupervisorToken))
	m.Data = []byte(`{"type":"TERMINATION"}`)
	return m
}

// Two owners race to write a deliberation's TERMINATION through a
// takeover: the stale owner is stopped by its renewal when it comes back
// after the takeover, and by the record's condition when it writes inside
// the window (its renewal passed just before it expired); with both
// racing at once, many times, each deliberation has exactly one
// TERMINATION.
func TestGuarded_OneTermination(t *testing.T) {
	_, js, kv := start(t)
	ctx := context.Background()
	a, b := leases(t, kv, "engine-a"), leases(t, kv, "engine-b")
	d := uuid.NewString()
	p := partition.Of(d)
	if _, err := js.Publish(ctx, wire.ControlSubject(d), []byte(`{"open":true}`)); err != nil {
		t.Fatal(err)
	}

	// The stale owner comes back after the takeover: its renewal fails.
	la, err := a.Acquire(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	seenA := lastSeq(t, js, d) // a decides at this position, then pauses
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lb, err := b.Wait(wctx, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Guarded(ctx, js, la, termination(d), partition.DeliberationFilter(d), seenA); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("the stale owner's write: %v, want lost", err)
	}
	if _, err := b.Guarded(ctx, js, lb, termination(d), partition.DeliberationFilter(d), lastSeq(t, js, d)); err != nil {
		t.Fatalf("the owner's write: %v", err)
	}
	if n := terminations(t, js, d); n != 1 {
		t.Fatalf("%d TERMINATIONs, want 1", n)
	}

	// Inside the window: a's renewal passed, then a paused past its TTL;
	// b took over and wrote first. a's write is refused by the record.
	d2 := uuid.NewString()
	if _, err := js.Publish(ctx, wire.ControlSubject(d2), []byte(`{"open":true}`)); err != nil {
		t.Fatal(err)
	}
	p2 := partition.Of(d2)
	la2, err := a.Acquire(ctx, p2)
	if err != nil {
		t.Fatal(err)
	}
	seen := lastSeq(t, js, d2)
	if err := a.Renew(ctx, la2); err != nil { // a's step 1 passes …
		t.Fatal(err)
	}
	lb2, err := b.Wait(wctx, p2, 0) // … a pauses past its TTL
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Guarded(ctx, js, lb2, termination(d2), partition.DeliberationFilter(d2), lastSeq(t, js, d2)); err != nil {
		t.Fatal(err)
	}
	// a's step 2, as Guarded makes it after its renewal.
	msg := termination(d2)
	msg.Header.Set(lease.Header, la2.Stamp())
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, itoa(seen))
	msg.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, partition.DeliberationFilter(d2))
	if _, err := js.PublishMsg(ctx, msg); err == nil {
		t.Fatal("the stale owner's conditional write was stored")
	}
	if n := terminations(t, js, d2); n != 1 {
		t.Fatalf("%d TERMINATIONs, want 1", n)
	}

	// Both at once, each having read the same position, each through
	// Guarded with its own live lease revision (two partitions' worth of
	// owners is not needed: the condition is per deliberation).
	for range 50 {
		d := uuid.NewString()
		if _, err := js.Publish(ctx, wire.ControlSubject(d), []byte(`{"open":true}`)); err != nil {
			t.Fatal(err)
		}
		p := partition.Of(d)
		l1, err := a.Acquire(ctx, p)
		if err != nil {
			// p may be one of the partitions above, still held: skip it.
			continue
		}
		seen := lastSeq(t, js, d)
		l2 := *l1 // the stale view of the same lease, as a paused owner keeps it
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, l := range []*lease.Lease{l1, &l2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = a.Guarded(ctx, js, l, termination(d), partition.DeliberationFilter(d), seen)
			}()
		}
		wg.Wait()
		if n := terminations(t, js, d); n != 1 {
			t.Fatalf("%d TERMINATIONs after a race (%v, %v), want 1", n, errs[0], errs[1])
		}
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("race: %v, %v: want exactly one refused", errs[0], errs[1])
		}
		if err := a.Release(ctx, l1); err != nil && !errors.Is(err, lease.ErrLost) {
			t.Fatal(err)
		}
		if l2.Revision > l1.Revision {
			_ = a.Release(ctx, &l2)
		}
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
