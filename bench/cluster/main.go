// Command cluster runs relay fleets on a 3-node JetStream cluster (the
// PARLEY stream on 3 replicas) and kills the stream leader mid-run, in
// three scenarios, in turn, in one run, each on a fresh cluster:
//
//   - baseline: one engine, no kill;
//   - kill: one engine, the stream leader killed once a third of the
//     fleet's turns are taken, and restarted -restart-after later;
//   - kill, 2 engines: the same with two engines on the cluster, both
//     serving the query API (one micro queue group) and both supervising;
//   - leases: three engines sharing the supervision by partition leases
//     (engine serve --leases, -lease-ttl), one of them crashed once a
//     third of the fleet's turns are taken (its connection closed, its
//     leases left to expire): the others take its partitions over. It
//     reports the takeover time, from the crash until the two others hold
//     every partition between them.
//   - own: the record partitioned over four streams (R3) and three
//     engines owning them (engine serve --own-streams): one engine
//     crashed once a third of the fleet's turns are taken, and a fourth
//     started. It reports the takeover time (the crash until the others
//     fold every stream), every engine's answers to a read of every
//     deliberation after the fleet (its own, or forwarded to the owner),
//     and each engine's share of the projection (deliberations and
//     artifacts) beside the whole.
//
// With -nats-server, the nodes are nats-server processes and the leader
// is killed with SIGKILL; without it, they run in this process and the
// leader is shut down. The engines and the relays run in this process.
//
// For each scenario it reports the relays that completed with a verified
// closure; the FAILUREs and TERMINATIONs in the record (none and one a
// deliberation are expected); the supervisors' ERROR log lines; the
// relays' total times (median, p90, max); and, for the kills, each
// relay's delay through the leader change: the time from the kill until
// the relay's next acknowledged artifact, beside the relay's usual gap
// between two artifacts (median over the run).
//
//	go build -o /tmp/nats-server github.com/nats-io/nats-server/v2
//	go run ./bench/cluster -nats-server /tmp/nats-server -relays 40
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/partition"
	"github.com/parley-engine/parley/relay"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

func main() {
	bin := flag.String("nats-server", "", "a nats-server binary: the nodes run as processes and the leader is SIGKILLed (default: in-process nodes, shut down)")
	relays := flag.Int("relays", 40, "relays in each fleet")
	config := flag.String("config", "examples/relay/fleet.json", "the relay configuration (scripted participants)")
	restartAfter := flag.Duration("restart-after", 2*time.Second, "how long the killed leader stays down")
	only := flag.String("only", "", "run only these scenarios (comma-separated: baseline,kill,kill2,leases,own)")
	leaseTTL := flag.Duration("lease-ttl", 3*time.Second, "the leases' time to live in the leases scenario")
	timeout := flag.Duration("timeout", 0, "the relays' per-attempt request timeout (client.Options.Timeout; 0: the client's default)")
	flag.Parse()
	cfg, err := relay.Load(*config)
	if err != nil {
		log.Fatal(err)
	}
	scenarios := []struct {
		name    string
		engines int
		kill    bool
		leases  bool
		own     bool
	}{{"baseline", 1, false, false, false}, {"kill", 1, true, false, false}, {"kill2", 2, true, false, false}, {"leases", 3, true, true, false}, {"own", 3, true, true, true}}
	mode := "in-process nodes, leader shut down"
	if *bin != "" {
		mode = "nats-server processes, leader SIGKILLed"
	}
	fmt.Printf("%d relays of %s a fleet; 3 nodes (%s), stream on 3 replicas\n\n", *relays, *config, mode)
	var base *result
	for _, sc := range scenarios {
		if *only != "" && !slices.Contains(strings.Split(*only, ","), sc.name) {
			continue
		}
		ttl := time.Duration(0)
		if sc.leases {
			ttl = *leaseTTL
		}
		r, err := run(cfg, *bin, sc.engines, *relays, sc.kill, ttl, *restartAfter, client.Options{Timeout: *timeout}, sc.own)
		if err != nil {
			log.Fatalf("%s: %v", sc.name, err)
		}
		if sc.name == "baseline" {
			base = r
		}
		r.print(sc.name, sc.engines, base)
	}
}

// result of one scenario.
type result struct {
	completed, relays      int
	failures, terminations int
	delibs                 int
	supervisorErrors       int
	errs                   []string
	totals                 []time.Duration
	delays                 []time.Duration // kill -> next acknowledged artifact
	gaps                   []time.Duration // each relay's median gap between artifacts
	stalls                 []time.Duration // each relay's longest gap between artifacts
	killed                 string
	elected                time.Duration // kill -> the stream's new leader answers
	takeover               time.Duration // leases: the crash -> the others hold every partition
	wall                   time.Duration
	// own: the engines alive at the end, their answers to reads of
	// every deliberation, and their shares of the projection.
	alive  []*service.Service
	reads  readStats
	shares []share
}

type share struct {
	held              []int
	delibs, artifacts int
}

// readStats counts the answers to a read of every deliberation at every
// engine: at the first try, and after the client's retries.
type readStats struct {
	asked, firstOK, forwarded, finalOK int
}

// readEverywhere reads every deliberation at every engine's HTTP API.
func readEverywhere(ctx context.Context, svcs []*service.Service, ids map[string]bool) readStats {
	var st readStats
	for id := range ids {
		for _, s := range svcs {
			st.asked++
			for try := 0; try < 20; try++ {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.HTTPURL()+"/api/v1/deliberations/"+id, nil)
				resp, err := http.DefaultClient.Do(req)
				ok := err == nil && resp.StatusCode == 200
				if err == nil {
					if ok && resp.Header.Get(service.EngineHeader) != "" && try == 0 {
						st.forwarded++
					}
					resp.Body.Close()
				}
				if ok {
					if try == 0 {
						st.firstOK++
					}
					st.finalOK++
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	return st
}

// heldStreams is how many streams the engines fold between them.
func heldStreams(svcs ...*service.Service) int {
	seen := map[int]bool{}
	for _, s := range svcs {
		for _, k := range s.HeldStreams() {
			seen[k] = true
		}
	}
	return len(seen)
}

// everyHolds reports whether every engine folds a stream.
func everyHolds(svcs ...*service.Service) bool {
	for _, s := range svcs {
		if len(s.HeldStreams()) == 0 {
			return false
		}
	}
	return true
}

func (r *result) print(name string, engines int, base *result) {
	fmt.Printf("== %s (%d engine%s)%s\n", name, engines, map[bool]string{true: "s"}[engines > 1], r.killed)
	fmt.Printf("   completed and verified %d/%d; FAILUREs %d; TERMINATIONs %d over %d deliberations; supervisor ERROR lines %d; wall %.1f s\n",
		r.completed, r.relays, r.failures, r.terminations, r.delibs, r.supervisorErrors, r.wall.Seconds())
	for _, e := range r.errs {
		fmt.Printf("   error: %s\n", e)
	}
	fmt.Printf("   relay total: median %s, p90 %s, max %s", q(r.totals, 0.5), q(r.totals, 0.9), q(r.totals, 1))
	if base != nil && name != "baseline" {
		fmt.Printf("   (baseline: median %s, p90 %s, max %s; median ratio %.2f)", q(base.totals, 0.5), q(base.totals, 0.9), q(base.totals, 1),
			float64(q(r.totals, 0.5))/float64(q(base.totals, 0.5)))
	}
	fmt.Println()
	fmt.Printf("   a relay's longest gap between two acknowledged artifacts: median %s, p90 %s, max %s", q(r.stalls, 0.5), q(r.stalls, 0.9), q(r.stalls, 1))
	if base != nil && name != "baseline" {
		fmt.Printf("   (baseline: median %s, max %s)", q(base.stalls, 0.5), q(base.stalls, 1))
	}
	fmt.Println()
	if len(r.delays) > 0 && r.takeover == 0 {
		fmt.Printf("   kill -> next acknowledged artifact: median %s, p90 %s, max %s (a relay's usual gap between artifacts: median %s; kill -> a new stream leader answers: %s)\n",
			q(r.delays, 0.5), q(r.delays, 0.9), q(r.delays, 1), q(r.gaps, 0.5), r.elected.Round(time.Millisecond))
	}
	if r.takeover != 0 && r.reads.asked == 0 {
		fmt.Printf("   crash -> the other engines hold every partition: %s\n", r.takeover.Round(time.Millisecond))
	}
	if r.reads.asked > 0 {
		fmt.Printf("   crash -> the engines alive fold every stream: %s\n", r.takeover.Round(time.Millisecond))
		fmt.Printf("   reads of every deliberation at every engine: %d asked, %d answered at once (%d of them forwarded to the owner), %d after retries\n",
			r.reads.asked, r.reads.firstOK, r.reads.forwarded, r.reads.finalOK)
		var delibs, arts int
		for _, sh := range r.shares {
			delibs, arts = delibs+sh.delibs, arts+sh.artifacts
		}
		for i, sh := range r.shares {
			fmt.Printf("   engine %d folds streams %v: %d deliberations (%.2f of all), %d artifacts (%.2f of all)\n",
				i+1, sh.held, sh.delibs, float64(sh.delibs)/float64(max(delibs, 1)), sh.artifacts, float64(sh.artifacts)/float64(max(arts, 1)))
		}
	}
	fmt.Println()
}

func q(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))].Round(time.Millisecond)
}

// stamps records when a relay printed each acknowledged artifact.
type stamps struct {
	mu sync.Mutex
	at []time.Time
	n  *atomic.Int64
}

var verbose = flag.Bool("v", false, "print each relay's progress and the engines' log, with times")

func (s *stamps) Write(p []byte) (int, error) {
	if *verbose {
		fmt.Fprintf(os.Stderr, "%s relay: %s", time.Now().Format("15:04:05.000"), p)
	}
	if strings.HasPrefix(string(p), "round") && !strings.Contains(string(p), "invalid output") {
		s.mu.Lock()
		s.at = append(s.at, time.Now())
		s.mu.Unlock()
		s.n.Add(1)
	}
	return len(p), nil
}

func run(cfg *relay.Config, bin string, engines, relays int, kill bool, leaseTTL, restartAfter time.Duration, copts client.Options, own bool) (*result, error) {
	dir, err := os.MkdirTemp("", "parley-bench-cluster-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	c, err := newCluster(dir, bin, 3, own)
	if err != nil {
		return nil, err
	}
	defer c.close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var supErrs atomic.Int64
	var svcs []*service.Service
	startEngine := func(i int) (*service.Service, error) {
		var s *service.Service
		// A cluster just formed may still refuse the stream's creation
		// (no responders while its meta group settles): try for 30 s.
		for deadline := time.Now().Add(30 * time.Second); ; {
			cfg := service.Config{DataDir: filepath.Join(dir, fmt.Sprintf("engine-%d", i)), NATS: c.urls(i), HTTP: "127.0.0.1:0",
				Replicas: 3, Logger: slog.New(&errorCounter{n: &supErrs}),
				Leases: leaseTTL > 0 && !own, LeaseTTL: leaseTTL, EngineName: fmt.Sprintf("engine-%d", i+1)}
			if own {
				cfg.Partitioned, cfg.Streams, cfg.OwnStreams, cfg.SnapshotStore = true, 4, true, service.SnapshotJetStream
			}
			s, err = service.Start(ctx, cfg)
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			return nil, fmt.Errorf("engine %d: %w", i+1, err)
		}
		return s, nil
	}
	for i := range engines {
		s, err := startEngine(i)
		if err != nil {
			return nil, err
		}
		defer s.Close()
		svcs = append(svcs, s)
	}
	if own {
		for deadline := time.Now().Add(60 * time.Second); heldStreams(svcs...) < 4 || !everyHolds(svcs...); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("the engines hold %d streams between them", heldStreams(svcs...))
			}
		}
	} else if leaseTTL > 0 {
		// The shares settle before the fleet starts.
		for deadline := time.Now().Add(60 * time.Second); held(svcs...) < 1024; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("the engines hold %d partitions between them", held(svcs...))
			}
		}
	}
	res := &result{relays: relays}
	var turns atomic.Int64
	st := make([]*stamps, relays)
	sums := make([]*relay.Summary, relays)
	errs := make([]error, relays)
	totals := make([]time.Duration, relays)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range relays {
		st[i] = &stamps{n: &turns}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			sums[i], errs[i] = relay.Run(ctx, cfg, relay.Options{NATS: c.urls(i), Dir: filepath.Join(dir, fmt.Sprintf("run-%03d", i)), Progress: st[i],
				Client: copts})
			totals[i] = time.Since(t0)
		}()
	}
	var killedAt time.Time
	if kill && own {
		total := int64(relays * cfg.Rounds * (len(cfg.Participants) - 1))
		for turns.Load() < total/3 {
			time.Sleep(5 * time.Millisecond)
		}
		// The crash: the engine's connection goes, nothing is released;
		// a fourth engine starts.
		crashed := svcs[1]
		killedAt, at := time.Now(), turns.Load()
		crashed.Conn().Close()
		fourth, err := startEngine(3)
		if err != nil {
			return nil, err
		}
		defer fourth.Close()
		alive := []*service.Service{svcs[0], svcs[2], fourth}
		for deadline := time.Now().Add(2 * time.Minute); heldStreams(alive...) < 4; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("after the crash the others hold %d streams", heldStreams(alive...))
			}
		}
		res.takeover = time.Since(killedAt)
		res.killed = fmt.Sprintf(": engine-2 crashed after %d of %d turns (lease TTL %s), engine-4 started", at, total, leaseTTL)
		res.alive = alive
	} else if kill && leaseTTL > 0 {
		total := int64(relays * cfg.Rounds * (len(cfg.Participants) - 1))
		for turns.Load() < total/3 {
			time.Sleep(5 * time.Millisecond)
		}
		// The crash: the engine's connection goes, nothing is released.
		crashed := svcs[1]
		killedAt, at := time.Now(), turns.Load()
		crashed.Conn().Close()
		for deadline := time.Now().Add(2 * time.Minute); held(svcs[0], svcs[2]) < 1024; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("after the crash the others hold %d partitions", held(svcs[0], svcs[2]))
			}
		}
		res.takeover = time.Since(killedAt)
		res.killed = fmt.Sprintf(": engine-2 crashed after %d of %d turns (lease TTL %s)", at, total, leaseTTL)
	} else if kill {
		total := int64(relays * cfg.Rounds * (len(cfg.Participants) - 1))
		for turns.Load() < total/3 {
			time.Sleep(5 * time.Millisecond)
		}
		var leader int
		for deadline := time.Now().Add(10 * time.Second); ; {
			if leader, err = c.streamLeader(ctx); err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			return nil, fmt.Errorf("which node leads the stream: %w", err)
		}
		killedAt = time.Now()
		if err := c.kill(leader); err != nil {
			return nil, err
		}
		elected := make(chan time.Duration, 1)
		go func() { elected <- c.newLeader(ctx, leader, killedAt) }()
		defer func() { res.elected = <-elected }()
		res.killed = fmt.Sprintf(": stream leader n%d killed after %d of %d turns, restarted %s later", leader+1, turns.Load(), total, restartAfter)
		time.Sleep(restartAfter)
		if err := c.start(leader); err != nil {
			return nil, err
		}
	}
	wg.Wait()
	res.wall = time.Since(start)
	res.totals = totals
	res.supervisorErrors = int(supErrs.Load())
	ids := map[string]bool{}
	for i := range relays {
		if errs[i] != nil {
			res.errs = append(res.errs, fmt.Sprintf("relay %d: %v", i, errs[i]))
			continue
		}
		ids[sums[i].Deliberation] = true
		if sums[i].Termination == "completed" && sums[i].ClosureOK {
			res.completed++
		}
		st[i].mu.Lock()
		at := st[i].at
		st[i].mu.Unlock()
		var gaps []time.Duration
		for k := 1; k < len(at); k++ {
			gaps = append(gaps, at[k].Sub(at[k-1]))
		}
		if len(gaps) > 0 {
			res.gaps = append(res.gaps, q(gaps, 0.5))
			res.stalls = append(res.stalls, slices.Max(gaps))
		}
		if kill {
			if k, ok := slices.BinarySearchFunc(at, killedAt, func(a, b time.Time) int { return a.Compare(b) }); ok || k < len(at) {
				res.delays = append(res.delays, at[k].Sub(killedAt))
			}
		}
	}
	res.delibs = len(ids)
	if own {
		res.reads = readEverywhere(ctx, res.alive, ids)
		for _, s := range res.alive {
			arts := 0
			for _, sum := range s.Queries.List() {
				arts += sum.Artifacts
			}
			res.shares = append(res.shares, share{held: s.HeldStreams(), delibs: s.Runner.Deliberations(), artifacts: arts})
		}
	}
	res.failures, res.terminations, err = c.count(ctx, ids)
	return res, err
}

// errorCounter counts the ERROR lines an engine logs about its supervisor.
type errorCounter struct{ n *atomic.Int64 }

func (e *errorCounter) Enabled(_ context.Context, l slog.Level) bool {
	return *verbose || l >= slog.LevelError
}
func (e *errorCounter) Handle(_ context.Context, r slog.Record) error {
	if *verbose {
		s := r.Message
		r.Attrs(func(a slog.Attr) bool { s += " " + a.String(); return true })
		fmt.Fprintf(os.Stderr, "%s engine %s: %s\n", r.Time.Format("15:04:05.000"), r.Level, s)
	}
	if r.Level < slog.LevelError {
		return nil
	}
	if strings.Contains(r.Message, "supervisor") {
		e.n.Add(1)
		fmt.Fprintf(os.Stderr, "engine ERROR: %s\n", r.Message)
	}
	return nil
}
func (e *errorCounter) WithAttrs([]slog.Attr) slog.Handler { return e }
func (e *errorCounter) WithGroup(string) slog.Handler      { return e }

// cluster of three nodes, as processes or in process.
type cluster struct {
	dir       string
	bin       string
	ports     []int
	routes    []int
	procs     []*exec.Cmd
	servers   []*server.Server
	routeList string
	mapped    bool // the partition mapping on every node
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func newCluster(dir, bin string, n int, mapped bool) (*cluster, error) {
	c := &cluster{dir: dir, bin: bin, procs: make([]*exec.Cmd, n), servers: make([]*server.Server, n), mapped: mapped}
	var routes []string
	for range n {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		r, err := freePort()
		if err != nil {
			return nil, err
		}
		c.ports, c.routes = append(c.ports, p), append(c.routes, r)
		routes = append(routes, "nats-route://127.0.0.1:"+strconv.Itoa(r))
	}
	c.routeList = strings.Join(routes, ",")
	for i := range n {
		if err := c.start(i); err != nil {
			c.close()
			return nil, err
		}
	}
	// Ready once JetStream answers (the meta group has a leader).
	nc, err := nats.Connect(c.urls(0))
	if err != nil {
		c.close()
		return nil, err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			c.close()
			return nil, fmt.Errorf("the cluster's JetStream is not ready: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *cluster) name(i int) string { return fmt.Sprintf("n%d", i+1) }

func (c *cluster) start(i int) error {
	store := filepath.Join(c.dir, c.name(i))
	if c.bin == "" {
		opts := &server.Options{ServerName: c.name(i), Host: "127.0.0.1", Port: c.ports[i], JetStream: true, StoreDir: store,
			NoSigs: true, NoLog: true, MaxPayload: 4 << 20,
			Cluster: server.ClusterOpts{Name: "parley", Host: "127.0.0.1", Port: c.routes[i]}, Routes: server.RoutesFromStr(c.routeList)}
		if c.mapped {
			global := server.NewAccount(server.DEFAULT_GLOBAL_ACCOUNT)
			for _, m := range partition.Mappings() {
				if err := global.AddMapping(m.From, m.To); err != nil {
					return err
				}
			}
			opts.Accounts = []*server.Account{global}
		}
		s, err := server.NewServer(opts)
		if err != nil {
			return err
		}
		go s.Start()
		if !s.ReadyForConnections(30 * time.Second) {
			return fmt.Errorf("node %s not ready", c.name(i))
		}
		c.servers[i] = s
		return nil
	}
	conf := filepath.Join(c.dir, c.name(i)+".conf")
	var routes []string
	for _, r := range c.routes {
		routes = append(routes, "nats-route://127.0.0.1:"+strconv.Itoa(r))
	}
	text := fmt.Sprintf("server_name: %s\nlisten: 127.0.0.1:%d\nmax_payload: 4MB\njetstream { store_dir: %q }\ncluster { name: parley, listen: 127.0.0.1:%d, routes: [%s] }\n",
		c.name(i), c.ports[i], store, c.routes[i], strings.Join(routes, ", "))
	if c.mapped {
		text += partition.MappingBlock("")
	}
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(c.dir, c.name(i)+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin, "-c", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	c.procs[i] = cmd
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(c.ports[i]), time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s does not listen", c.name(i))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill SIGKILLs node i (in process: shuts it down).
func (c *cluster) kill(i int) error {
	if c.bin == "" {
		c.servers[i].Shutdown()
		c.servers[i].WaitForShutdown()
		c.servers[i] = nil
		return nil
	}
	if err := c.procs[i].Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	c.procs[i].Wait()
	c.procs[i] = nil
	return nil
}

func (c *cluster) close() {
	for i := range c.ports {
		if c.servers[i] != nil || c.procs[i] != nil {
			c.kill(i)
		}
	}
}

func (c *cluster) urls(first int) string {
	var out []string
	for k := range c.ports {
		out = append(out, "nats://127.0.0.1:"+strconv.Itoa(c.ports[(first+k)%len(c.ports)]))
	}
	return strings.Join(out, ",")
}

// streamLeader asks JetStream which node leads the PARLEY stream.
func (c *cluster) streamLeader(ctx context.Context) (int, error) {
	nc, err := nats.Connect(c.urls(0))
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	s, err := js.Stream(ctx, wire.StreamName)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	if info.Cluster == nil {
		return 0, errors.New("the stream reports no cluster")
	}
	for i := range c.ports {
		if info.Cluster.Leader == c.name(i) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("stream leader %q is none of the nodes", info.Cluster.Leader)
}

// newLeader waits until the stream has a leader again (the stream's info
// is the leader's answer: the first one after the kill comes from a new
// leader, or from the old node once restarted and re-elected), and
// returns the time since the kill (0: none within a minute).
func (c *cluster) newLeader(ctx context.Context, old int, since time.Time) time.Duration {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	nc, err := nats.Connect(c.urls(old+1), nats.MaxReconnects(-1))
	if err != nil {
		return 0
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		s, err := js.Stream(actx, wire.StreamName)
		if err == nil {
			var info *jetstream.StreamInfo
			if info, err = s.Info(actx); err == nil && info.Cluster != nil && info.Cluster.Leader != "" {
				cancel()
				return time.Since(since)
			}
		}
		cancel()
		time.Sleep(20 * time.Millisecond)
	}
	return 0
}

// count reads the whole record and counts the FAILUREs and TERMINATIONs of
// the deliberations ids.
func (c *cluster) count(ctx context.Context, ids map[string]bool) (failures, terms int, err error) {
	nc, err := nats.Connect(c.urls(1))
	if err != nil {
		return 0, 0, err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	l, _, err := ledger.Locate(ctx, js)
	if err != nil {
		return 0, 0, err
	}
	streams, err := l.ExistingAll(ctx, js)
	if err != nil {
		return 0, 0, err
	}
	var total uint64
	for _, s := range streams {
		info, err := s.Info(ctx)
		if err != nil {
			return 0, 0, err
		}
		total += info.State.Msgs
	}
	rd, err := l.Read(ctx, nc, "", 0)
	if err != nil {
		return 0, 0, err
	}
	defer rd.Stop()
	for range total {
		m, err := rd.Next(ctx)
		if err != nil {
			return 0, 0, err
		}
		id := wire.DeliberationOf(m.Subject)
		if !ids[id] {
			continue
		}
		a, err := events.Validate(m.Data)
		if err != nil {
			continue
		}
		switch a.Type {
		case events.TypeFailure:
			failures++
		case events.TypeTermination:
			terms++
		}
	}
	return failures, terms, nil
}

// held is how many partitions the engines hold between them.
func held(svcs ...*service.Service) int {
	seen := map[int]bool{}
	for _, s := range svcs {
		if s.Group == nil {
			continue
		}
		for _, p := range s.Group.Held() {
			seen[p] = true
		}
	}
	return len(seen)
}
