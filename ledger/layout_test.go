package ledger_test

import (
	"context"
	"errors"
	"slices"
	"testing"

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
	if _, err := ledger.LayoutOf("PARLEY_0000_0511"); !errors.Is(err, ledger.ErrLayout) {
		t.Errorf("a stream of two: %v", err)
	}
	if _, err := ledger.LayoutOf("OTHER"); err == nil || errors.Is(err, ledger.ErrLayout) {
		t.Errorf("another stream: %v", err)
	}
}

// Detect and Locate on a real server: nothing, one layout, both (refused),
// a partitioned layout of two streams (refused: not supported yet).
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
	if _, _, err := ledger.Detect(ctx, js); !errors.Is(err, ledger.ErrLayout) {
		t.Errorf("two streams: %v", err)
	}
}
