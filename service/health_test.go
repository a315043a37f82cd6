package service_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/health"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/partition"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// bareServer is a NATS server with no authorization, as a cluster an
// engine joins with --nats: the test is its administrator.
func bareServer(t *testing.T, cfg embedded.Config) (*server.Server, jetstream.JetStream) {
	t.Helper()
	cfg.Dir, cfg.Host, cfg.Port = t.TempDir(), "127.0.0.1", -1
	srv, err := embedded.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { embedded.Stop(srv) })
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	return srv, js
}

func healthOf(t *testing.T, s *service.Service) (int, health.Health) {
	t.Helper()
	var h health.Health
	code := get(t, s, "/healthz", &h)
	return code, h
}

// waitHealth polls /healthz until ok says so.
func waitHealth(t *testing.T, s *service.Service, what string, ok func(int, health.Health) bool) health.Health {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, h := healthOf(t, s)
		if ok(code, h) {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: /healthz %d %+v", what, code, h)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func metric(t *testing.T, s *service.Service, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + s.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// supervisedIn says whether the supervisor recorded the cancel of id
// within wait (its TERMINATION in the stream), on the record's layout l.
func supervisedIn(t *testing.T, js jetstream.JetStream, l ledger.Layout, id string, wait time.Duration) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for ctx.Err() == nil {
		if st, err := js.Stream(ctx, l.Stream()); err == nil {
			if m, err := st.GetLastMsgForSubject(ctx, l.Stored(wire.ArtifactSubject(id, wire.SupervisorToken))); err == nil && m != nil {
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// An administrator sets max_age on the live stream: the engine notices from
// the stream's advisory (the check is an hour away), stops judging (a
// cancel is no longer recorded by the supervisor, which recorded one
// before), its API answers 503 engine.halted over HTTP and NATS, /healthz
// turns 503 with the reason, and the metrics count it.
func TestWatch_UnsafeEditHalts(t *testing.T) {
	for _, l := range []ledger.Layout{ledger.Unpartitioned, ledger.Partitioned} {
		t.Run(l.String(), func(t *testing.T) { unsafeEditHalts(t, l) })
	}
}

func unsafeEditHalts(t *testing.T, l ledger.Layout) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ecfg embedded.Config
	if l.Partitioned() {
		for _, m := range partition.Mappings() {
			ecfg.Mappings = append(ecfg.Mappings, embedded.Mapping{From: m.From, To: m.To})
		}
	}
	srv, admin := bareServer(t, ecfg)
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), NATS: srv.ClientURL(), HTTP: "127.0.0.1:0", StreamCheckEvery: time.Hour,
		Partitioned: l.Partitioned()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := waitHealth(t, s, "healthy at start", func(code int, h health.Health) bool { return code == 200 && !h.Checked.IsZero() })
	if !h.OK || h.Halted || !h.Advisories || len(h.Problems) != 0 {
		t.Fatalf("at start: %+v", h)
	}
	nc, _ := nats.Connect(srv.ClientURL())
	defer nc.Close()
	alice, _ := client.New(nc, "alice")
	before, err := alice.Open(ctx, client.Charter{Title: "before"})
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.Cancel(ctx, before, "control"); err != nil {
		t.Fatal(err)
	}
	if !supervisedIn(t, admin, l, before, 20*time.Second) {
		t.Fatal("the supervisor did not record a cancel on a sound stream")
	}

	// A purge the stream refuses (deny_purge) is seen in the API audit,
	// checked, and found harmless.
	st, _ := admin.Stream(ctx, l.Stream())
	if err := st.Purge(ctx); err == nil {
		t.Fatal("the stream was purged")
	}
	for metric(t, s, `parley_stream_advisories_total{kind="API.PURGE"}`) != 1 {
		if ctx.Err() != nil {
			t.Fatal("the refused purge's audit was not seen")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, h := healthOf(t, s); code != 200 || h.Halted {
		t.Fatalf("after a refused purge: %d %+v", code, h)
	}

	cfg := l.StreamConfig(1)
	cfg.MaxAge = 3 * time.Minute
	if _, err := admin.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	h = waitHealth(t, s, "unsafe noticed", func(code int, h health.Health) bool { return code == http.StatusServiceUnavailable })
	if h.OK || !h.Halted || !strings.Contains(h.Error, "max_age is 3m0s") || len(h.Problems) != 1 ||
		h.Problems[0].Code != health.ProblemStreamUnsafe || !strings.Contains(h.Problems[0].NoticedBy, "$JS.EVENT.ADVISORY.") {
		t.Fatalf("after max_age: %+v", h)
	}
	var apiErr struct{ Code, Error string }
	if code := get(t, s, "/api/v1/deliberations", &apiErr); code != http.StatusServiceUnavailable || apiErr.Code != "engine.halted" || !strings.Contains(apiErr.Error, "max_age") {
		t.Errorf("the API after the halt: %d %+v", code, apiErr)
	}
	// The client does not retry a halted engine's answer.
	var se *client.ServiceError
	if _, err := alice.State(ctx, before); !errors.As(err, &se) || se.Code != "engine.halted" || !strings.Contains(err.Error(), "max_age") || errors.Is(err, client.ErrUnavailable) {
		t.Errorf("the micro API after the halt: %v", err)
	}
	if v := metric(t, s, `parley_health_problems_total{code="stream.unsafe"}`); v != 1 {
		t.Errorf("parley_health_problems_total{stream.unsafe} = %v", v)
	}
	if metric(t, s, "parley_halted") != 1 || metric(t, s, "parley_healthy") != 0 {
		t.Error("parley_halted / parley_healthy")
	}
	after, err := alice.Open(ctx, client.Charter{Title: "after"})
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.Cancel(ctx, after, "no judge"); err != nil {
		t.Fatal(err)
	}
	// The supervisor recorded the first cancel within a second; it has
	// three for this one.
	if supervisedIn(t, admin, l, after, 3*time.Second) {
		t.Error("the supervisor still judges on an unsafe stream")
	}
	// Reverting the limit does not lift the halt: messages may be gone.
	cfg.MaxAge = 0
	reverted := time.Now()
	if _, err := admin.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	// Once the stream check has run on the reverted stream (its advisory
	// asks for one at once):
	waitHealth(t, s, "a check after the revert", func(_ int, h health.Health) bool { return h.Checked.After(reverted) })
	if code, h := healthOf(t, s); code != http.StatusServiceUnavailable || !h.Halted {
		t.Errorf("after the revert: %d %+v", code, h)
	}
}

// Without the advisories (a deployment whose engine user may not
// subscribe to them), the periodic check notices on its own; a deleted
// stream halts too.
func TestWatch_CheckWithoutAdvisories(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conf := filepath.Join(t.TempDir(), "nats.conf")
	os.WriteFile(conf, []byte(`
accounts { A { jetstream: enabled, users: [
  {user: admin, password: admin}
  {user: engine, password: engine, permissions: {subscribe: {deny: ["$JS.EVENT.>"]}}}
] } }
`), 0o600)
	srv, err := embedded.Start(embedded.Config{Dir: t.TempDir(), ConfigFile: conf, Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.Stop(srv)
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), NATS: srv.ClientURL(), User: "engine", Password: "engine",
		HTTP: "127.0.0.1:0", StreamCheckEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := waitHealth(t, s, "advisories refused", func(code int, h health.Health) bool { return code == 200 && !h.Advisories && !h.Checked.IsZero() })
	if h.CheckEvery != "100ms" {
		t.Errorf("%+v", h)
	}
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("admin", "admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	admin, _ := jetstream.New(nc)
	cfg := ledger.StreamConfig(1)
	cfg.MaxMsgsPerSubject = 10
	if _, err := admin.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	h = waitHealth(t, s, "unsafe noticed by the check", func(code int, h health.Health) bool { return code == http.StatusServiceUnavailable })
	if !h.Halted || !strings.Contains(h.Error, "max_msgs_per_subject is 10") || h.Problems[0].NoticedBy != "check" {
		t.Fatalf("%+v", h)
	}
	if err := admin.DeleteStream(ctx, wire.StreamName); err != nil {
		t.Fatal(err)
	}
	h = waitHealth(t, s, "deletion noticed", func(code int, h health.Health) bool {
		return hasProblem(h.Problems, health.ProblemStreamDeleted)
	})
	if !strings.Contains(h.Error, "no longer exists") {
		t.Errorf("%+v", h)
	}
}

func hasProblem(ps []health.HealthProblem, code string) bool {
	for _, p := range ps {
		if p.Code == code {
			return true
		}
	}
	return false
}

// The embedded server's storage is tiny (max_file_store): participants
// fill it until the server refuses them; the supervisor's FAILURE and
// TERMINATION for an idle deliberation are refused too. /healthz says so
// (storage.exhausted, write.refused) without halting, and the metrics
// count the refused writes.
func TestWatch_StorageFull(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conf := filepath.Join(t.TempDir(), "nats.conf")
	os.WriteFile(conf, []byte("jetstream { max_file_store: 256KB }\n"), 0o600)
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", NATSConfig: conf,
		StreamCheckEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc := dial(t, s)
	alice, _ := client.New(nc, "alice")
	idle, err := alice.Open(ctx, client.Charter{Title: "idle", Limits: map[string]any{"idle_timeout": "1s"}})
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	junk := []byte(`{"op":"round","round":1,"pad":"` + strings.Repeat("x", 4000) + `"}`)
	var refused error
	for i := 0; i < 1000 && refused == nil; i++ {
		_, refused = js.Publish(ctx, wire.ControlSubject("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"), junk)
	}
	var apiErr *jetstream.APIError
	if !errors.As(refused, &apiErr) {
		t.Fatalf("the storage never filled: %v", refused)
	}
	h := waitHealth(t, s, "storage and refused writes", func(code int, h health.Health) bool {
		return code == http.StatusServiceUnavailable && hasProblem(h.Problems, health.ProblemStorageExhausted) && hasProblem(h.Problems, health.ProblemWriteRefused)
	})
	if h.Halted || h.Writes.Refused == 0 || h.Writes.Storage == 0 || h.Storage == nil || h.Storage.Scope != "server" || h.Storage.Limit != 256<<10 {
		t.Fatalf("%+v", h)
	}
	if v := metric(t, s, `parley_engine_writes_total{result="refused_storage"}`); v == 0 {
		t.Error("parley_engine_writes_total{refused_storage} = 0")
	}
	if v := metric(t, s, `parley_storage_limit_bytes`); v != 256<<10 {
		t.Errorf("parley_storage_limit_bytes = %v", v)
	}
	// Not halted: the API still serves.
	var v api.View
	if code := get(t, s, "/api/v1/deliberations/"+idle, &v); code != 200 {
		t.Errorf("GET %d", code)
	}
}

// A server whose JetStream goes off (as on a full disk): /healthz says
// stream.unavailable with the server's error, without halting.
func TestWatch_JetStreamOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, _ := bareServer(t, embedded.Config{})
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), NATS: srv.ClientURL(), HTTP: "127.0.0.1:0", StreamCheckEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitHealth(t, s, "healthy at start", func(code int, h health.Health) bool { return code == 200 && !h.Checked.IsZero() })
	if err := srv.ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	h := waitHealth(t, s, "JetStream off", func(code int, h health.Health) bool {
		return code == http.StatusServiceUnavailable && hasProblem(h.Problems, health.ProblemStreamUnavailable)
	})
	if h.Halted || !strings.Contains(h.Error, "stream info") {
		t.Errorf("%+v", h)
	}
}

// On a cluster the engine sees its account's storage limit: filled, it is
// storage.exhausted with scope "account".
func TestWatch_AccountStorage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conf := filepath.Join(t.TempDir(), "nats.conf")
	os.WriteFile(conf, []byte(`
accounts { A { jetstream: {max_file: 256KB}, users: [{user: admin, password: admin}, {user: engine, password: engine}] } }
`), 0o600)
	srv, err := embedded.Start(embedded.Config{Dir: t.TempDir(), ConfigFile: conf, Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.Stop(srv)
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), NATS: srv.ClientURL(), User: "engine", Password: "engine",
		HTTP: "127.0.0.1:0", StreamCheckEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := waitHealth(t, s, "the account's limit seen", func(code int, h health.Health) bool { return code == 200 && h.Storage != nil })
	if h.Storage.Scope != "account" || h.Storage.Limit != 256<<10 {
		t.Fatalf("%+v", h.Storage)
	}
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("admin", "admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	junk := []byte(`{"op":"round","round":1,"pad":"` + strings.Repeat("x", 4000) + `"}`)
	var refused error
	for i := 0; i < 1000 && refused == nil; i++ {
		_, refused = js.Publish(ctx, wire.ControlSubject("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"), junk)
	}
	if refused == nil {
		t.Fatal("the account's storage never filled")
	}
	h = waitHealth(t, s, "storage exhausted", func(code int, h health.Health) bool {
		return code == http.StatusServiceUnavailable && hasProblem(h.Problems, health.ProblemStorageExhausted)
	})
	if h.Halted || !strings.Contains(h.Error, "account storage is at its limit") {
		t.Errorf("%+v (the last publish: %v)", h, refused)
	}
}
