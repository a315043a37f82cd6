package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/archive"
	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/partition"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/relay"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/web"
	"github.com/parley-engine/parley/wire"
)

// startMapped starts a NATS server with JetStream and the partition
// mapping, listening on loopback, for engines to share.
func startMapped(t *testing.T) *server.Server {
	t.Helper()
	var ms []embedded.Mapping
	for _, m := range partition.Mappings() {
		ms = append(ms, embedded.Mapping{From: m.From, To: m.To})
	}
	srv, err := embedded.Start(embedded.Config{Dir: t.TempDir(), Host: "127.0.0.1", Port: -1, Mappings: ms})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { embedded.Stop(srv) })
	return srv
}

// ownEngine starts an engine that owns streams of the record of four.
func ownEngine(t *testing.T, url, name string) *service.Service {
	t.Helper()
	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), HTTP: "127.0.0.1:0", NATS: url,
		Partitioned: true, Streams: 4, OwnStreams: true, SnapshotStore: service.SnapshotJetStream, LeaseTTL: 5 * time.Second, EngineName: name,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testWriter writes an engine's log lines about its streams into the
// test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("component=owner")) {
		w.t.Logf("%s", bytes.TrimSpace(p))
	}
	return len(p), nil
}

// held is every engine's held streams, and whether each stream is held
// by exactly one of them.
func heldOnce(ss ...*service.Service) (map[int]string, bool) {
	by := map[int]string{}
	ok := true
	for _, s := range ss {
		for _, k := range s.HeldStreams() {
			if by[k] != "" {
				ok = false
			}
			by[k] = s.HTTPURL()
		}
	}
	return by, ok && len(by) == 4
}

// supervisorTerminations counts the TERMINATIONs the supervisors wrote
// for deliberation d, read from the record.
func supervisorTerminations(t *testing.T, nc *nats.Conn, d string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, _ := jetstream.New(nc)
	l, st, err := ledger.LocateFor(ctx, js, d)
	if err != nil {
		t.Fatal(err)
	}
	subj := l.Stored(wire.ArtifactSubject(d, wire.SupervisorToken))
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		t.Fatal(err)
	}
	total := int(info.State.Subjects[subj])
	if total == 0 {
		return 0
	}
	rd, err := l.Read(ctx, nc, subj, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Stop()
	n := 0
	for range total {
		m, err := rd.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(m.Data, []byte(`"artifact_type":"TERMINATION"`)) {
			n++
		}
	}
	return n
}

// Engines that own streams: three engines share the four streams of the
// record, each folding only its own; a fleet of relays runs through them
// while one engine stops mid-run and a fourth joins. Every deliberation
// completes with a verified closure and exactly one TERMINATION; every
// engine answers every deliberation's reads, over NATS and HTTP (its own
// or forwarded to the owner); each engine holds about its share of the
// deliberations; and a fresh replay of a recording gives the same state
// digest.
func TestOwnStreams_FleetHandover(t *testing.T) {
	if testing.Short() {
		t.Skip("a fleet over three engines")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	srv := startMapped(t)
	url := srv.ClientURL()
	a := ownEngine(t, url, "a")
	defer a.Close()
	b := ownEngine(t, url, "b")
	defer b.Close()
	c := ownEngine(t, url, "c")
	cClosed := false
	defer func() {
		if !cClosed {
			c.Close()
		}
	}()
	if !eventually.Within(90*time.Second, func() bool {
		_, ok := heldOnce(a, b, c)
		return ok && len(a.HeldStreams()) > 0 && len(b.HeldStreams()) > 0 && len(c.HeldStreams()) > 0
	}) {
		by, _ := heldOnce(a, b, c)
		t.Fatalf("the streams were not shared: %v (a %v, b %v, c %v)", by, a.HeldStreams(), b.HeldStreams(), c.HeldStreams())
	}
	t.Logf("held: a %v, b %v, c %v", a.HeldStreams(), b.HeldStreams(), c.HeldStreams())

	cfg, err := relay.Load("../examples/relay/fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	const fleet = 48
	results := make([]*relay.Summary, fleet)
	errs := make([]error, fleet)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	quarter := make(chan struct{})
	var doneN sync.Mutex
	finished := 0
	for i := range fleet {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i], errs[i] = relay.Run(ctx, cfg, relay.Options{NATS: url, Dir: t.TempDir()})
			doneN.Lock()
			if finished++; finished == fleet/4 {
				close(quarter)
			}
			doneN.Unlock()
		}()
	}
	// Mid-run, a quarter of the fleet done: c stops (its streams handed
	// over), d joins.
	var d *service.Service
	<-quarter
	c.Close()
	cClosed = true
	d = ownEngine(t, url, "d")
	defer d.Close()
	wg.Wait()
	if !eventually.Within(90*time.Second, func() bool {
		_, ok := heldOnce(a, b, d)
		return ok && len(d.HeldStreams()) > 0
	}) {
		t.Fatalf("after the handover: a %v, b %v, d %v", a.HeldStreams(), b.HeldStreams(), d.HeldStreams())
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ids := map[string]string{} // id → state digest
	for i, r := range results {
		if errs[i] != nil {
			t.Errorf("relay %d: %v", i, errs[i])
			continue
		}
		if r.Termination != "completed" || !r.ClosureOK {
			t.Errorf("relay %d: %s, closure ok %v", i, r.Termination, r.ClosureOK)
		}
		if n := supervisorTerminations(t, nc, r.Deliberation); n != 1 {
			t.Errorf("relay %d (%s): %d TERMINATIONs", i, r.Deliberation, n)
		}
		ids[r.Deliberation] = r.StateDigest
	}
	// Every engine answers every deliberation, over HTTP: its own, or
	// forwarded to the owner.
	four, _ := ledger.PartitionedOver(4)
	for id, digest := range ids {
		for _, s := range []*service.Service{a, b, d} {
			var v api.View
			var resp *http.Response
			if !eventually.Within(10*time.Second, func() bool {
				var err error
				resp, err = http.Get(s.HTTPURL() + "/api/v1/deliberations/" + id)
				if err != nil {
					return false
				}
				defer resp.Body.Close()
				v = api.View{}
				return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&v) == nil
			}) {
				t.Fatalf("%s: no answer for %s (stream %d)", s.HTTPURL(), id, four.Index(id))
			}
			if v.StateDigest.String() != digest || v.Status != api.StatusCompleted {
				t.Errorf("%s read %s as %s %s, the relay saw %s", s.HTTPURL(), id, v.Status, v.StateDigest, digest)
			}
			forwarded := resp.Header.Get(service.EngineHeader) != ""
			if forwarded == s.Runner.Holds(id) {
				t.Errorf("%s, holding %s: %v, forwarded: %v", s.HTTPURL(), id, s.Runner.Holds(id), forwarded)
			}
		}
	}
	// Every engine lists every deliberation, gathering the others'
	// streams from their owners: in one page, and page by page.
	for _, s := range []*service.Service{a, b, d} {
		for _, limit := range []int{1000, 7} {
			seen := map[string]bool{}
			var last uint64
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > 100 {
					t.Fatal("the pages never end")
				}
				url := fmt.Sprintf("%s/api/v1/deliberations?limit=%d", s.HTTPURL(), limit)
				if cursor != "" {
					url += "&cursor=" + cursor
				}
				resp, err := http.Get(url)
				if err != nil {
					t.Fatal(err)
				}
				var body bytes.Buffer
				body.ReadFrom(resp.Body)
				resp.Body.Close()
				var page []api.Summary
				if err := json.Unmarshal(body.Bytes(), &page); err != nil || resp.StatusCode != 200 {
					t.Fatalf("%s: %d %v: %s", url, resp.StatusCode, err, body.Bytes())
				}
				for _, sum := range page {
					if seen[sum.ID] || (last != 0 && sum.OpenedAt >= last) {
						t.Fatalf("%s: %s twice, or out of order (%d after %d)", url, sum.ID, sum.OpenedAt, last)
					}
					seen[sum.ID], last = true, sum.OpenedAt
				}
				if cursor = resp.Header.Get("X-Next-Cursor"); cursor == "" {
					break
				}
			}
			for id := range ids {
				if !seen[id] {
					t.Errorf("%s (limit %d) does not list %s", s.HTTPURL(), limit, id)
				}
			}
		}
	}
	// And the explorer's list, page by page.
	for _, s := range []*service.Service{a, b, d} {
		seen := map[string]bool{}
		var before uint64
		for pages := 0; ; pages++ {
			if pages > 100 {
				t.Fatal("the explorer's pages never end")
			}
			url := fmt.Sprintf("%s/api/v1/explorer/deliberations?limit=7", s.HTTPURL())
			if before != 0 {
				url += fmt.Sprintf("&before=%d", before)
			}
			resp, err := http.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			var body bytes.Buffer
			body.ReadFrom(resp.Body)
			resp.Body.Close()
			var page web.ListPage
			if err := json.Unmarshal(body.Bytes(), &page); err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s: %d %v: %s", url, resp.StatusCode, err, body.Bytes())
			}
			for _, row := range page.Deliberations {
				if seen[row.ID] {
					t.Fatalf("%s: %s twice", url, row.ID)
				}
				seen[row.ID] = true
			}
			if before = page.NextBefore; before == 0 {
				break
			}
		}
		for id := range ids {
			if !seen[id] {
				t.Errorf("%s: the explorer does not list %s", s.HTTPURL(), id)
			}
		}
	}
	// Each engine holds its streams' deliberations only.
	total := 0
	for _, s := range []*service.Service{a, b, d} {
		n := s.Runner.Deliberations()
		total += n
		t.Logf("%s holds %v: %d of the deliberations", s.HTTPURL(), s.HeldStreams(), n)
	}
	if total != fleet {
		t.Errorf("the engines hold %d deliberations in all, want %d (each exactly once)", total, fleet)
	}
	// A fresh replay of one recording gives the same digest.
	js, _ := jetstream.New(nc)
	for id, digest := range ids {
		var rec bytes.Buffer
		if _, err := archive.Export(ctx, js, id, recording.Stream, &rec); err != nil {
			t.Fatal(err)
		}
		fresh, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := recording.NewReader(bytes.NewReader(rec.Bytes()))
		res, err := relay.Replay(ctx, r, relay.ReplayOptions{NATS: fresh.NATSURL(), NATSOptions: []nats.Option{fresh.Participant()}})
		fresh.Close()
		if err != nil || res.StateDigest != digest {
			t.Errorf("replay of %s: %v %s, want %s", id, err, fmt.Sprint(res), digest)
		}
		break
	}
	_ = strings.Contains
}
