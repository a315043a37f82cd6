package runner_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/termination"
)

// bucket creates the snapshot bucket on b's server.
func (b *bed) bucket() jetstream.ObjectStore {
	b.t.Helper()
	obs, err := b.js.CreateObjectStore(context.Background(), jetstream.ObjectStoreConfig{Bucket: runner.DefaultSnapshotBucket})
	if err != nil {
		b.t.Fatal(err)
	}
	return obs
}

func objectStore(t *testing.T, obs jetstream.ObjectStore, prefix string) runner.SnapshotStore {
	t.Helper()
	st, err := runner.ObjectSnapshots(context.Background(), obs, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// failing is a store whose writes fail once fail is set: an engine killed
// before its next snapshot.
type failing struct {
	runner.SnapshotStore
	fail atomic.Bool
}

func (f *failing) Write(ctx context.Context, i, n int, write func(io.Writer) error) error {
	if f.fail.Load() {
		return errors.New("killed")
	}
	return f.SnapshotStore.Write(ctx, i, n, write)
}

func (b *bed) runnerOn(store runner.SnapshotStore, shards int, cfg runner.Config) *runner.Runner {
	b.t.Helper()
	cfg.Snapshots, cfg.Shards, cfg.Projector = store, shards, projector.Options{Rules: termination.Rules{}}
	r, err := runner.New(context.Background(), b.js, b.stream, cfg)
	if err != nil {
		b.t.Fatal(err)
	}
	return r
}

func run(t *testing.T, r *runner.Runner) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	}
}

// An engine keeps its snapshots in the object store; another, with no
// data directory of its own, restores from them: it reads the stream
// after their position, and ends with the states the first had and a
// replay of the whole stream gives. Another group's prefix in the same
// bucket sees none of them.
func TestRunner_ObjectSnapshotsRestoreElsewhere(t *testing.T) {
	b := newBed(t)
	obs := b.bucket()
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	storeA := &failing{SnapshotStore: objectStore(t, obs, "groupA")}
	a := b.runnerOn(storeA, 4, runner.Config{})
	stopA := run(t, a)
	ids := []string{delibA, delibB, "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a03", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a04"}
	var snapAt uint64
	for _, id := range ids {
		b.open(id)
		snapAt = b.claims(id, 30)
	}
	if err := a.WaitFor(ctx, snapAt); err != nil {
		t.Fatal(err)
	}
	if err := a.Snapshot(); err != nil {
		t.Fatal(err)
	}
	kept, err := storeA.List(ctx)
	if err != nil || len(kept) != 4 {
		t.Fatalf("objects %v, %v; want 4", kept, err)
	}
	for i, k := range kept {
		if k.Name != fmt.Sprintf("groupA.%d-of-4", i) || k.Shard != i || k.Of != 4 || k.Size == 0 {
			t.Fatalf("object %d: %+v", i, k)
		}
	}
	// A tail after the snapshot, and A dies before its next one.
	var last uint64
	for _, id := range ids[:2] {
		last = b.claims(id, 10)
	}
	if err := a.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	want := digests(a)
	storeA.fail.Store(true)
	stopA()

	// B: the same bucket through a store of its own, and no files at all.
	bStore := objectStore(t, obs, "groupA")
	r := b.runnerOn(bStore, 4, runner.Config{})
	if err := r.SnapshotsNotUsed(); err != nil {
		t.Fatal(err)
	}
	if r.StartPosition() != snapAt || r.Position() != snapAt {
		t.Fatalf("B starts after %d (position %d), want after the snapshots' %d", r.StartPosition(), r.Position(), snapAt)
	}
	stopB := run(t, r)
	defer stopB()
	if err := r.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	if got := digests(r); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored %v, want %v", got, want)
	}
	// A replay of the whole stream.
	replay := b.runnerOn(nil, 4, runner.Config{})
	stopReplay := run(t, replay)
	defer stopReplay()
	if err := replay.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	if replay.StartPosition() != 0 {
		t.Fatalf("replay starts after %d", replay.StartPosition())
	}
	if got := digests(replay); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replayed %v, want %v", got, want)
	}
	// Another group in the bucket: nothing of A's.
	other := b.runnerOn(objectStore(t, obs, "groupB"), 4, runner.Config{})
	if other.StartPosition() != 0 || other.SnapshotsNotUsed() != nil {
		t.Fatalf("another prefix starts after %d (%v)", other.StartPosition(), other.SnapshotsNotUsed())
	}
}

// snapshotOne writes the snapshot of a one-shard runner on the bucket
// under prefix, at the head of a stream of one deliberation, and returns
// the stream's last position and the states.
func snapshotOne(t *testing.T, b *bed, store runner.SnapshotStore) (uint64, map[string]string) {
	t.Helper()
	b.open(delibA)
	last := b.claims(delibA, 20)
	r := b.runnerOn(store, 1, runner.Config{})
	stop := run(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	want := digests(r)
	stop() // writes the last snapshot
	return last, want
}

// rebuilt checks that a runner whose snapshots were not used rebuilds the
// projection from the whole stream.
func rebuilt(t *testing.T, r *runner.Runner, last uint64, want map[string]string) {
	t.Helper()
	if r.StartPosition() != 0 {
		t.Fatalf("starts after %d: the snapshot was used", r.StartPosition())
	}
	stop := run(t, r)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	if got := digests(r); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rebuilt %v, want %v", got, want)
	}
}

// metaSubject is the subject of an object's meta message.
func metaSubject(name string) string {
	return "$O." + runner.DefaultSnapshotBucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name))
}

// An object that is not a valid snapshot is not used, with an error of
// its class, and the projection is rebuilt from the stream: garbage, a
// truncated snapshot, one whose chunks do not match the digest of its
// meta (the object store's SHA-256), one larger than the bound, and one
// whose meta says more bytes than its chunks hold.
func TestRunner_InvalidObjectSnapshots(t *testing.T) {
	b := newBed(t)
	obs := b.bucket()
	store := objectStore(t, obs, "g")
	last, want := snapshotOne(t, b, store)
	ctx := context.Background()
	good, err := obs.GetBytes(ctx, "g.0-of-1")
	if err != nil {
		t.Fatal(err)
	}
	forgeMeta := func(edit func(*jetstream.ObjectInfo)) {
		t.Helper()
		if _, err := obs.PutBytes(ctx, "g.0-of-1", good); err != nil {
			t.Fatal(err)
		}
		i, err := obs.GetInfo(ctx, "g.0-of-1")
		if err != nil {
			t.Fatal(err)
		}
		edit(i)
		m := nats.NewMsg(metaSubject("g.0-of-1"))
		m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
		m.Data, _ = json.Marshal(i)
		if _, err := b.js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		put   func()
		max   int64
		class error
		also  error
	}{
		{"garbage", func() { obs.PutString(ctx, "g.0-of-1", "not a snapshot at all") }, 0, runner.ErrSnapshotInvalid, nil},
		{"truncated", func() { obs.PutBytes(ctx, "g.0-of-1", good[:len(good)/2]) }, 0, runner.ErrSnapshotInvalid, nil},
		{"digest", func() {
			forgeMeta(func(i *jetstream.ObjectInfo) {
				i.Digest = "SHA-256=" + base64.URLEncoding.EncodeToString(make([]byte, 32))
			})
		}, 0, runner.ErrSnapshotInvalid, jetstream.ErrDigestMismatch},
		{"meta says more", func() { forgeMeta(func(i *jetstream.ObjectInfo) { i.Size += 100 }) }, 0, runner.ErrSnapshotInvalid, nil},
		{"meta says less", func() { forgeMeta(func(i *jetstream.ObjectInfo) { i.Size -= 100 }) }, 0, runner.ErrSnapshotInvalid, nil},
		{"too large", func() { obs.PutBytes(ctx, "g.0-of-1", good) }, int64(len(good) - 1), runner.ErrSnapshotTooLarge, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.put()
			r := b.runnerOn(store, 1, runner.Config{MaxSnapshotBytes: c.max})
			err := r.SnapshotsNotUsed()
			if !errors.Is(err, c.class) || (c.also != nil && !errors.Is(err, c.also)) {
				t.Fatalf("error %v, want one of class %v (%v)", err, c.class, c.also)
			}
			t.Log(err)
			rebuilt(t, r, last, want)
		})
	}
	// The same bytes again: used.
	if _, err := obs.PutBytes(ctx, "g.0-of-1", good); err != nil {
		t.Fatal(err)
	}
	if r := b.runnerOn(store, 1, runner.Config{}); r.SnapshotsNotUsed() != nil || r.StartPosition() != last {
		t.Fatalf("a valid snapshot: starts after %d (%v)", r.StartPosition(), r.SnapshotsNotUsed())
	}
}

// chunky writes objects in small chunks and fails a write after failAt
// bytes when failAt is set: a put that dies between its chunks.
type chunky struct {
	jetstream.ObjectStore
	failAt atomic.Int64
}

func (c *chunky) Put(ctx context.Context, meta jetstream.ObjectMeta, r io.Reader) (*jetstream.ObjectInfo, error) {
	meta.Opts = &jetstream.ObjectMetaOptions{ChunkSize: 256}
	if n := c.failAt.Load(); n > 0 {
		r = io.MultiReader(io.LimitReader(r, n), errReader{})
	}
	return c.ObjectStore.Put(ctx, meta, r)
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("killed between chunks") }

// A snapshot whose write dies between its chunks leaves the previous one
// as it was: a restart uses it, and reads the rest from the stream. So do
// chunks a killed process left without their meta.
func TestRunner_ObjectSnapshotWriteKilledBetweenChunks(t *testing.T) {
	b := newBed(t)
	obs := &chunky{ObjectStore: b.bucket()}
	store := objectStore(t, obs, "g")
	snapAt, _ := snapshotOne(t, b, store)
	before, err := obs.GetInfo(context.Background(), "g.0-of-1")
	if err != nil {
		t.Fatal(err)
	}
	if before.Chunks < 4 {
		t.Fatalf("%d chunks: the test wants several", before.Chunks)
	}

	r := b.runnerOn(store, 1, runner.Config{})
	stop := run(t, r)
	last := b.claims(delibA, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	want := digests(r)
	obs.failAt.Store(int64(before.Size) / 2)
	if err := r.Snapshot(); err == nil {
		t.Fatal("a snapshot whose write failed said nothing")
	}
	// And chunks of a put killed before its meta.
	if _, err := b.js.Publish(ctx, "$O."+runner.DefaultSnapshotBucket+".C.leftoverofakilledput", []byte("half a snapshot")); err != nil {
		t.Fatal(err)
	}
	stop() // its last snapshot fails too
	after, err := obs.GetInfo(ctx, "g.0-of-1")
	if err != nil || after.NUID != before.NUID || after.Digest != before.Digest {
		t.Fatalf("the object changed: %+v, %v", after, err)
	}

	r2 := b.runnerOn(store, 1, runner.Config{})
	if err := r2.SnapshotsNotUsed(); err != nil || r2.StartPosition() != snapAt {
		t.Fatalf("starts after %d, want the previous snapshot's %d (%v)", r2.StartPosition(), snapAt, err)
	}
	stop2 := run(t, r2)
	defer stop2()
	if err := r2.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	if got := digests(r2); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored %v, want %v", got, want)
	}
}

// The same classes for files: a file that is not a snapshot, and one
// larger than the bound.
func TestRunner_InvalidSnapshotFiles(t *testing.T) {
	b := newBed(t)
	store := runner.FileSnapshots(b.snap)
	last, want := snapshotOne(t, b, store)
	good, err := os.ReadFile(b.snap + ".0-of-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.snap+".0-of-1", good[:len(good)/3], 0o600); err != nil {
		t.Fatal(err)
	}
	r := b.runnerOn(store, 1, runner.Config{})
	if err := r.SnapshotsNotUsed(); !errors.Is(err, runner.ErrSnapshotInvalid) {
		t.Fatalf("a truncated file: %v", err)
	}
	rebuilt(t, r, last, want) // and writes a good one as it stops
	r = b.runnerOn(store, 1, runner.Config{MaxSnapshotBytes: 100})
	if err := r.SnapshotsNotUsed(); !errors.Is(err, runner.ErrSnapshotTooLarge) {
		t.Fatalf("a file past the bound: %v", err)
	}
	if r := b.runnerOn(store, 1, runner.Config{}); r.SnapshotsNotUsed() != nil || r.StartPosition() != last {
		t.Fatalf("a valid file: starts after %d (%v)", r.StartPosition(), r.SnapshotsNotUsed())
	}
}

// An object whose chunks are gone (purged, lost) is not waited for for
// ever: its read gives up once the time its size allows is over (here
// made short), and the snapshot is invalid.
func TestRunner_ObjectWithoutItsChunks(t *testing.T) {
	defer runner.SetObjectReadBase(time.Second)()
	b := newBed(t)
	obs := b.bucket()
	store := objectStore(t, obs, "g")
	last, want := snapshotOne(t, b, store)
	ctx := context.Background()
	info, err := obs.GetInfo(ctx, "g.0-of-1")
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.js.Stream(ctx, "OBJ_"+runner.DefaultSnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject("$O."+runner.DefaultSnapshotBucket+".C."+info.NUID)); err != nil {
		t.Fatal(err)
	}
	r := b.runnerOn(store, 1, runner.Config{})
	if err := r.SnapshotsNotUsed(); !errors.Is(err, runner.ErrSnapshotInvalid) {
		t.Fatalf("an object without its chunks: %v", err)
	}
	t.Log(r.SnapshotsNotUsed())
	rebuilt(t, r, last, want)
}
