// Package deploy_test checks the deployment files: deploy/cluster's three
// node configurations start a JetStream cluster that engines with
// --replicas 3 run on, and its accounts are deploy/nats.conf's.
package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/health"
	"github.com/parley-engine/parley/internal/jstest"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

var nodes = []string{"cluster/nats-1.conf", "cluster/nats-2.conf", "cluster/nats-3.conf"}

// The cluster's PARLEY account has exactly deploy/nats.conf's users, with
// the same passwords and permissions.
func TestClusterConfig_AccountsMatch(t *testing.T) {
	single, err := server.ProcessConfigFile("nats.conf")
	if err != nil {
		t.Fatal(err)
	}
	users := func(o *server.Options) map[string]*server.User {
		m := map[string]*server.User{}
		for _, u := range o.Users {
			if u.Account != nil && u.Account.Name == "PARLEY" {
				m[u.Username] = u
			}
		}
		return m
	}
	want := users(single)
	if len(want) < 5 {
		t.Fatalf("deploy/nats.conf has %d users in PARLEY", len(want))
	}
	for _, f := range nodes {
		o, err := server.ProcessConfigFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got := users(o)
		if len(got) != len(want) {
			t.Errorf("%s: %d users, deploy/nats.conf %d", f, len(got), len(want))
		}
		for name, w := range want {
			g, ok := got[name]
			if !ok {
				t.Errorf("%s: no user %s", f, name)
				continue
			}
			if g.Password != w.Password || !reflect.DeepEqual(g.Permissions, w.Permissions) {
				t.Errorf("%s: user %s differs from deploy/nats.conf's", f, name)
			}
		}
		if o.Cluster.Name != "parley" || len(o.Routes) != 3 || !o.JetStream || o.SystemAccount != "SYS" || o.MaxPayload != single.MaxPayload {
			t.Errorf("%s: cluster %q, %d routes, jetstream %v, system account %q, max_payload %d", f, o.Cluster.Name, len(o.Routes), o.JetStream, o.SystemAccount, o.MaxPayload)
		}
	}
}

// Every user of deploy/nats.conf but the admin and the engine (the
// orchestrator, the participants) reads the stream as a ledger.Reader
// does, and may not pull nor make a direct get: the server would deliver
// onto any reply subject they named, a stream subject included.
//
// The same of deploy/nats-partitioned.conf, for its stream, and of
// deploy/nats-streams4.conf, for its four.
func TestNATSConf_ParticipantsDoNotPull(t *testing.T) {
	four, _ := ledger.PartitionedOver(4)
	for _, c := range []struct {
		file   string
		layout ledger.Layout
	}{{"nats.conf", ledger.Unpartitioned}, {"nats-partitioned.conf", ledger.Partitioned}, {"nats-streams4.conf", four}} {
		t.Run(c.file, func(t *testing.T) { participantsDoNotPull(t, c.file, c.layout) })
	}
}

func participantsDoNotPull(t *testing.T, file string, l ledger.Layout) {
	o, err := server.ProcessConfigFile(file)
	if err != nil {
		t.Fatal(err)
	}
	stream := l.Stream()
	refused := []string{"$JS.API.CONSUMER.MSG.NEXT." + stream + ".c", "$JS.API.DIRECT.GET." + stream,
		"$JS.API.DIRECT.GET." + stream + ".parley.x.art.principal", "$JS.API.STREAM.MSG.GET." + stream,
		// Nor take a partition's or a stream's lease from the engines.
		"$KV.PARLEY_LEASES.partition.0001", "$KV.PARLEY_LEASES.member.mallory",
		"$KV.PARLEY_LEASES.stream.0001", "$KV.PARLEY_LEASES.stream-member.mallory"}
	readers := 0
	for _, u := range o.Users {
		if u.Username == "admin" || u.Username == "engine" {
			continue
		}
		readers++
		allow := u.Permissions.Publish.Allow
		for _, s := range l.ReaderSubjects() {
			if !slices.Contains(allow, s) {
				t.Errorf("%s may not publish %s (a ledger.Reader does)", u.Username, s)
			}
		}
		for _, s := range refused {
			for _, a := range allow {
				if server.SubjectMatchesFilter(s, a) {
					t.Errorf("%s may publish %s (%s)", u.Username, s, a)
				}
			}
		}
		// Nor answer the reads engines forward to each other (an
		// engine's own query subjects), nor any query.
		if u.Permissions.Subscribe != nil {
			for _, a := range u.Permissions.Subscribe.Allow {
				for _, sub := range []string{"parley.api.engine.e1.deliberation", "parley.api.deliberation"} {
					if server.SubjectMatchesFilter(sub, a) {
						t.Errorf("%s may subscribe to %s (%s)", u.Username, sub, a)
					}
				}
			}
		}
	}
	if readers < 3 {
		t.Fatalf("%d users besides admin and engine", readers)
	}
}

func freePort(t *testing.T) int { return jstest.FreePort(t) }

// The three files, each loaded by a real server in this process (on free
// ports instead of the files' 4222-4224 and 6222-6224, and in temporary
// store directories), form a JetStream cluster; an engine with its
// credentials and --replicas 3 creates a stream of three replicas and
// serves it, and a second engine on the same cluster serves the same
// state.
func TestClusterConfig_StartsACluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	routePorts := map[int]int{} // the file's port -> this test's
	var opts []*server.Options
	for _, f := range nodes {
		o, err := server.ProcessConfigFile(f)
		if err != nil {
			t.Fatal(err)
		}
		routePorts[o.Cluster.Port] = freePort(t)
		opts = append(opts, o)
	}
	var urls []string
	for _, o := range opts {
		o.Cluster.Port = routePorts[o.Cluster.Port]
		var routes []*url.URL
		for _, r := range o.Routes {
			p, _ := strconv.Atoi(r.Port())
			u := *r
			u.Host = net.JoinHostPort(r.Hostname(), strconv.Itoa(routePorts[p]))
			routes = append(routes, &u)
		}
		o.Routes = routes
		o.Port, o.HTTPPort, o.StoreDir, o.NoLog, o.NoSigs = -1, 0, t.TempDir(), true, true
		srv, err := server.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		go srv.Start()
		t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
		if !srv.ReadyForConnections(10 * time.Second) {
			t.Fatalf("%s not ready", o.ServerName)
		}
		urls = append(urls, srv.ClientURL())
	}
	cluster := strings.Join(urls, ",")
	engine := func(supervise bool) *service.Service {
		s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), NATS: cluster, User: "engine", Password: "change-me-engine",
			Replicas: 3, HTTP: "127.0.0.1:0", NoSupervisor: !supervise})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	// Started as the cluster forms: the engine waits for its JetStream
	// leader.
	s1 := engine(true)
	info := s1.Stream.CachedInfo()
	if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream %+v cluster %+v", info.Config, info.Cluster)
	}
	if err := ledger.Check(info.Config); err != nil {
		t.Fatal(err)
	}
	s2 := engine(false)

	orch, err := nats.Connect(cluster, nats.UserInfo("orchestrator", "change-me-orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	defer orch.Close()
	alice, err := nats.Connect(cluster, nats.UserInfo("alice", "change-me-alice"))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	o, _ := client.New(orch, "orchestrator")
	a, _ := client.New(alice, "alice")
	id, err := o.Open(ctx, client.Charter{Title: "on three nodes"})
	if err != nil {
		t.Fatal(err)
	}
	_, ack, err := a.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "replicated"}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := a.WaitPosition(ctx, id, ack.Sequence)
	if err != nil || v.Artifacts != 1 {
		t.Fatalf("%v %+v", err, v)
	}
	for i, s := range []*service.Service{s1, s2} {
		if err := s.Runner.WaitFor(ctx, ack.Sequence); err != nil {
			t.Fatal(err)
		}
		var got struct {
			StateDigest string `json:"state_digest"`
		}
		if code := getJSON(t, "http://"+s.HTTPAddr()+"/api/v1/deliberations/"+id, &got); code != 200 || got.StateDigest != v.StateDigest.String() {
			t.Errorf("engine %d: %d %s, want %s", i+1, code, got.StateDigest, v.StateDigest)
		}
		var h health.Health
		if code := getJSON(t, "http://"+s.HTTPAddr()+"/healthz", &h); code != 200 || !h.OK || !h.Advisories {
			t.Errorf("engine %d: /healthz %d %+v", i+1, code, h)
		}
	}
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := jsonDecode(resp, v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return resp.StatusCode
}

// The files as they are, in three nats-server processes on their own
// ports (4222-4224, 6222-6224, 8222-8224), and engine serve --replicas 3
// as a process on them: what docs/OPERATIONS.md tells an operator to run.
// It needs those ports free, so it runs only with
// PARLEY_CLUSTER_CONFIG_TEST=1 (TestClusterConfig_StartsACluster checks
// the same files in process, on free ports).
func TestClusterConfig_Processes(t *testing.T) {
	if os.Getenv("PARLEY_CLUSTER_CONFIG_TEST") != "1" {
		t.Skip("PARLEY_CLUSTER_CONFIG_TEST=1 runs three nats-server processes on the files' own ports")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := t.TempDir()
	for _, b := range [][]string{{"nats-server", "github.com/nats-io/nats-server/v2"}, {"engine", "github.com/parley-engine/parley/cmd/engine"}} {
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(bin, b[0]), b[1]).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b[1], err, out)
		}
	}
	work := t.TempDir()
	for _, f := range nodes {
		abs, _ := filepath.Abs(f)
		cmd := exec.Command(filepath.Join(bin, "nats-server"), "-c", abs)
		cmd.Dir = work
		log, _ := os.Create(filepath.Join(work, filepath.Base(f)+".log"))
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	// The monitoring endpoint says when each node's JetStream is up.
	for _, port := range []int{8222, 8223, 8224} {
		for {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
			if ctx.Err() != nil {
				b, _ := os.ReadFile(filepath.Join(work, "nats-1.conf.log"))
				t.Fatalf("node on %d not healthy: %v\n%s", port, err, b)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	httpPort := freePort(t)
	cmd := exec.Command(filepath.Join(bin, "engine"), "serve", "--nats", "nats://127.0.0.1:4222,nats://127.0.0.1:4223,nats://127.0.0.1:4224",
		"--user", "engine", "--replicas", "3", "--data", filepath.Join(work, "engine-1"), "--http", "127.0.0.1:"+strconv.Itoa(httpPort))
	cmd.Env = append(os.Environ(), "PARLEY_NATS_PASSWORD=change-me-engine")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	var h health.Health
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", httpPort))
		if err == nil {
			jsonDecode(resp, &h)
			resp.Body.Close()
			if resp.StatusCode == 200 && h.OK {
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("engine not healthy: %+v\n%s", h, out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	nc, err := nats.Connect("nats://127.0.0.1:4223", nats.UserInfo("admin", "change-me-admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(ctx, wire.StreamName)
	if err != nil || st.CachedInfo().Config.Replicas != 3 || st.CachedInfo().Cluster == nil || len(st.CachedInfo().Cluster.Replicas) != 2 {
		t.Fatalf("the stream on the processes' cluster: %v", err)
	}
}

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }

// deploy/nats-partitioned.conf has deploy/nats.conf's users, with the same
// passwords; their publish permissions differ only in the JetStream
// stream's name and the mapped forms of artifact and control subjects.
func TestNATSConf_PartitionedUsersMatch(t *testing.T) {
	plain, err := server.ProcessConfigFile("nats.conf")
	if err != nil {
		t.Fatal(err)
	}
	part, err := server.ProcessConfigFile("nats-partitioned.conf")
	if err != nil {
		t.Fatal(err)
	}
	// The buckets beside the stream keep their names.
	mapped := strings.NewReplacer("parley.*.art.", "parley.p.*.*.art.", "parley.*.ctl", "parley.p.*.*.ctl", "PARLEY_LEASES", "PARLEY_LEASES",
		"PARLEY_SNAPSHOTS", "PARLEY_SNAPSHOTS", "PARLEY", "PARLEY_0000_1023")
	byName := map[string]*server.User{}
	for _, u := range part.Users {
		byName[u.Username] = u
	}
	if len(part.Users) != len(plain.Users) {
		t.Errorf("%d users, deploy/nats.conf %d", len(part.Users), len(plain.Users))
	}
	for _, w := range plain.Users {
		g := byName[w.Username]
		if g == nil || g.Password != w.Password || g.Account == nil || g.Account.Name != w.Account.Name {
			t.Errorf("user %s differs from deploy/nats.conf's", w.Username)
			continue
		}
		if w.Permissions == nil || w.Permissions.Publish == nil {
			continue
		}
		var want []string
		for _, a := range w.Permissions.Publish.Allow {
			want = append(want, mapped.Replace(a))
		}
		got := slices.DeleteFunc(slices.Clone(g.Permissions.Publish.Allow), func(s string) bool { return s == "$JS.API.STREAM.INFO.PARLEY" })
		if !slices.Equal(got, want) {
			t.Errorf("%s may publish %v, want %v", w.Username, got, want)
		}
	}
}
