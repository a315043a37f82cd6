package lease_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/lease"
	"github.com/parley-engine/parley/partition"
)

// groupBucket is the group tests' lease bucket, with a TTL of 3 s: a
// round renews hundreds of leases, which takes longer than the 1 s of
// the other tests' bucket under the race detector.
const groupBucket = "GROUP_LEASES"

func startGroup(t *testing.T) (*server.Server, jetstream.KeyValue) {
	t.Helper()
	s, js, _ := start(t)
	kv, err := lease.Bucket(context.Background(), js, lease.Config{Bucket: groupBucket, TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s, kv
}

// member is one engine of a group in a test: its own connection, its
// group, and the way to stop it.
type member struct {
	name   string
	nc     *nats.Conn
	g      *lease.Group
	cancel context.CancelFunc
	done   chan error
}

func join(t *testing.T, s *server.Server, name string) *member {
	t.Helper()
	nc, err := nats.Connect("", nats.InProcessServer(s))
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(context.Background(), groupBucket)
	if err != nil {
		t.Fatal(err)
	}
	l, err := lease.New(context.Background(), kv, name)
	if err != nil {
		t.Fatal(err)
	}
	g, err := lease.NewGroup(l, lease.GroupConfig{Partitions: partition.Count})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{name: name, nc: nc, g: g, cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- g.Run(ctx) }()
	t.Cleanup(func() { cancel(); nc.Close() })
	return m
}

// owners reads every partition's lease from the bucket: its owner by
// partition ("" when none holds it).
func owners(t *testing.T, kv jetstream.KeyValue) []string {
	t.Helper()
	out := make([]string, partition.Count)
	keys, err := kv.ListKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		var p int
		if _, err := fmt.Sscanf(k, "partition.%d", &p); err != nil {
			continue
		}
		e, err := kv.Get(context.Background(), k)
		if err != nil {
			continue
		}
		var v struct{ Owner string }
		json.Unmarshal(e.Value(), &v)
		out[p] = v.Owner
	}
	return out
}

// shared reports whether the members hold every partition between them,
// none twice, each about its share (⌈Count/len(ms)⌉ at most), and the
// bucket agrees with what each says it holds.
func shared(t *testing.T, kv jetstream.KeyValue, ms ...*member) (bool, string) {
	t.Helper()
	share := (partition.Count + len(ms) - 1) / len(ms)
	by := owners(t, kv)
	seen := make([]string, partition.Count)
	var sizes []int
	for _, m := range ms {
		held := m.g.Held()
		sizes = append(sizes, len(held))
		if len(held) > share {
			return false, fmt.Sprintf("%s holds %d, the share is %d", m.name, len(held), share)
		}
		for _, p := range held {
			if seen[p] != "" {
				return false, fmt.Sprintf("partition %d held by %s and %s", p, seen[p], m.name)
			}
			seen[p] = m.name
			if by[p] != m.name {
				return false, fmt.Sprintf("partition %d: %s says it holds it, the bucket says %q", p, m.name, by[p])
			}
		}
	}
	if i := slices.Index(seen, ""); i >= 0 {
		return false, fmt.Sprintf("partition %d held by none (sizes %v)", i, sizes)
	}
	return true, fmt.Sprint(sizes)
}

// Three engines share the 1,024 partitions, each about a third, none
// twice; one dies (its connection closed, nothing released) and the two
// others take its partitions once its leases expire; a fourth joins and
// the shares even out again; one stops and hands its partitions over at
// once, without waiting for the TTL.
func TestGroup_SharesTakesOverAndHandsOver(t *testing.T) {
	s, kv := startGroup(t)
	a, b, c := join(t, s, "a"), join(t, s, "b"), join(t, s, "c")
	var why string
	if !eventually.Within(20*time.Second, func() (ok bool) { ok, why = shared(t, kv, a, b, c); return }) {
		t.Fatalf("three engines never shared the partitions: %s", why)
	}
	t.Logf("three engines: %s", why)

	// b dies: its connection goes, its leases are not released.
	died := time.Now()
	b.nc.Close()
	if !eventually.Within(30*time.Second, func() (ok bool) { ok, why = shared(t, kv, a, c); return }) {
		t.Fatalf("the two others never took b's partitions: %s", why)
	}
	t.Logf("b died; a and c hold every partition %v later: %s", time.Since(died).Round(10*time.Millisecond), why)

	// d joins.
	d := join(t, s, "d")
	if !eventually.Within(20*time.Second, func() (ok bool) { ok, why = shared(t, kv, a, c, d); return }) {
		t.Fatalf("a new engine never got its share: %s", why)
	}
	t.Logf("d joined: %s", why)

	// a stops: it releases what it holds, and the others take it before
	// its leases would have expired.
	stopped := time.Now()
	a.cancel()
	<-a.done
	if held := a.g.Held(); len(held) != 0 {
		t.Errorf("a still holds %d partitions after it stopped", len(held))
	}
	if !eventually.Within(20*time.Second, func() (ok bool) { ok, why = shared(t, kv, c, d); return }) {
		t.Fatalf("the others never took a's partitions: %s", why)
	}
	t.Logf("a stopped; c and d hold every partition %v later: %s", time.Since(stopped).Round(10*time.Millisecond), why)
}

// OnChange tells the engine what it holds, and nothing once it stops.
func TestGroup_OnChange(t *testing.T) {
	s, _, kv := start(t)
	nc, err := nats.Connect("", nats.InProcessServer(s))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	l, err := lease.New(context.Background(), kv, "solo")
	if err != nil {
		t.Fatal(err)
	}
	changes := make(chan []int, 16)
	g, err := lease.NewGroup(l, lease.GroupConfig{Partitions: 16, OnChange: func(h []int) { changes <- h }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	var last []int
	for deadline := time.After(10 * time.Second); len(last) < 16; {
		select {
		case last = <-changes:
		case <-deadline:
			t.Fatalf("a lone engine holds %v, want all 16", last)
		}
	}
	for p := range 16 {
		if !g.Holds(p) {
			t.Errorf("partition %d not held", p)
		}
		if stamp, err := g.Renew(context.Background(), p); err != nil || stamp != fmt.Sprintf("partition.%04d@", p)+stamp[len("partition.0000@"):] {
			t.Errorf("renew partition %d: %q %v", p, stamp, err)
		}
	}
	if _, err := g.Renew(context.Background(), 16); !errors.Is(err, lease.ErrLost) {
		t.Errorf("renew a partition not held: %v", err)
	}
	cancel()
	<-done
	for {
		select {
		case h := <-changes:
			if h == nil {
				return
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no change to nothing after the engine stopped")
		}
	}
}

func TestGroup_Invalid(t *testing.T) {
	_, _, kv := start(t)
	l, _ := lease.New(context.Background(), kv, "a.b")
	if _, err := lease.NewGroup(l, lease.GroupConfig{Partitions: 1024}); err == nil {
		t.Error("a member named a.b: no error")
	}
	l, _ = lease.New(context.Background(), kv, "ok")
	for _, n := range []int{0, -1, 10001} {
		if _, err := lease.NewGroup(l, lease.GroupConfig{Partitions: n}); err == nil {
			t.Errorf("%d partitions: no error", n)
		}
	}
}

// Groups of streams beside a group of partitions in one bucket: each
// counts its own members and holds its own keys; the owner of a stream is
// read with what its member key holds; a stopped engine's streams go to
// the other at once.
func TestGroup_StreamsBesidePartitions(t *testing.T) {
	s, kv := startGroup(t)
	ctx := context.Background()
	parts := join(t, s, "p1") // a group of partitions, alone
	type streamMember struct {
		g      *lease.Group
		cancel context.CancelFunc
		done   chan error
	}
	joinStreams := func(name string) *streamMember {
		nc, err := nats.Connect("", nats.InProcessServer(s))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, _ := jetstream.New(nc)
		kv, _ := js.KeyValue(ctx, groupBucket)
		l, err := lease.New(ctx, kv, name)
		if err != nil {
			t.Fatal(err)
		}
		g, err := lease.NewGroup(l.Of(lease.Stream), lease.GroupConfig{Partitions: 4, Member: []byte(`{"url":"http://` + name + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		m := &streamMember{g: g, cancel: cancel, done: make(chan error, 1)}
		go func() { m.done <- g.Run(cctx) }()
		t.Cleanup(cancel)
		return m
	}
	a, b := joinStreams("a"), joinStreams("b")
	if !eventually.Within(15*time.Second, func() bool {
		return len(a.g.Held()) == 2 && len(b.g.Held()) == 2 && len(parts.g.Held()) == partition.Count
	}) {
		t.Fatalf("held: a %v, b %v, partitions %d", a.g.Held(), b.g.Held(), len(parts.g.Held()))
	}
	for st := range 4 {
		name, member, err := a.g.Owner(ctx, st)
		want := "a"
		if b.g.Holds(st) {
			want = "b"
		}
		if err != nil || name != want || string(member) != `{"url":"http://`+want+`"}` {
			t.Errorf("stream %d: owner %q %s %v, want %s", st, name, member, err, want)
		}
	}
	if _, err := kv.Get(ctx, lease.UnitKey(lease.Stream, 0)); err != nil {
		t.Errorf("no stream.0000 key: %v", err)
	}
	if _, err := kv.Get(ctx, lease.UnitMemberKey(lease.Stream, "a")); err != nil {
		t.Errorf("no stream-member.a key: %v", err)
	}
	// a stops: b holds all four at once (a released its leases).
	a.cancel()
	<-a.done
	if !eventually.Within(10*time.Second, func() bool { return len(b.g.Held()) == 4 }) {
		t.Fatalf("b holds %v after a stopped", b.g.Held())
	}
	if len(parts.g.Held()) != partition.Count {
		t.Errorf("the group of partitions holds %d", len(parts.g.Held()))
	}
	if _, err := lease.NewGroup(mustLeases(t, kv, "c").Of(lease.Stream), lease.GroupConfig{Partitions: 4, Member: make([]byte, 1025)}); err == nil {
		t.Error("a member value of 1,025 bytes was taken")
	}
}

func mustLeases(t *testing.T, kv jetstream.KeyValue, name string) *lease.Leases {
	t.Helper()
	l, err := lease.New(context.Background(), kv, name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
