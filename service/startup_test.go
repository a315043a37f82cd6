package service_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/partition"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/service"
)

// A second engine on the same data directory fails at once, naming the
// holder; once the first stops, it starts.
func TestStart_DataDirLocked(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir)
	_, err := service.Start(context.Background(), service.Config{DataDir: dir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "in use by another engine") || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("a second engine on the directory: %v", err)
	}
	// The refused engine did not disturb the first: its files are there.
	if _, err := os.Stat(filepath.Join(dir, service.CredentialsFile)); err != nil {
		t.Errorf("the first engine's credentials: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := start(t, dir)
	s2.Close()
}

// The embedded server's port in use: the server's own reason, at once
// (not a wait for a server that will never be ready).
func TestStart_PortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: ln.Addr().String(), HTTP: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "address already in use") || strings.Contains(err.Error(), "not ready") {
		t.Fatalf("port in use: %v", err)
	}
}

// A data directory the engine cannot write: at once, with the cause.
func TestStart_UnwritableDataDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	_, err := service.Start(context.Background(), service.Config{DataDir: filepath.Join(file, "data"), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a data directory under a file: %v", err)
	}
	// The store directory cannot be made: JetStream's own reason.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "nats"), nil, 0o600)
	_, err = service.Start(context.Background(), service.Config{DataDir: dir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "cannot start") || !strings.Contains(err.Error(), "JetStream") {
		t.Errorf("a store that cannot be made: %v", err)
	}
	if os.Getuid() != 0 {
		ro := t.TempDir()
		os.Chmod(ro, 0o500)
		defer os.Chmod(ro, 0o700)
		_, err = service.Start(context.Background(), service.Config{DataDir: ro, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
		if err == nil || !strings.Contains(err.Error(), "not writable") {
			t.Errorf("a read-only data directory: %v", err)
		}
	}
}

// leaderless is one node of a 3-node JetStream cluster whose peers never
// come: its JetStream has no meta leader, so the stream's API never
// answers.
func leaderless(t *testing.T) string {
	t.Helper()
	dead := func() string {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		defer ln.Close()
		return "nats://" + ln.Addr().String()
	}
	opts := &server.Options{ServerName: "n1", Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		Cluster: server.ClusterOpts{Name: "c", Host: "127.0.0.1", Port: -1},
		Routes:  server.RoutesFromStr(dead() + "," + dead())}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("not ready")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv.ClientURL()
}

// A cancelled start (SIGTERM while the engine waits for a cluster that
// has no quorum) ends at once with the cancellation, not after the
// stream's 30-second timeout.
func TestStart_CancelDuringStart(t *testing.T) {
	url := leaderless(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	_, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), NATS: url, HTTP: "127.0.0.1:0"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled start: %v", err)
	}
	// The embedded server: an interrupted start stops the server.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	_, err = service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("a cancelled embedded start: %v", err)
	}
}

// A credential the engine cannot use is an error at start, not a log line.
func TestStart_BadCredentials(t *testing.T) {
	srv, _ := bareServer(t, embedded.Config{})
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.nk")
	os.WriteFile(bad, []byte("SUAnotaseed\n"), 0o600)
	for name, cfg := range map[string]service.Config{
		"garbage seed":  {NKey: bad},
		"missing seed":  {NKey: filepath.Join(dir, "missing.nk")},
		"missing creds": {Creds: filepath.Join(dir, "missing.creds")},
	} {
		cfg.DataDir, cfg.NATS, cfg.HTTP = t.TempDir(), srv.ClientURL(), "127.0.0.1:0"
		_, err := service.Start(context.Background(), cfg)
		flag := "--nkey"
		if cfg.Creds != "" {
			flag = "--creds"
		}
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The embedded server's store holds the record of one layout: an engine
// started on it with the other refuses to start and says why, rather
// than create a second stream beside it (the server would then hold both
// layouts, which no engine reads); started again as before, it serves the
// record it had.
func TestStart_OtherLayoutRefused(t *testing.T) {
	for _, first := range []bool{false, true} {
		t.Run(map[bool]string{false: "unpartitioned first", true: "partitioned first"}[first], func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			cfg := service.Config{DataDir: dir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", Partitioned: first}
			s, err := service.Start(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			want := s.Runner.Layout().Stream()
			s.Close()
			other := cfg
			other.Partitioned = !first
			if s, err := service.Start(ctx, other); err == nil {
				s.Close()
				t.Fatal("started on the other layout")
			} else if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--partitioned") {
				t.Errorf("the refusal does not say why: %v", err)
			}
			s, err = service.Start(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.Runner.Layout().Stream(); got != want {
				t.Errorf("reads %s, not %s", got, want)
			}
		})
	}
}

// On a cluster (--nats), whose configuration carries the mapping, the
// engine reads the layout the server holds: the partitioned stream even
// without Partitioned. With Partitioned it refuses the unpartitioned
// stream, and a server holding both layouts is refused either way (not
// supported yet: one stream).
func TestStart_ClusterLayout(t *testing.T) {
	ctx := context.Background()
	var mappings []embedded.Mapping
	for _, m := range partition.Mappings() {
		mappings = append(mappings, embedded.Mapping{From: m.From, To: m.To})
	}
	srv, err := embedded.Start(embedded.Config{Dir: t.TempDir(), Host: "127.0.0.1", Port: -1, Mappings: mappings})
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.Stop(srv)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := ledger.Partitioned.Ensure(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	start := func(partitioned bool) (*service.Service, error) {
		return service.Start(ctx, service.Config{DataDir: t.TempDir(), HTTP: "127.0.0.1:0", NATS: srv.ClientURL(), Partitioned: partitioned})
	}
	for _, partitioned := range []bool{false, true} {
		s, err := start(partitioned)
		if err != nil {
			t.Fatalf("partitioned %v: %v", partitioned, err)
		}
		l := s.Runner.Layout()
		s.Close()
		if !l.Partitioned() {
			t.Errorf("partitioned %v: reads the %s record", partitioned, l)
		}
	}
	if _, err := ledger.Unpartitioned.Ensure(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	for _, partitioned := range []bool{false, true} {
		if s, err := start(partitioned); err == nil {
			s.Close()
			t.Errorf("partitioned %v: started on both layouts", partitioned)
		} else if !errors.Is(err, ledger.ErrLayout) || !strings.Contains(err.Error(), "PARLEY, PARLEY_0000_1023") {
			t.Errorf("partitioned %v: %v", partitioned, err)
		}
	}
	if err := js.DeleteStream(ctx, ledger.Partitioned.Stream()); err != nil {
		t.Fatal(err)
	}
	if s, err := start(true); err == nil {
		s.Close()
		t.Error("--partitioned started on the unpartitioned record")
	} else if !strings.Contains(err.Error(), "PARLEY") || !strings.Contains(err.Error(), "--partitioned") {
		t.Errorf("the refusal does not say why: %v", err)
	}
}

// Each layout has its own snapshots: an engine on a cluster whose record
// moved from PARLEY to PARLEY_0000_1023 (exported and imported, say) reads
// the partitioned stream from its start, and does not restore the
// projection it folded from PARLEY over it.
func TestStart_SnapshotsPerLayout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mappings []embedded.Mapping
	for _, m := range partition.Mappings() {
		mappings = append(mappings, embedded.Mapping{From: m.From, To: m.To})
	}
	open := func(url, title string) string {
		t.Helper()
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		c, _ := client.New(nc, "alice")
		id, err := c.Open(ctx, client.Charter{Title: title})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	data := t.TempDir()
	cfg := service.Config{DataDir: data, HTTP: "127.0.0.1:0"}
	// First the unpartitioned record, two deliberations.
	srv, err := embedded.Start(embedded.Config{Dir: t.TempDir(), Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS = srv.ClientURL()
	s, err := service.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	open(srv.ClientURL(), "one")
	open(srv.ClientURL(), "two")
	if !eventually.Within(10*time.Second, func() bool { return s.Runner.Deliberations() == 2 }) {
		t.Fatal("the engine never held both deliberations")
	}
	s.Close() // a last snapshot
	embedded.Stop(srv)
	if snaps, _ := filepath.Glob(filepath.Join(data, service.SnapshotFile+".*-of-*")); len(snaps) == 0 {
		t.Fatal("no snapshot of the unpartitioned record: the test shows nothing")
	}
	// Then a cluster holding the partitioned record, three deliberations.
	srv, err = embedded.Start(embedded.Config{Dir: t.TempDir(), Host: "127.0.0.1", Port: -1, Mappings: mappings})
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.Stop(srv)
	nc, _ := nats.Connect(srv.ClientURL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := ledger.Partitioned.Ensure(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	// As many messages as the snapshots cover, and one more: snapshots
	// restored over this stream would pass for its own.
	ids := []string{open(srv.ClientURL(), "three"), open(srv.ClientURL(), "four"), open(srv.ClientURL(), "five")}
	cfg.NATS = srv.ClientURL()
	s, err = service.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Runner.Layout().Partitioned() {
		t.Fatalf("reads the %s record", s.Runner.Layout())
	}
	if err := s.Runner.WaitFor(ctx, 3); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if !s.Runner.ReadDeliberation(id, func(*projector.Deliberation) {}) {
			t.Errorf("the partitioned record's %s is not in the projection: the snapshots of the other record were restored", id)
		}
	}
	if n := s.Runner.Deliberations(); n != len(ids) {
		t.Errorf("the engine holds %d deliberations: want the partitioned record's %d", n, len(ids))
	}
}
