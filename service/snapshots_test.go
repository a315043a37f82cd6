package service_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/service"
)

func stateDigests(s *service.Service) map[string]string {
	out := map[string]string{}
	s.Runner.EachDeliberation(func(d *projector.Deliberation) { out[d.ID] = d.StateDigest().String() })
	return out
}

// Engine A keeps its snapshots in JetStream and stops; engine B, on an
// empty data directory and the same cluster, restores from them: it reads
// the stream after their position, and has A's states, which a replay of
// the stream (an engine keeping files, on another empty directory) has
// too. The bucket is created with the stream's storage.
func TestStart_SnapshotsInJetStreamRestoreOnAnEmptyDataDirectory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv, _ := bareServer(t, embedded.Config{})
	cfg := func(store string) service.Config {
		return service.Config{DataDir: t.TempDir(), NATS: srv.ClientURL(), HTTP: "127.0.0.1:0", NoSupervisor: true,
			SnapshotStore: store, SnapshotEvery: time.Hour}
	}
	if _, err := service.Start(ctx, cfg("s3")); err == nil || !strings.Contains(err.Error(), "--snapshot-store") {
		t.Fatalf("an unknown snapshot store: %v", err)
	}
	a, err := service.Start(ctx, cfg(service.SnapshotJetStream))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	alice, _ := client.New(nc, "alice")
	var last uint64
	for d := range 3 {
		id, err := alice.Open(ctx, client.Charter{Title: fmt.Sprint("deliberation ", d)})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			_, ack, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprintf("claim %d of %d", i, d)}})
			if err != nil {
				t.Fatal(err)
			}
			last = ack.Sequence
		}
	}
	if err := a.Runner.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	want := stateDigests(a)
	if err := a.Close(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err) // Close writes the last snapshots
	}
	js, _ := jetstream.New(nc)
	obs, err := js.ObjectStore(ctx, runner.DefaultSnapshotBucket)
	if err != nil {
		t.Fatalf("no bucket: %v", err)
	}
	st, err := obs.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Storage() != jetstream.FileStorage || st.Replicas() != 1 {
		t.Fatalf("bucket storage %v, replicas %d", st.Storage(), st.Replicas())
	}
	objs, err := obs.List(ctx)
	if err != nil || len(objs) != runner.DefaultShards {
		t.Fatalf("%d objects (%v), want %d", len(objs), err, runner.DefaultShards)
	}

	b, err := service.Start(ctx, cfg(service.SnapshotJetStream))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Runner.SnapshotsNotUsed(); err != nil || b.Runner.StartPosition() != last {
		t.Fatalf("B reads the stream after %d, want after the snapshots' %d (%v)", b.Runner.StartPosition(), last, err)
	}
	if got := stateDigests(b); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("B has %v, A had %v", got, want)
	}
	replay, err := service.Start(ctx, cfg(service.SnapshotFiles))
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Close()
	if replay.Runner.StartPosition() != 0 {
		t.Fatalf("the replay starts after %d", replay.Runner.StartPosition())
	}
	if err := replay.Runner.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	if got := stateDigests(replay); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the replay has %v, A had %v", got, want)
	}
}

// A participant, and a client without credentials, of the embedded
// default can neither write the snapshot bucket (which would forge the
// projection the next start restores) nor read it: the publishes of a
// put and of a delete (chunks, meta) and the API calls that bind, read
// and purge it are refused, and the objects stay as the engine wrote them.
func TestEmbeddedDefault_SnapshotBucketIsTheEngines(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	s, err := service.Start(ctx, service.Config{DataDir: dir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0",
		SnapshotStore: service.SnapshotJetStream, SnapshotEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := connectOutsider(t, s.NATSURL(), s.Participant())
	alice, _ := client.New(p.nc, "alice")
	id, err := alice.Open(ctx, client.Charter{Title: "snapshots"})
	if err != nil {
		t.Fatal(err)
	}
	_, ack, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "a claim"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Runner.WaitFor(ctx, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	if err := s.Runner.Snapshot(); err != nil {
		t.Fatal(err)
	}
	ejs, _ := jetstream.New(s.Conn())
	obs, err := ejs.ObjectStore(ctx, runner.DefaultSnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	name := service.SnapshotFile + ".0-of-8"
	before, err := obs.GetInfo(ctx, name)
	if err != nil {
		t.Fatal(err)
	}

	reader := connectOutsider(t, s.NATSURL())
	for who, o := range map[string]*outsider{"participant": p, "reader": reader} {
		bucketRefused(t, ctx, who, o, name)
	}
	after, err := obs.GetInfo(ctx, name)
	if err != nil || after.NUID != before.NUID || after.Digest != before.Digest {
		t.Fatalf("the object changed: %+v (%v), was %+v", after, err, before)
	}
	// The engine's own snapshots still go through.
	if _, ack, err = alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "another claim"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Runner.WaitFor(ctx, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	if err := s.Runner.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if again, err := obs.GetInfo(ctx, name); err != nil || again.NUID == before.NUID {
		t.Fatalf("the engine's snapshot was not written: %+v (%v)", again, err)
	}
}

// bucketRefused checks that o can neither write nor read the snapshot
// bucket: the publishes of a put and of a delete (chunks, meta), and the
// API calls that bind it, read an object's meta and chunks, and purge it,
// are refused.
func bucketRefused(t *testing.T, ctx context.Context, who string, o *outsider, name string) {
	t.Helper()
	stream := "OBJ_" + runner.DefaultSnapshotBucket
	meta := "$O." + runner.DefaultSnapshotBucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name))
	for _, subject := range []string{"$O." + runner.DefaultSnapshotBucket + ".C.forged", meta} {
		short, stop := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err := o.js.Publish(short, subject, []byte(`{"name":"forged"}`))
		stop()
		if err == nil {
			t.Errorf("%s published on %s", who, subject)
		}
		if !o.violated(subject) {
			t.Errorf("%s: no permissions violation for %s", who, subject)
		}
	}
	for _, subject := range []string{"$JS.API.STREAM.INFO." + stream, "$JS.API.DIRECT.GET." + stream + "." + meta,
		"$JS.API.STREAM.MSG.GET." + stream, "$JS.API.CONSUMER.CREATE." + stream + ".x." + meta, "$JS.API.STREAM.PURGE." + stream} {
		if _, err := o.nc.Request(subject, []byte(`{}`), 300*time.Millisecond); err == nil {
			t.Errorf("%s: %s answered", who, subject)
		}
		if !o.violated(subject) {
			t.Errorf("%s: no permissions violation for %s", who, subject)
		}
	}
	short, stop := context.WithTimeout(ctx, 500*time.Millisecond)
	defer stop()
	if _, err := o.js.ObjectStore(short, runner.DefaultSnapshotBucket); err == nil {
		t.Errorf("%s bound the snapshot bucket", who)
	}
}

// The same with deploy/nats.conf: its engine user keeps the snapshots in
// the bucket, and neither a participant nor the orchestrator may touch it.
func TestNATSConfig_SnapshotBucketIsTheEngines(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", NATSConfig: "../deploy/nats.conf",
		User: "engine", Password: "change-me-engine", SnapshotStore: service.SnapshotJetStream, SnapshotEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Runner.Snapshot(); err != nil {
		t.Fatal(err)
	}
	ejs, _ := jetstream.New(s.Conn())
	obs, err := ejs.ObjectStore(ctx, runner.DefaultSnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	name := service.SnapshotFile + ".0-of-8"
	before, err := obs.GetInfo(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"alice", "orchestrator"} {
		bucketRefused(t, ctx, who, connectOutsider(t, s.NATSURL(), nats.UserInfo(who, "change-me-"+who)), name)
	}
	if after, err := obs.GetInfo(ctx, name); err != nil || after.NUID != before.NUID {
		t.Fatalf("the object changed: %+v (%v)", after, err)
	}
}

// Attack: the server answers a request on the reply subject its requester
// names, and delivers a consumer's messages where its creator says,
// unchecked against the requester's permissions. A participant points
// both at the snapshot bucket's subjects: the answer of a JetStream API
// call lands on an object's meta subject and on its chunks' subject,
// where the bucket stores it; a push consumer's deliveries keep the
// subjects of the stream they come from, and the bucket stores none. What
// lands is the server's JSON, not the participant's bytes: a start then
// refuses the object (runner.ErrSnapshotInvalid) and would rebuild the
// projection from the stream, and the engine's next snapshot writes the
// object again.
func TestEmbeddedDefault_SnapshotBucketGetsOnlyServerAnswers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	cfg := service.Config{DataDir: dir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", SnapshotStore: service.SnapshotJetStream, SnapshotEvery: time.Hour}
	s, err := service.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := connectOutsider(t, s.NATSURL(), s.Participant())
	alice, _ := client.New(p.nc, "alice")
	id, err := alice.Open(ctx, client.Charter{Title: "snapshots"})
	if err != nil {
		t.Fatal(err)
	}
	forged := fmt.Sprintf(`{"name":"projection.snapshot.0-of-8","bucket":%q,"nuid":"FORGED","size":5,"chunks":1,"digest":"SHA-256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU="}`, runner.DefaultSnapshotBucket)
	_, ack, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: forged}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Runner.WaitFor(ctx, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	if err := s.Runner.Snapshot(); err != nil {
		t.Fatal(err)
	}
	want := stateDigests(s)
	ejs, _ := jetstream.New(s.Conn())
	obs, err := ejs.ObjectStore(ctx, runner.DefaultSnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	// Every shard's object: the one alice's deliberation is in holds more.
	var name string
	var size uint64
	objs, _ := obs.List(ctx)
	for _, o := range objs {
		if o.Size > size {
			name, size = o.Name, o.Size
		}
	}
	before, err := obs.GetInfo(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	meta := "$O." + runner.DefaultSnapshotBucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name))
	chunks := "$O." + runner.DefaultSnapshotBucket + ".C." + before.NUID
	bucket, err := ejs.Stream(ctx, "OBJ_"+runner.DefaultSnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	stored := func() uint64 {
		info, err := bucket.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	msgs := stored()
	// A consumer of alice's artifact delivering onto the meta subject.
	if _, err := p.js.CreateOrUpdateConsumer(ctx, "PARLEY", jetstream.ConsumerConfig{Name: "forge", DeliverSubject: meta,
		FilterSubject: "parley." + id + ".art.alice"}); err != nil {
		t.Fatal(err)
	}
	// The API's answers onto the chunks' and the meta's subjects.
	for _, reply := range []string{chunks, meta} {
		if err := p.nc.PublishRequest("$JS.API.INFO", reply, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if !eventually.Within(10*time.Second, func() bool { return stored() == msgs+2 }) {
		t.Fatalf("the bucket holds %d messages, %d before: want the two answers", stored(), msgs)
	}
	after, err := obs.GetInfo(ctx, name)
	if err == nil && after.NUID != "" {
		t.Fatalf("the meta is an object's: %+v", after)
	}
	// A start now refuses the object, and rebuilds.
	store, err := runner.ObjectSnapshots(ctx, obs, service.SnapshotFile)
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(ctx, ejs, s.Stream, runner.Config{Snapshots: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SnapshotsNotUsed(); !errors.Is(err, runner.ErrSnapshotInvalid) || r.StartPosition() != 0 {
		t.Fatalf("snapshots not used: %v, want one of class %v; starts after %d", err, runner.ErrSnapshotInvalid, r.StartPosition())
	}
	t.Log(r.SnapshotsNotUsed())
	// The engine's next snapshot (here its last) writes the object again:
	// the next start uses it.
	if err := s.Close(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	s, err = service.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Runner.SnapshotsNotUsed(); err != nil || s.Runner.StartPosition() != ack.Sequence {
		t.Fatalf("after a restart: starts after %d, want %d (%v)", s.Runner.StartPosition(), ack.Sequence, err)
	}
	if err := s.Runner.WaitFor(ctx, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	if got := stateDigests(s); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored %v, want %v", got, want)
	}
}

// Snapshots in the bucket say a record was folded, as files in the data
// directory do: with the stream deleted, an engine on an empty data
// directory refuses to start rather than create an empty stream and serve
// it as the record.
func TestStart_SnapshotsInJetStreamWithoutTheStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, admin := bareServer(t, embedded.Config{})
	cfg := func() service.Config {
		return service.Config{DataDir: t.TempDir(), NATS: srv.ClientURL(), HTTP: "127.0.0.1:0", NoSupervisor: true,
			SnapshotStore: service.SnapshotJetStream, SnapshotEvery: time.Hour}
	}
	a, err := service.Start(ctx, cfg())
	if err != nil {
		t.Fatal(err)
	}
	ack, err := admin.Publish(ctx, "parley.0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a01.ctl", []byte(`{"op":"open","charter":{"title":"t"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Runner.WaitFor(ctx, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if err := admin.DeleteStream(ctx, "PARLEY"); err != nil {
		t.Fatal(err)
	}
	_, err = service.Start(ctx, cfg())
	if err == nil || !strings.Contains(err.Error(), "the snapshot bucket holds snapshots of one (bucket PARLEY_SNAPSHOTS, object projection.snapshot.0-of-8)") {
		t.Fatalf("started without the stream: %v", err)
	}
	if _, err := admin.Stream(ctx, "PARLEY"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("the stream was created again: %v", err)
	}
	// Another prefix holds none: it starts, on a new stream.
	c := cfg()
	c.SnapshotPrefix = "other"
	s, err := service.Start(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}
