package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/natsconn"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/service"
)

// syncBuffer is a buffer written by the engine while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serve runs engine serve until the test ends; it returns what it printed
// once it printed where it listens.
func serve(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, append([]string{"serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--log-level", "warn"}, args...), strings.NewReader(""), &out, &errb)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d: %s", code, errb.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "  data  ") {
		select {
		case code := <-done:
			t.Fatalf("serve exited %d: %s", code, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve printed %q", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return out.String()
}

func status(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("{}"))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// engine serve draws an HTTP token and writes it with the operator's NATS
// user and the address that signs a browser in to the credentials file,
// which goes when it stops; on standard output that is not a terminal it
// prints where the token is, never the token. Tokens given in
// PARLEY_HTTP_TOKEN (or --http-token) replace it and are written nowhere.
func TestServe_HTTPTokens(t *testing.T) {
	data := t.TempDir()
	out := serve(t, "--data", data)
	m := regexp.MustCompile(`bind  (http://127\.0\.0\.1:\d+)/bind \(sign in at the sign_in_url of ([^;]+);`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "clients without credentials only read") || m[2] != filepath.Join(data, service.CredentialsFile) {
		t.Fatalf("serve printed %q", out)
	}
	c, err := service.ReadCredentials(data)
	if err != nil || len(c.HTTPToken) != 64 || c.HTTPURL != m[1] || c.NATSUser != natsconn.OperatorUser ||
		c.NATSParticipantUser != natsconn.ParticipantUser || len(c.NATSParticipantPassword) != 64 ||
		c.SignInURL != m[1]+"/bind?token="+c.HTTPToken {
		t.Fatalf("credentials %+v %v", c, err)
	}
	if strings.Contains(out, c.HTTPToken) || strings.Contains(out, c.NATSParticipantPassword) {
		t.Fatalf("the token is on standard output: %q", out)
	}
	write := m[1] + "/api/v1/deliberations/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b/bindings/sha256:" + strings.Repeat("0", 64)
	if code := status(t, write, ""); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d", code)
	}
	if code := status(t, write, c.HTTPToken); code != http.StatusBadRequest { // authenticated; the body is no resolution
		t.Errorf("with the token: %d", code)
	}

	a, b := strings.Repeat("a", 32), strings.Repeat("b", 32)
	t.Setenv("PARLEY_HTTP_TOKEN", a+","+b+"=carol")
	data2 := t.TempDir()
	out = serve(t, "--data", data2)
	m = regexp.MustCompile(`bind  (http://127\.0\.0\.1:\d+)/bind \(with an --http-token token`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("serve printed %q", out)
	}
	if c, err := service.ReadCredentials(data2); err != nil || c.HTTPToken != "" {
		t.Errorf("credentials %+v %v", c, err)
	}
	write = m[1] + "/api/v1/deliberations/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b/bindings/sha256:" + strings.Repeat("0", 64)
	for tok, want := range map[string]int{a: http.StatusBadRequest, b: http.StatusBadRequest, strings.Repeat("c", 32): http.StatusUnauthorized} {
		if code := status(t, write, tok); code != want {
			t.Errorf("token %s…: %d, want %d", tok[:4], code, want)
		}
	}
	if code, _, errs := run(t, "", "serve", "--data", t.TempDir(), "--http-token", "short"); code != exitUsage || !strings.Contains(errs, "at least 16") {
		t.Errorf("a short token: %d %s", code, errs)
	}
}

// Attack: the engine's standard output goes to a log (a file here; the
// journal under deploy/systemd), which others read. Neither standard
// output nor standard error ever holds the HTTP token or the sign-in
// address; the credentials file (mode 0600) has both, and its sign-in
// address signs a browser in.
func TestServe_TokenNotInRedirectedOutput(t *testing.T) {
	data := t.TempDir()
	logs := t.TempDir()
	stdout, err := os.Create(filepath.Join(logs, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := os.Create(filepath.Join(logs, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--log-level", "debug", "--data", data}, strings.NewReader(""), stdout, stderr)
	}()
	var c *service.Credentials
	deadline := time.Now().Add(30 * time.Second)
	for c == nil {
		if c, err = service.ReadCredentials(data); err != nil {
			c = nil
			if time.Now().After(deadline) {
				t.Fatalf("no credentials file: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	st, err := os.Stat(filepath.Join(data, service.CredentialsFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file %v %v", st, err)
	}
	// The sign-in address of the file signs a browser in: a cookie, and a
	// redirect to the address without the token.
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	resp, err := hc.Get(c.SignInURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.RawQuery != "" || len(jar.Cookies(resp.Request.URL)) != 1 {
		t.Errorf("sign in: %d at %s, cookies %v", resp.StatusCode, resp.Request.URL, jar.Cookies(resp.Request.URL))
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("serve exited %d", code)
	}
	for _, f := range []string{"stdout", "stderr"} {
		b, err := os.ReadFile(filepath.Join(logs, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), c.HTTPToken) || strings.Contains(string(b), "token=") {
			t.Errorf("%s holds the token:\n%s", f, b)
		}
		if f == "stdout" && !strings.Contains(string(b), "sign_in_url of "+filepath.Join(data, service.CredentialsFile)) {
			t.Errorf("stdout does not say where the token is:\n%s", b)
		}
	}
}

// The credentials file goes when the engine stops.
func TestServe_CredentialsRemovedAtStop(t *testing.T) {
	data := t.TempDir()
	t.Run("serve", func(t *testing.T) {
		serve(t, "--data", data)
		if _, err := os.Stat(filepath.Join(data, service.CredentialsFile)); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := os.Stat(filepath.Join(data, service.CredentialsFile)); !os.IsNotExist(err) {
		t.Errorf("after stop: %v", err)
	}
}

// --snapshot-store jetstream keeps the snapshots in the bucket and under
// the prefix the flags name, on the embedded default too (whose engine
// user may use the bucket of --snapshot-bucket), and none in the data
// directory; a second start opens the bucket the first created.
func TestServe_SnapshotsInJetStream(t *testing.T) {
	data := t.TempDir()
	args := []string{"--data", data, "--snapshot-store", "jetstream", "--snapshot-bucket", "SNAPS", "--snapshot-prefix", "group-a"}
	t.Run("first", func(t *testing.T) { serve(t, args...) })
	if files, _ := filepath.Glob(filepath.Join(data, service.SnapshotFile+".*")); len(files) != 0 {
		t.Errorf("snapshot files %v", files)
	}
	t.Run("second", func(t *testing.T) { serve(t, args...) })
	s, err := embedded.Start(embedded.Config{Dir: filepath.Join(data, "nats"), DontListen: true})
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.Stop(s)
	nc, err := nats.Connect("", nats.InProcessServer(s))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	obs, err := js.ObjectStore(context.Background(), "SNAPS")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := obs.List(context.Background())
	if err != nil || len(objs) != runner.DefaultShards {
		t.Fatalf("objects %v (%v)", objs, err)
	}
	for _, o := range objs {
		if !strings.HasPrefix(o.Name, "group-a.") || !strings.HasSuffix(o.Name, "-of-8") {
			t.Errorf("object %s", o.Name)
		}
	}
}

// Start-up says what is wrong at once: a second engine on the same data
// directory (naming the holder), the embedded server's port in use, a
// bad nkey; deploy/nats.conf without the engine's user is an error, not a
// crash.
func TestServe_StartFailsAtOnce(t *testing.T) {
	data := t.TempDir()
	serve(t, "--data", data)
	if code, _, errs := run(t, "", "serve", "--data", data, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"); code != 1 ||
		!strings.Contains(errs, "in use by another engine") || !strings.Contains(errs, "pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("a second engine on the data directory: %d %s", code, errs)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if code, _, errs := run(t, "", "serve", "--data", t.TempDir(), "--listen", ln.Addr().String(), "--http", "127.0.0.1:0"); code != 1 ||
		!strings.Contains(errs, ln.Addr().String()+" (the embedded NATS server) is in use") || !strings.Contains(errs, "--listen") || strings.Count(errs, "\n") != 1 {
		t.Errorf("the NATS port in use: %d %s", code, errs)
	}
	seed := filepath.Join(t.TempDir(), "engine.nk")
	os.WriteFile(seed, []byte("not a seed\n"), 0o600)
	if code, _, errs := run(t, "", "serve", "--data", t.TempDir(), "--nats", "nats://"+ln.Addr().String(), "--nkey", seed, "--http", "127.0.0.1:0"); code != 1 ||
		!strings.Contains(errs, "--nkey "+seed) {
		t.Errorf("a bad nkey: %d %s", code, errs)
	}
	if code, _, errs := run(t, "", "serve", "--data", t.TempDir(), "--nats-config", "../../deploy/nats.conf", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"); code != 1 ||
		!strings.Contains(errs, "--user") || strings.Contains(errs, "panic") {
		t.Errorf("deploy/nats.conf without --user: %d %s", code, errs)
	}
}

// SIGTERM while the engine starts (here: waiting for a cluster without a
// JetStream leader) ends it at once.
func TestServe_SignalDuringStart(t *testing.T) {
	dead := func() string {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		defer ln.Close()
		return "nats://" + ln.Addr().String()
	}
	srv, err := server.NewServer(&server.Options{ServerName: "n1", Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		Cluster: server.ClusterOpts{Name: "c", Host: "127.0.0.1", Port: -1}, Routes: server.RoutesFromStr(dead() + "," + dead())})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("not ready")
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	var out, errb syncBuffer
	code := Run(ctx, []string{"serve", "--data", t.TempDir(), "--nats", srv.ClientURL(), "--http", "127.0.0.1:0"}, strings.NewReader(""), &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "context canceled") {
		t.Errorf("interrupted start: %d %s", code, errb.String())
	}
}
