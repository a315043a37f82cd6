package service_test

import (
	"context"
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
	"github.com/parley-engine/parley/lease"
	"github.com/parley-engine/parley/partition"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// Three engines on one server share the deliberations' supervision by
// partition leases: between them they hold every partition, each about a
// third; every cancelled deliberation gets exactly one TERMINATION,
// written by the holder of its partition's lease (its Parley-Lease header
// names that partition); one engine stops, the two others take its
// partitions over, and the deliberations cancelled after it get their one
// TERMINATION too.
func TestLeases_OneSupervisorPerDeliberation(t *testing.T) {
	srv, err := embedded.Start(embedded.Config{Dir: t.TempDir(), Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.Stop(srv)
	engines := make([]*service.Service, 3)
	for i := range engines {
		engines[i] = startWith(t, service.Config{NATS: srv.ClientURL(), Leases: true, LeaseTTL: 2 * time.Second, EngineName: fmt.Sprintf("engine-%d", i)})
	}
	held := func(es ...*service.Service) (int, []int) {
		seen := map[int]bool{}
		var sizes []int
		for _, e := range es {
			h := e.Group.Held()
			sizes = append(sizes, len(h))
			for _, p := range h {
				seen[p] = true
			}
		}
		return len(seen), sizes
	}
	if !eventually.Within(30*time.Second, func() bool {
		n, sizes := held(engines...)
		return n == partition.Count && sizes[0] <= 342 && sizes[1] <= 342 && sizes[2] <= 342
	}) {
		n, sizes := held(engines...)
		t.Fatalf("three engines hold %d partitions between them, %v each", n, sizes)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	alice, _ := client.New(nc, "alice")
	js, _ := jetstream.New(nc)
	stream, err := js.Stream(ctx, wire.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	// cancelled opens n deliberations, publishes a claim in each and
	// cancels it.
	cancelled := func(n int) []string {
		var ids []string
		for range n {
			id, err := alice.Open(ctx, client.Charter{Title: "cancel me"})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "x"}}); err != nil {
				t.Fatal(err)
			}
			if err := alice.Cancel(ctx, id, "enough"); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		return ids
	}
	// once checks that each deliberation has exactly one supervisor
	// emission, its TERMINATION, stamped with its partition's lease.
	once := func(ids []string) {
		t.Helper()
		for _, id := range ids {
			subject := wire.ArtifactSubject(id, wire.SupervisorToken)
			var n uint64
			if !eventually.Within(30*time.Second, func() bool {
				info, err := stream.Info(ctx, jetstream.WithSubjectFilter(subject))
				if err != nil {
					return false
				}
				n = info.State.Subjects[subject]
				return n >= 1
			}) {
				t.Fatalf("%s: no TERMINATION", id)
			}
			m, err := stream.GetLastMsgForSubject(ctx, subject)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(m.Data), `"TERMINATION"`) {
				t.Errorf("%s: the supervisor wrote %s", id, m.Data)
			}
			stamp := m.Header.Get(lease.Header)
			if want := lease.Key(partition.Of(id)) + "@"; !strings.HasPrefix(stamp, want) {
				t.Errorf("%s: the TERMINATION's lease %q, want %s…", id, stamp, want)
			}
		}
		// A while later, still one each.
		time.Sleep(time.Second)
		for _, id := range ids {
			subject := wire.ArtifactSubject(id, wire.SupervisorToken)
			info, err := stream.Info(ctx, jetstream.WithSubjectFilter(subject))
			if err != nil {
				t.Fatal(err)
			}
			if n := info.State.Subjects[subject]; n != 1 {
				t.Errorf("%s: %d supervisor emissions, want one TERMINATION", id, n)
			}
		}
	}
	once(cancelled(20))

	// One engine stops: it hands its partitions over.
	engines[1].Close()
	if !eventually.Within(30*time.Second, func() bool {
		n, _ := held(engines[0], engines[2])
		return n == partition.Count
	}) {
		n, sizes := held(engines[0], engines[2])
		t.Fatalf("after one stopped, the two others hold %d partitions, %v each", n, sizes)
	}
	once(cancelled(20))
}
