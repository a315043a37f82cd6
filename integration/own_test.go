package integration

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/archive"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/relay"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// The record over four streams on a 3-node JetStream cluster (R3), three
// engines owning the streams (engine serve --own-streams), a relay fleet;
// a third of the way through one engine crashes (its connection closed:
// nothing released, its leases left to expire) and a fourth starts.
// Every deliberation completes with a verified closure and exactly one
// TERMINATION (no FAILURE); every engine alive answers a read of every
// deliberation; the engines alive fold every stream, each stream once;
// the states equal a fresh replay's.
func TestCluster_OwnStreamsEngineCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("a fleet on a 3-node cluster")
	}
	c := startClusterWith(t, 3, true)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var logs []*levelLog
	start := func(i int) *service.Service {
		t.Helper()
		var s *service.Service
		var err error
		l := &levelLog{}
		logs = append(logs, l)
		for deadline := time.Now().Add(30 * time.Second); ; {
			s, err = service.Start(ctx, service.Config{DataDir: t.TempDir(), NATS: c.urls(i % 3), HTTP: "127.0.0.1:0", Replicas: 3,
				Logger: slog.New(l), Partitioned: true, Streams: 4, OwnStreams: true, SnapshotStore: service.SnapshotJetStream,
				LeaseTTL: 5 * time.Second, EngineName: fmt.Sprintf("engine-%d", i+1)})
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	engines := []*service.Service{start(0), start(1), start(2)}
	streamsHeld := func(ss ...*service.Service) (int, bool) {
		seen := map[int]bool{}
		once := true
		for _, s := range ss {
			for _, k := range s.HeldStreams() {
				once = once && !seen[k]
				seen[k] = true
			}
		}
		return len(seen), once
	}
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n, once := streamsHeld(engines...)
		if n == 4 && once && len(engines[0].HeldStreams()) > 0 && len(engines[1].HeldStreams()) > 0 && len(engines[2].HeldStreams()) > 0 {
			break
		}
		if time.Now().After(deadline) {
			for i, l := range logs {
				t.Logf("engine-%d's errors: %q", i+1, l.errors())
			}
			t.Fatalf("the streams were not shared: %v %v %v", engines[0].HeldStreams(), engines[1].HeldStreams(), engines[2].HeldStreams())
		}
	}
	cfg, err := relay.Load("../examples/relay/fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg.WaitTermination = "60s"
	const relays = 12
	var w turns
	sums := make([]*relay.Summary, relays)
	errs := make([]error, relays)
	var wg sync.WaitGroup
	for i := range relays {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[i], errs[i] = relay.Run(ctx, cfg, relay.Options{NATS: c.urls(i % 3), Dir: filepath.Join(t.TempDir(), fmt.Sprintf("run-%d", i)), Progress: &w})
		}()
	}
	total := int64(relays * 12 * 3)
	for w.n.Load() < total/3 {
		if ctx.Err() != nil {
			t.Fatal("the fleet did not get a third of the way")
		}
		time.Sleep(5 * time.Millisecond)
	}
	crashed := engines[1]
	crashedHeld := crashed.HeldStreams()
	crashedAt := time.Now()
	crashed.Conn().Close()
	fourth := start(3)
	alive := []*service.Service{engines[0], engines[2], fourth}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if n, _ := streamsHeld(alive...); n == 4 {
			break
		}
		if time.Now().After(deadline) {
			for i, l := range logs {
				t.Logf("engine-%d's errors: %q", i+1, l.errors())
			}
			t.Fatalf("after the crash the others fold %v %v %v", alive[0].HeldStreams(), alive[1].HeldStreams(), alive[2].HeldStreams())
		}
	}
	t.Logf("engine-2 crashed holding %v; the others fold every stream %s later", crashedHeld, time.Since(crashedAt).Round(time.Millisecond))
	wg.Wait()
	nc, err := nats.Connect(c.urls(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ids := map[string]string{}
	for i := range relays {
		if errs[i] != nil {
			t.Errorf("relay %d: %v", i, errs[i])
			continue
		}
		if sums[i].Termination != "completed" || !sums[i].ClosureOK {
			t.Errorf("relay %d: %s, closure ok %v", i, sums[i].Termination, sums[i].ClosureOK)
		}
		ids[sums[i].Deliberation] = sums[i].StateDigest
	}
	failures, terms := countSupervisor(t, ctx, js, nc, ids)
	for id := range ids {
		if terms[id] != 1 || failures[id] != 0 {
			t.Errorf("%s: %d TERMINATIONs, %d FAILUREs", id, terms[id], failures[id])
		}
	}
	// Every engine alive answers every deliberation.
	for id, digest := range ids {
		for _, s := range alive {
			var got string
			for try := 0; try < 50; try++ {
				resp, err := http.Get(s.HTTPURL() + "/api/v1/deliberations/" + id)
				if err == nil {
					var b bytes.Buffer
					b.ReadFrom(resp.Body)
					resp.Body.Close()
					if resp.StatusCode == 200 {
						got = b.String()
						break
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
			if !bytes.Contains([]byte(got), []byte(`"state_digest":"`+digest+`"`)) {
				t.Errorf("%s read %s: %.200s, want the digest %s", s.HTTPURL(), id, got, digest)
			}
		}
	}
	// A fresh replay of one recording gives the same digest.
	for id, digest := range ids {
		if got := replayDigest(t, js, id); got != digest {
			t.Errorf("replay of %s: %s, the relay saw %s", id, got, digest)
		}
		break
	}
}

// countSupervisor counts, by deliberation of ids, the FAILUREs and
// TERMINATIONs in the whole record.
func countSupervisor(t *testing.T, ctx context.Context, js jetstream.JetStream, nc *nats.Conn, ids map[string]string) (failures, terms map[string]int) {
	t.Helper()
	l, _, err := ledger.Locate(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	streams, err := l.ExistingAll(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	var total uint64
	for _, st := range streams {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total += info.State.Msgs
	}
	rd, err := l.Read(ctx, nc, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Stop()
	failures, terms = map[string]int{}, map[string]int{}
	for range total {
		m, err := rd.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		id := deliberationOf(m.Subject)
		if _, ok := ids[id]; !ok {
			continue
		}
		a, err := events.Validate(m.Data)
		if err != nil {
			continue
		}
		switch a.Type {
		case events.TypeFailure:
			failures[id]++
		case events.TypeTermination:
			terms[id]++
		}
	}
	return failures, terms
}

func deliberationOf(subject string) string { return wire.DeliberationOf(subject) }

// replayDigest exports deliberation id from the record and replays it
// into a fresh engine: the state digest the replay ends at.
func replayDigest(t *testing.T, js jetstream.JetStream, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rec bytes.Buffer
	if _, err := archive.Export(ctx, js, id, recording.Stream, &rec); err != nil {
		t.Fatal(err)
	}
	fresh, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	r, err := recording.NewReader(bytes.NewReader(rec.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	res, err := relay.Replay(ctx, r, relay.ReplayOptions{NATS: fresh.NATSURL(), NATSOptions: []nats.Option{fresh.Participant()}})
	if err != nil {
		t.Fatal(err)
	}
	return res.StateDigest
}
