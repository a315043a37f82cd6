package integration

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/service"
)

// SIGKILL the engine during a 10,000-artifact ingest from 8 concurrent
// participants, restart it: every acknowledged artifact is in the
// projection exactly once, and state_digest equals a fresh replay's.
func TestKillDuringIngest(t *testing.T) {
	total, participants := 10000, 8
	if testing.Short() {
		total = 800
	}
	dir := t.TempDir()
	e := &engineProc{t: t, dataDir: dir + "/data", natsPort: freePort(t), httpPort: freePort(t)}
	e.start()
	defer func() {
		if e.cmd.ProcessState == nil {
			e.stop()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	dial := func(name string) *nats.Conn {
		nc, err := nats.Connect(e.natsURL(), e.participant(), nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
			nats.RetryOnFailedConnect(true))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	orch, _ := client.New(dial("orchestrator"), "orchestrator")
	id, err := orch.Open(ctx, client.Charter{Title: "ingest under fire"})
	if err != nil {
		t.Fatal(err)
	}

	var acked atomic.Int64
	published := make([][]canon.Digest, participants)
	var wg sync.WaitGroup
	for p := 0; p < participants; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			name := fmt.Sprintf("p%d", p)
			c, _ := client.New(dial(name), name)
			for i := 0; i < total/participants; i++ {
				a := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprintf("%s claim %d", name, i)}})
				// Retry the same artifact (same Msg-Id) until it is
				// acknowledged: the engine may be down.
				for {
					pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
					_, err := c.PublishArtifact(pctx, id, a)
					pcancel()
					if err == nil {
						break
					}
					if ctx.Err() != nil {
						t.Errorf("%s: gave up: %v", name, err)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
				published[p] = append(published[p], a.ID)
				acked.Add(1)
			}
		}(p)
	}
	// Kill the engine once a third is in.
	eventually(t, "a third of the artifacts acknowledged", func() bool { return acked.Load() >= int64(total/3) })
	e.kill()
	killedAt := acked.Load()
	time.Sleep(300 * time.Millisecond) // the engine stays down a while: the subject
	e.start()
	wg.Wait()
	t.Logf("killed after %d acknowledged artifacts; all %d acknowledged after the restart", killedAt, acked.Load())

	nc := dial("auditor")
	fresh := replay(t, nc)
	last := fresh.Position()
	deadline := time.Now().Add(time.Minute)
	var v api.View
	for {
		getJSON(t, e.url("/api/v1/deliberations/"+id), &v)
		if v.Position >= last || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if v.Artifacts != total {
		t.Errorf("projection holds %d artifacts, want %d", v.Artifacts, total)
	}
	list := getPages[api.ArtifactEntry](t, e.url("/api/v1/deliberations/"+id+"/artifacts?limit=1000"))
	seen := map[canon.Digest]int{}
	for _, a := range list {
		seen[a.ArtifactID]++
	}
	for p := range published {
		for _, a := range published[p] {
			if seen[a] != 1 {
				t.Fatalf("artifact %s is in the projection %d times", a, seen[a])
			}
		}
	}
	if want := fresh.Deliberation(id).StateDigest(); v.StateDigest != want {
		t.Errorf("state_digest %s, fresh replay %s", v.StateDigest, want)
	}
	for p := 0; p < participants; p++ {
		if n := v.Participants[fmt.Sprintf("p%d", p)]; n != total/participants {
			t.Errorf("p%d: %d artifacts", p, n)
		}
	}
}

// Restart the NATS server under a running engine: it reconnects and
// catches up.
func TestNATSRestart(t *testing.T) {
	storeDir := t.TempDir()
	port := freePort(t)
	startNATS := func() *natsServer { return startStandalone(t, storeDir, port) }
	ns := startNATS()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), NATS: ns.url, HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, err := nats.Connect(ns.url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c, _ := client.New(nc, "alice")
	id, err := c.Open(ctx, client.Charter{Title: "restart"})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(n int, tag string) uint64 {
		var last uint64
		for i := 0; i < n; i++ {
			for {
				_, ack, err := c.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprintf("%s %d", tag, i)}})
				if err == nil {
					last = ack.Sequence
					break
				}
				if ctx.Err() != nil {
					t.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		return last
	}
	last := publish(100, "before")
	if err := s.Runner.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	ns.stop()
	time.Sleep(500 * time.Millisecond) // NATS stays down a while: the subject
	ns = startNATS()
	defer ns.stop()
	last = publish(100, "after")
	if err := s.Runner.WaitFor(ctx, last); err != nil {
		t.Fatalf("the engine did not catch up after the NATS restart: %v", err)
	}
	v, err := s.Queries.Get(id)
	if err != nil || v.Artifacts != 200 {
		t.Fatalf("after restart: %v %+v", err, v)
	}
}
