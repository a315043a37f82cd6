package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/internal/jstest"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/partition"
	"github.com/parley-engine/parley/wire"
)

func TestLayout_Names(t *testing.T) {
	const d = "0195b3c1-7c2a-7d4e-8f10-2a3b4c5d6e7f" // partition 19
	for _, c := range []struct {
		l                      ledger.Layout
		stream, filter, stored string
		subjects               []string
	}{
		{ledger.Unpartitioned, "PARLEY", "parley." + d + ".>", "parley." + d + ".art.alice", wire.StreamSubjects},
		{ledger.Partitioned, "PARLEY_0000_1023", "parley.p.19." + d + ".>", "parley.p.19." + d + ".art.alice",
			[]string{"parley.p.*.*.art.*", "parley.p.*.*.ctl"}},
	} {
		if c.l.Stream() != c.stream || c.l.Filter(d) != c.filter || c.l.Stored(wire.ArtifactSubject(d, "alice")) != c.stored ||
			!slices.Equal(c.l.Subjects(), c.subjects) {
			t.Errorf("%s: %s %s %s %v", c.l, c.l.Stream(), c.l.Filter(d), c.l.Stored(wire.ArtifactSubject(d, "alice")), c.l.Subjects())
		}
		if got, err := c.l.Original(c.stored); err != nil || got != wire.ArtifactSubject(d, "alice") {
			t.Errorf("%s: Original(%s) = %s, %v", c.l, c.stored, got, err)
		}
		if got, err := ledger.LayoutOf(c.stream); err != nil || got != c.l {
			t.Errorf("LayoutOf(%s) = %s, %v", c.stream, got, err)
		}
		if c.l.Check(c.l.StreamConfig(1)) != nil {
			t.Errorf("%s: its own configuration fails its check", c.l)
		}
	}
	// A misplaced stored subject stays as it is, with the error.
	misplaced := "parley.p.20." + d + ".art.alice"
	if got, err := ledger.Partitioned.Original(misplaced); got != misplaced || !errors.Is(err, partition.ErrMisplaced) {
		t.Errorf("Original(%s) = %s, %v", misplaced, got, err)
	}
	// The other layout's subjects are not the stream's.
	if ledger.Partitioned.Check(ledger.Unpartitioned.StreamConfig(1)) == nil {
		t.Error("the unpartitioned configuration passes the partitioned check")
	}
	two, err := ledger.PartitionedOver(2)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ledger.LayoutOf("PARLEY_0512_1023"); err != nil || got != two || got.N() != 2 {
		t.Errorf("a stream of two: %v %v", got, err)
	}
	if k, ok := two.IndexOf("PARLEY_0512_1023"); !ok || k != 1 {
		t.Errorf("IndexOf: %d %v", k, ok)
	}
	if _, ok := two.IndexOf("PARLEY_0000_1023"); ok {
		t.Error("the one-stream layout's stream is a stream of two")
	}
	for _, bad := range []string{"PARLEY_0000_0599", "PARLEY_0001_0512", "PARLEY_0100_0611"} {
		if _, err := ledger.LayoutOf(bad); !errors.Is(err, ledger.ErrLayout) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	for _, bad := range []string{"PARLEY_1_2", "PARLEY_0000_1024", "PARLEY_0512_0511", "PARLEY_x000_0511"} {
		if _, err := ledger.LayoutOf(bad); err == nil || errors.Is(err, ledger.ErrLayout) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	for _, n := range []int{0, 3, 6, 2048, -1} {
		if _, err := ledger.PartitionedOver(n); !errors.Is(err, ledger.ErrLayout) {
			t.Errorf("PartitionedOver(%d): %v", n, err)
		}
	}
	if l, _ := ledger.PartitionedOver(1); l != ledger.Partitioned {
		t.Errorf("PartitionedOver(1) = %s", l)
	}
	if _, err := ledger.LayoutOf("OTHER"); err == nil || errors.Is(err, ledger.ErrLayout) {
		t.Errorf("another stream: %v", err)
	}
}

// Detect and Locate on a real server: nothing, one layout, both (refused),
// a partitioned layout of two streams, streams of two layouts (refused).
func TestLayout_DetectAndLocate(t *testing.T) {
	ctx := context.Background()
	_, nc := jstest.Start(t)
	js, _ := jetstream.New(nc)
	if _, ok, err := ledger.Detect(ctx, js); ok || err != nil {
		t.Fatalf("an empty server: %v %v", ok, err)
	}
	if _, _, err := ledger.Locate(ctx, js); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("Locate on an empty server: %v", err)
	}
	if _, err := ledger.Partitioned.Ensure(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	if l, ok, err := ledger.Detect(ctx, js); !ok || err != nil || l != ledger.Partitioned {
		t.Fatalf("Detect: %s %v %v", l, ok, err)
	}
	if l, s, err := ledger.Locate(ctx, js); err != nil || l != ledger.Partitioned || s.CachedInfo().Config.Name != "PARLEY_0000_1023" {
		t.Fatalf("Locate: %s %v", l, err)
	}
	// Both layouts.
	if _, err := ledger.Unpartitioned.Ensure(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ledger.Detect(ctx, js); !errors.Is(err, ledger.ErrLayout) {
		t.Errorf("both layouts: %v", err)
	}
	if err := js.DeleteStream(ctx, "PARLEY"); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, "PARLEY_0000_1023"); err != nil {
		t.Fatal(err)
	}
	// Two streams of a partitioned layout.
	l2, _ := partition.NewLayout(2)
	for _, r := range l2.Streams() {
		cfg := ledger.StreamConfig(1)
		cfg.Name, cfg.Subjects = r.Name(), r.Subjects()
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	two, _ := ledger.PartitionedOver(2)
	if l, ok, err := ledger.Detect(ctx, js); !ok || err != nil || l != two {
		t.Errorf("two streams: %s %v %v", l, ok, err)
	}
	if l, s, err := ledger.Locate(ctx, js); err != nil || l != two || s.CachedInfo().Config.Name != "PARLEY_0000_0511" {
		t.Errorf("Locate two streams: %s %v", l, err)
	}
	// One stream of a layout of four in place of the second of two.
	if err := js.DeleteStream(ctx, "PARLEY_0512_1023"); err != nil {
		t.Fatal(err)
	}
	four, _ := ledger.PartitionedOver(4)
	if _, err := js.CreateStream(ctx, four.StreamConfigAt(3, 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ledger.Detect(ctx, js); !errors.Is(err, ledger.ErrLayout) {
		t.Errorf("streams of two layouts: %v", err)
	}
}

// Positions over several streams: a stream's index in the high bits, its
// sequence in the low ones; one stream's positions are its sequences.
func TestLayout_Positions(t *testing.T) {
	four, _ := ledger.PartitionedOver(4)
	if got := four.Streams(); len(got) != 4 || got[0] != "PARLEY_0000_0255" || got[3] != "PARLEY_0768_1023" {
		t.Fatalf("Streams: %v", got)
	}
	for k := range 4 {
		for _, seq := range []uint64{1, 2, 1 << 30, ledger.MaxSequence} {
			p := four.Position(k, seq)
			if gk, gs, ok := four.Split(p); !ok || gk != k || gs != seq || ledger.Sequence(p) != seq {
				t.Errorf("Split(Position(%d, %d)) = %d %d %v", k, seq, gk, gs, ok)
			}
			if pp, ok := four.PositionOf(four.StreamAt(k), seq); !ok || pp != p {
				t.Errorf("PositionOf(%s, %d) = %d %v", four.StreamAt(k), seq, pp, ok)
			}
			if p >= 1<<53 {
				t.Errorf("position %d is beyond JSON's exact integers", p)
			}
		}
	}
	if _, _, ok := four.Split(four.Position(4, 1)); ok {
		t.Error("a fifth stream's position splits")
	}
	if ledger.Partitioned.Position(0, 77) != 77 || ledger.Unpartitioned.Position(0, 77) != 77 {
		t.Error("one stream's position is not its sequence")
	}
	// A deliberation's stream is the one of its partition's range.
	d := "0195b3c1-7c2a-7d4e-8f10-2a3b4c5d6e7f" // partition 19
	if four.Index(d) != 0 || four.StreamOf(d) != "PARLEY_0000_0255" {
		t.Errorf("%s: %d %s", d, four.Index(d), four.StreamOf(d))
	}
	for i := range 200 {
		id := uuid.NewString()
		if k := four.Index(id); k != partition.Of(id)/256 {
			t.Fatalf("%d: %s in stream %d, partition %d", i, id, k, partition.Of(id))
		}
	}
}

// A read of every deliberation over four streams merges them; each
// deliberation's messages come in order, each position names its stream.
func TestLayout_ReadAllStreams(t *testing.T) {
	ctx := context.Background()
	_, nc := jstest.StartPartitioned(t)
	js, _ := jetstream.New(nc)
	four, _ := ledger.PartitionedOver(4)
	if _, err := four.EnsureAll(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 12)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	const per = 5
	for j := range per {
		for _, id := range ids {
			if _, err := js.Publish(ctx, wire.ArtifactSubject(id, "alice"), []byte(fmt.Sprint(j))); err != nil {
				t.Fatal(err)
			}
		}
	}
	rd, err := four.Read(ctx, nc, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Stop()
	next := map[string]int{}
	for range len(ids) * per {
		m, err := rd.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d, _, _ := strings.Cut(strings.TrimPrefix(m.Subject, "parley."), ".")
		if string(m.Data) != fmt.Sprint(next[d]) {
			t.Fatalf("%s: message %s, want %d", d, m.Data, next[d])
		}
		next[d]++
		p, err := rd.Position(m)
		if err != nil {
			t.Fatal(err)
		}
		if k, _, _ := four.Split(p); k != four.Index(d) {
			t.Fatalf("%s: position %d in stream %d, want %d", d, p, k, four.Index(d))
		}
	}
	if len(next) != len(ids) {
		t.Fatalf("read %d deliberations, want %d", len(next), len(ids))
	}
	// A read of one deliberation from a position of another stream is refused.
	var other string
	for _, id := range ids[1:] {
		if four.Index(id) != four.Index(ids[0]) {
			other = id
			break
		}
	}
	if other != "" {
		if _, err := four.Read(ctx, nc, four.Filter(ids[0]), four.Position(four.Index(other), 1)); err == nil {
			t.Error("a read from another stream's position was not refused")
		}
	}
	if _, err := four.Read(ctx, nc, "", 5); err == nil {
		t.Error("a merged read from a position was not refused")
	}
}
