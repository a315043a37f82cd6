package runner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/jstest"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

type bed struct {
	t      *testing.T
	js     jetstream.JetStream
	stream jetstream.Stream
	snap   string
	n      int // claims published, for distinct statements
}

func newBed(t *testing.T) *bed {
	t.Helper()
	_, nc := jstest.Start(t)
	js, _ := jetstream.New(nc)
	stream, err := ledger.Ensure(context.Background(), js, 1)
	if err != nil {
		t.Fatal(err)
	}
	return &bed{t: t, js: js, stream: stream, snap: filepath.Join(t.TempDir(), "projection.snapshot")}
}

func (b *bed) runner(shards int) (*runner.Runner, context.CancelFunc, chan error) {
	b.t.Helper()
	r, err := runner.New(context.Background(), b.js, b.stream, runner.Config{SnapshotPath: b.snap, Shards: shards,
		Projector: projector.Options{Rules: termination.Rules{}}})
	if err != nil {
		b.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return r, cancel, done
}

func (b *bed) publish(subject string, data []byte) uint64 {
	b.t.Helper()
	ack, err := b.js.Publish(context.Background(), subject, data)
	if err != nil {
		b.t.Fatal(err)
	}
	return ack.Sequence
}

func (b *bed) open(id string) {
	b.publish(wire.ControlSubject(id), []byte(`{"op":"open","charter":{"title":"t"}}`))
}

func (b *bed) claims(id string, n int) uint64 {
	var last uint64
	for range n {
		b.n++
		a := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprintf("claim %d of %s", b.n, id)}})
		last = b.publish(wire.ArtifactSubject(id, "alice"), a.Canonical)
	}
	return last
}

func digests(r *runner.Runner) map[string]string {
	out := map[string]string{}
	r.EachDeliberation(func(d *projector.Deliberation) { out[d.ID] = d.StateDigest().String() })
	return out
}

const (
	delibA = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a01"
	delibB = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a02"
)

// A long read of one deliberation (a closure verification of a huge one,
// say) holds back only that deliberation's messages: another's are applied
// meanwhile, in any shard, and the held ones follow once the read ends.
func TestRunner_LongReadHoldsOnlyItsDeliberation(t *testing.T) {
	for _, shards := range []int{1, 8} {
		t.Run(fmt.Sprint(shards, " shards"), func(t *testing.T) {
			b := newBed(t)
			r, cancel, done := b.runner(shards)
			defer func() { cancel(); <-done }()
			ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
			defer stop()
			b.open(delibA)
			b.open(delibB)
			if err := r.WaitFor(ctx, b.claims(delibA, 1)); err != nil {
				t.Fatal(err)
			}
			reading, release := make(chan struct{}), make(chan struct{})
			go r.ReadDeliberation(delibA, func(*projector.Deliberation) { close(reading); <-release })
			<-reading
			lastA := b.claims(delibA, 20)
			lastB := b.claims(delibB, 20)
			wctx, wstop := context.WithTimeout(ctx, 5*time.Second)
			if err := r.WaitForIn(wctx, delibB, lastB); err != nil {
				t.Fatalf("B waited for A's reader: %v", err)
			}
			wstop()
			var artsB int
			r.ReadDeliberation(delibB, func(d *projector.Deliberation) { artsB = d.Artifacts() })
			if artsB != 20 || r.Position() >= lastA {
				t.Fatalf("B has %d artifacts; position %d (A's last %d)", artsB, r.Position(), lastA)
			}
			close(release)
			if err := r.WaitFor(ctx, lastB); err != nil {
				t.Fatal(err)
			}
			var artsA int
			r.ReadDeliberation(delibA, func(d *projector.Deliberation) { artsA = d.Artifacts() })
			if artsA != 21 {
				t.Fatalf("A has %d artifacts", artsA)
			}
		})
	}
}

// A long read that yields lets the fold apply its deliberation's messages
// while it goes on: inside one read, the messages published after it began
// become visible, each after a yield.
func TestRunner_YieldingReadLetsTheFoldIn(t *testing.T) {
	b := newBed(t)
	r, cancel, done := b.runner(8)
	defer func() { cancel(); <-done }()
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	b.open(delibA)
	if err := r.WaitFor(ctx, b.claims(delibA, 1)); err != nil {
		t.Fatal(err)
	}
	published := make(chan uint64, 1)
	yields, seen := 0, 0
	r.ReadDeliberationYielding(delibA, func(d *projector.Deliberation, yield func(time.Duration)) {
		seen = d.Artifacts()
		go func() { published <- b.claims(delibA, 5) }()
		last := <-published
		for d.Position < last && ctx.Err() == nil {
			yield(0)
			yields++
		}
		seen = d.Artifacts()
	})
	if ctx.Err() != nil || seen != 6 {
		t.Fatalf("inside one read, %d artifacts after %d yields (%v): the fold waited for the reader", seen, yields, ctx.Err())
	}
}

// Each shard is snapshotted on its own; a restart restores every shard
// and reads the stream from the lowest position, and gives the states the
// live engine had; snapshots of another number of shards are not used.
func TestRunner_ShardSnapshots(t *testing.T) {
	b := newBed(t)
	r, cancel, done := b.runner(4)
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	ids := []string{delibA, delibB, "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a03", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a04", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a05"}
	var last uint64
	for _, id := range ids {
		b.open(id)
		last = b.claims(id, 5)
	}
	if err := r.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	if err := r.Snapshot(); err != nil {
		t.Fatal(err)
	}
	// More after the snapshot, then a stop (which snapshots again only at
	// the end: kill it instead, as SIGKILL would).
	for _, id := range ids[:2] {
		last = b.claims(id, 3)
	}
	if err := r.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	want := digests(r)
	cancel()
	<-done
	files, _ := filepath.Glob(b.snap + ".*-of-4")
	if len(files) != 4 {
		t.Fatalf("snapshot files %v", files)
	}
	os.WriteFile(filepath.Join(filepath.Dir(b.snap), ".snapshot-123"), []byte("half written"), 0o600)

	r2, cancel2, done2 := b.runner(4)
	if err := r2.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	if got := digests(r2); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored %v, want %v", got, want)
	}
	cancel2()
	<-done2
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(b.snap), ".snapshot-*")); len(left) != 0 {
		t.Fatalf("leftover temporary files %v", left)
	}
	// One deliberation over 8 shards: the empty shards have their files
	// too, and a restart uses them.
	b8 := newBed(t)
	r8, cancel8, done8 := b8.runner(8)
	b8.open(delibA)
	last8 := b8.claims(delibA, 3)
	if err := r8.WaitFor(ctx, last8); err != nil {
		t.Fatal(err)
	}
	cancel8()
	<-done8
	if files, _ := filepath.Glob(b8.snap + ".*-of-8"); len(files) != 8 {
		t.Fatalf("snapshot files %v", files)
	}
	r8b, err := runner.New(ctx, b8.js, b8.stream, runner.Config{SnapshotPath: b8.snap, Shards: 8, Projector: projector.Options{Rules: termination.Rules{}}})
	if err != nil {
		t.Fatal(err)
	}
	if r8b.Position() != last8 {
		t.Fatalf("restored at %d, want %d: the snapshots were not used", r8b.Position(), last8)
	}

	// Another number of shards: rebuilt from the stream, the same states.
	r3, cancel3, done3 := b.runner(3)
	defer func() { cancel3(); <-done3 }()
	if err := r3.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	if got := digests(r3); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rebuilt %v, want %v", got, want)
	}
}

// Readers that follow one another on a deliberation, always one of them
// holding it, do not starve its fold: while the shard holds its messages
// back, new readers wait for them to be applied.
func TestRunner_ReadersDoNotStarveTheFold(t *testing.T) {
	b := newBed(t)
	r, cancel, done := b.runner(2)
	defer func() { cancel(); <-done }()
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	b.open(delibA)
	if err := r.WaitFor(ctx, b.claims(delibA, 1)); err != nil {
		t.Fatal(err)
	}
	quit := make(chan struct{})
	var readers sync.WaitGroup
	for range 8 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-quit:
					return
				default:
				}
				// Each read holds the lock for a while: the subject.
				r.ReadDeliberation(delibA, func(*projector.Deliberation) { time.Sleep(5 * time.Millisecond) })
			}
		}()
	}
	last := b.claims(delibA, 50)
	wctx, wstop := context.WithTimeout(ctx, 5*time.Second)
	err := r.WaitForIn(wctx, delibA, last)
	wstop()
	close(quit)
	readers.Wait()
	if err != nil {
		t.Fatalf("the readers starved the fold: %v", err)
	}
}

// A shard's snapshot pauses the shard only while its state is frozen:
// while the snapshot of the shard is being written (held here for as long
// as the test likes), the shard goes on applying messages of the very
// deliberation being written, and the file written is the state at the
// freeze, which a restart completes from the stream.
func TestRunner_FoldGoesOnWhileItsSnapshotIsWritten(t *testing.T) {
	b := newBed(t)
	r, cancel, done := b.runner(1)
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	b.open(delibA)
	if err := r.WaitFor(ctx, b.claims(delibA, 10)); err != nil {
		t.Fatal(err)
	}
	writing, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	runner.SetSnapshotWriteHook(r, func(int) { once.Do(func() { close(writing); <-release }) })
	snapped := make(chan error, 1)
	go func() { snapped <- r.Snapshot() }()
	<-writing
	last := b.claims(delibA, 20)
	wctx, wstop := context.WithTimeout(ctx, 5*time.Second)
	err := r.WaitForIn(wctx, delibA, last)
	wstop()
	if err != nil {
		t.Fatalf("the shard applied nothing while its snapshot was written: %v", err)
	}
	var arts int
	r.ReadDeliberation(delibA, func(d *projector.Deliberation) { arts = d.Artifacts() })
	if arts != 30 {
		t.Fatalf("%d artifacts while the snapshot was written, want 30", arts)
	}
	close(release)
	if err := <-snapped; err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(b.snap + ".0-of-1")
	if err != nil {
		t.Fatal(err)
	}
	p, err := projector.ReadSnapshot(f, projector.Options{Rules: termination.Rules{}})
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Deliberation(delibA); d == nil || d.Artifacts() != 10 {
		t.Fatalf("the snapshot written is not the state at its freeze (10 artifacts): %v", d)
	}
	want := digests(r)
	cancel()
	if err := <-done; err != nil && err != context.Canceled {
		t.Fatal(err)
	}
	// A restart from the (final) snapshots has the same state.
	r2, cancel2, done2 := b.runner(1)
	defer func() { cancel2(); <-done2 }()
	if err := r2.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	if got := digests(r2); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after a restart: %v, want %v", got, want)
	}
}
