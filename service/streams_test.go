package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/service"
)

// The partitioned record over four streams on the embedded default: the
// deliberations spread over the streams, each publish's position names
// its stream, reads see the writer's own publishes, every stream has its
// own snapshots and a restart restores them; an engine told another count
// of streams, or no partitions, refuses the record and says why.
func TestStart_FourStreams(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	data := t.TempDir()
	cfg := service.Config{DataDir: data, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", Partitioned: true, Streams: 4}
	s, err := service.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	four, _ := ledger.PartitionedOver(4)
	if l := s.Runner.Layout(); l != four || len(s.Streams) != 4 {
		t.Fatalf("the engine reads %s over %d streams", l, len(s.Streams))
	}
	var info api.EngineInfo
	if code := get(t, s, "/api/v1/engine", &info); code != 200 || strings.Join(info.Streams, ",") != strings.Join(four.Streams(), ",") || !info.Partitioned {
		t.Errorf("engine info: %d %+v", code, info)
	}
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	alice, _ := client.New(nc, "alice")
	const n = 40
	ids := make([]string, n)
	used := map[int]int{}
	for i := range ids {
		id, err := alice.Open(ctx, client.Charter{Title: "four streams"})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
		_, ack, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "claim"}})
		if err != nil {
			t.Fatal(err)
		}
		k, seq, ok := four.Split(ack.Sequence)
		if !ok || k != four.Index(id) || seq == 0 || ack.Stream != four.StreamOf(id) {
			t.Fatalf("%s: acknowledged at position %d (stream %d, sequence %d) in %s, its stream is %d", id, ack.Sequence, k, seq, ack.Stream, four.Index(id))
		}
		used[k]++
		// Read-your-writes: the claim is in the answer, at once.
		v, err := alice.State(ctx, id)
		if err != nil || v.Artifacts != 1 {
			t.Fatalf("%s: %+v %v", id, v, err)
		}
	}
	if len(used) < 3 {
		t.Errorf("%d deliberations in %d streams: %v", n, len(used), used)
	}
	if got := s.Runner.Deliberations(); got != n {
		t.Errorf("the engine holds %d deliberations, want %d", got, n)
	}
	// One stream's page (what engines that own streams ask each other
	// for): its deliberations alone; a stream of no index is refused.
	for k := range 4 {
		m, err := nc.Request("parley.api.deliberations", []byte(fmt.Sprintf(`{"stream":%d,"limit":1000}`, k)), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var page []api.Summary
		if err := json.Unmarshal(m.Data, &page); err != nil || len(page) != used[k] {
			t.Errorf("stream %d: %d deliberations listed, %d in it (%v): %s", k, len(page), used[k], err, m.Data)
		}
		for _, sum := range page {
			if four.Index(sum.ID) != k {
				t.Errorf("stream %d lists %s, of stream %d", k, sum.ID, four.Index(sum.ID))
			}
		}
	}
	for _, bad := range []string{`{"stream":4}`, `{"stream":-1}`, `{"stream":"x"}`} {
		m, err := nc.Request("parley.api.deliberations", []byte(bad), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if code := m.Header.Get("Nats-Service-Error-Code"); code != "400" {
			t.Errorf("%s: answered %q %s", bad, code, m.Data)
		}
	}
	s.Close()
	for _, name := range four.Streams() {
		if snaps, _ := filepath.Glob(filepath.Join(data, name+"."+service.SnapshotFile+".*-of-*")); len(snaps) == 0 {
			t.Errorf("no snapshot of %s", name)
		}
	}

	// A restart restores every stream's projection.
	s, err = service.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Runner.Deliberations(); got != n {
		t.Errorf("restarted: the engine holds %d deliberations, want %d", got, n)
	}
	nc2, _ := nats.Connect(s.NATSURL(), s.Participant())
	defer nc2.Close()
	bob, _ := client.New(nc2, "bob")
	for _, id := range ids {
		if !eventually.Within(10*time.Second, func() bool {
			v, err := bob.State(ctx, id)
			return err == nil && v.Artifacts == 1
		}) {
			t.Fatalf("restarted: %s not read", id)
		}
	}
	s.Close()

	// Another count of streams, or no partitions, over the same record.
	for _, c := range []struct {
		cfg  service.Config
		want string
	}{
		{service.Config{Partitioned: true, Streams: 2}, "--streams 2"},
		{service.Config{Partitioned: true}, "--streams 1"},
		{service.Config{}, "without --partitioned"},
	} {
		c.cfg.DataDir, c.cfg.Listen, c.cfg.HTTP = data, "127.0.0.1:0", "127.0.0.1:0"
		if s, err := service.Start(ctx, c.cfg); err == nil {
			s.Close()
			t.Errorf("%+v: started over the record of four streams", c.cfg)
		} else if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "PARLEY_0000_0255") {
			t.Errorf("%+v: %v", c.cfg, err)
		}
	}
	// And a count that is no layout.
	bad := cfg
	bad.Streams = 3
	if s, err := service.Start(ctx, bad); err == nil {
		s.Close()
		t.Error("--streams 3 started")
	} else if !errors.Is(err, ledger.ErrLayout) {
		t.Errorf("--streams 3: %v", err)
	}
}

// deploy/nats-streams4.conf on the embedded server, the record over four
// streams: the orchestrator, who was told nothing, finds the record and
// opens deliberations in every stream; alice publishes and reads her own
// writes in each; the supervisor ends each one the orchestrator
// cancels.
func TestStart_StreamsNATSConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0",
		NATSConfig: "../deploy/nats-streams4.conf", User: "engine", Password: "change-me-engine", Partitioned: true, Streams: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	four, _ := ledger.PartitionedOver(4)
	if s.Runner.Layout() != four {
		t.Fatalf("the engine reads the %s record", s.Runner.Layout())
	}
	onc, err := nats.Connect(s.NATSURL(), nats.UserInfo("orchestrator", "change-me-orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	defer onc.Close()
	anc, err := nats.Connect(s.NATSURL(), nats.UserInfo("alice", "change-me-alice"))
	if err != nil {
		t.Fatal(err)
	}
	defer anc.Close()
	orch, _ := client.New(onc, "orchestrator")
	alice, _ := client.New(anc, "alice")
	used := map[int]bool{}
	var ids []string
	for len(used) < 4 {
		id := uuid.Must(uuid.NewV7()).String()
		if used[four.Index(id)] {
			continue
		}
		used[four.Index(id)] = true
		if err := orch.OpenID(ctx, id, client.Charter{Title: "four streams"}); err != nil {
			t.Fatalf("open in %s: %v", four.StreamOf(id), err)
		}
		if _, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "claim"}}); err != nil {
			t.Fatalf("alice in %s: %v", four.StreamOf(id), err)
		}
		v, err := alice.State(ctx, id)
		if err != nil || v.Artifacts != 1 {
			t.Fatalf("alice reads %s: %+v %v", id, v, err)
		}
		if _, err := orch.Control(ctx, id, client.Control{Op: "cancel"}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		if !eventually.Within(20*time.Second, func() bool {
			v, err := orch.State(ctx, id)
			return err == nil && v.Status == api.StatusCancelled && len(v.Terminations) == 1
		}) {
			t.Errorf("%s (%s) never ended", id, four.StreamOf(id))
		}
	}
}
