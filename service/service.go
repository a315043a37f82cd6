// Package service assembles the parley engine: the data directory's lock
// (internal/datadir) and its descriptors' plan (internal/fdplan), the
// embedded NATS server (or a connection to an existing cluster), its
// generated users and the PARLEY stream (natsconn), the credentials file,
// the projector's runner and the supervisor; and the engine's parts, each
// in a package of its own, connected here through their small interfaces:
// the read model (readmodel), the query API over HTTP (httpapi) and as a
// NATS micro service (microapi), the binding write path (bindwrite), the
// stream watch and the health report (health), and the metrics (metrics).
package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/archive"
	"github.com/parley-engine/parley/bindwrite"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/health"
	"github.com/parley-engine/parley/httpapi"
	"github.com/parley-engine/parley/internal/datadir"
	"github.com/parley-engine/parley/internal/fdplan"
	"github.com/parley-engine/parley/internal/httplimit"
	"github.com/parley-engine/parley/internal/reclaim"
	"github.com/parley-engine/parley/lease"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/metrics"
	"github.com/parley-engine/parley/microapi"
	"github.com/parley-engine/parley/natsconn"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/readmodel"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/substrate"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/web"
	"github.com/parley-engine/parley/wire"
)

// Service is a running engine.
type Service struct {
	cfg    Config
	log    *slog.Logger
	conn   *natsconn.Conn
	nc     *nats.Conn
	js     jetstream.JetStream
	Stream jetstream.Stream
	// Streams are every stream of the record, in order of their index:
	// Stream alone, but for a partitioned layout of several streams
	// (Config.Streams).
	Streams []jetstream.Stream
	// Runner folds the record: over several streams, a set of a runner
	// per stream (runner.NewSet).
	Runner     *runner.Runner
	Queries    *readmodel.Queries
	Metrics    *metrics.Metrics
	Supervisor *runner.Supervisor
	// Group is the engine's share of the partitions' leases, with
	// Config.Leases (nil otherwise).
	Group      *lease.Group
	micro      micro.Service
	http       *http.Server
	httpLn     net.Listener
	httpBudget *httplimit.Budget
	explorer   *web.Explorer
	fds        fdplan.Descriptors
	runDone    chan struct{}
	runErr     error
	superDone  chan struct{}
	groupDone  chan struct{}
	owner      *owner // with Config.OwnStreams (own.go)
	self       Member // with Config.OwnStreams
	routes     routeCache
	streams    atomic.Pointer[lease.Group] // the stream leases' group, with Config.OwnStreams
	cancel     context.CancelFunc
	lock       *datadir.Lock
	watch      atomic.Pointer[watchSet]
	watches    []*health.Watch // each stream's; watch is the first
	watchSubs  []*nats.Subscription
	watchDone  chan struct{}
	auth       *httpapi.Auth
	creds      Credentials
	credsPath  string // written at start, removed at Close
	// Key is the engine's key (Config.EngineKey).
	Key nkeys.KeyPair
	// Reverifier re-verifies provenance annotations (nil without roots),
	// ahead of the fold (RunnerConfig.Verify).
	Reverifier *substrate.Reverifier
}

// Start starts the engine. It returns once the stream exists and the API
// listens; the projection catches up in the background.
func Start(ctx context.Context, cfg Config) (_ *Service, err error) {
	s := &Service{cfg: cfg, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if cfg.DataDir == "" {
		return nil, errors.New("service: a data directory is required")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("service: data directory: %w", err)
	}
	// One engine per data directory: a second would open the same store
	// and write the same snapshots.
	if s.lock, err = datadir.Acquire(cfg.DataDir); err != nil {
		return nil, err
	}
	keyPath := cfg.EngineKey
	if keyPath == "" {
		keyPath = filepath.Join(cfg.DataDir, EngineKeyFile)
	}
	if s.Key, err = loadEngineKey(keyPath, cfg.EngineKey == ""); err != nil {
		return nil, err
	}
	if s.creds.EngineKey, err = s.Key.PublicKey(); err != nil {
		return nil, err
	}
	// The process's descriptors, shared so that no kind of client takes
	// another's (internal/fdplan).
	if s.fds, err = fdplan.Plan(fdplan.RaiseFileLimit(), cfg.HTTPMaxConns, cfg.NATS == ""); err != nil {
		return nil, err
	}
	tokens := cfg.HTTPTokens
	if len(tokens) == 0 {
		tokens = []httpapi.Token{{Secret: secret(), Participant: wire.PrincipalToken}}
		s.creds.HTTPToken, s.creds.HTTPParticipant = tokens[0].Secret, tokens[0].Participant
	}
	var principals []string
	for _, t := range tokens {
		if !wire.ValidToken(t.Participant) {
			return nil, fmt.Errorf("service: HTTP token: %q is not a participant token", t.Participant)
		}
		principals = append(principals, t.Participant)
	}
	bucket := cmp.Or(cfg.SnapshotBucket, runner.DefaultSnapshotBucket)
	switch cfg.SnapshotStore {
	case "", SnapshotFiles, SnapshotJetStream:
	default:
		return nil, fmt.Errorf("service: --snapshot-store %q: give %s or %s", cfg.SnapshotStore, SnapshotFiles, SnapshotJetStream)
	}
	// The embedded server and its generated users, or the cluster
	// (package natsconn); the engine's asynchronous errors go to the
	// watch once it runs.
	var participantPassword string
	if cfg.NATS == "" && cfg.NATSConfig == "" {
		if participantPassword, err = loadSecret(filepath.Join(cfg.DataDir, ParticipantSecretFile)); err != nil {
			return nil, err
		}
	}
	if s.conn, err = natsconn.Connect(ctx, natsconn.Config{URL: cfg.NATS, Dir: filepath.Join(cfg.DataDir, "nats"),
		ParticipantPassword: participantPassword, AnonymousWrites: cfg.AnonymousWrites,
		Listen: cfg.Listen, ConfigFile: cfg.NATSConfig, Creds: cfg.Creds, NKey: cfg.NKey,
		TLSCA: cfg.TLSCA, TLSCert: cfg.TLSCert, TLSKey: cfg.TLSKey, User: cfg.User, Password: cfg.Password,
		MaxConn: s.fds.NATS, Principals: principals, SnapshotBucket: bucket, Logger: s.log, Partitioned: cfg.Partitioned, Streams: cfg.Streams,
		OnError: func(err error) {
			if ws := s.watch.Load(); ws != nil {
				for _, w := range *ws {
					w.PermissionDenied(err)
				}
			}
		}}); err != nil {
		return nil, err
	}
	s.nc, s.fds.NATS = s.conn.NC, s.conn.MaxConn
	if s.conn.OperatorPassword != "" {
		s.creds.NATSURL, s.creds.NATSUser, s.creds.NATSPassword = s.conn.URL, natsconn.OperatorUser, s.conn.OperatorPassword
		s.creds.NATSParticipantUser, s.creds.NATSParticipantPassword = natsconn.ParticipantUser, participantPassword
	}
	if s.js, err = jetstream.New(s.nc); err != nil {
		return nil, fmt.Errorf("service: jetstream: %w", err)
	}
	ensureCtx, cancelEnsure := context.WithTimeout(ctx, 30*time.Second)
	defer cancelEnsure()
	layout := ledger.Unpartitioned
	if cfg.Partitioned || cfg.Streams > 1 {
		if layout, err = ledger.PartitionedOver(max(cfg.Streams, 1)); err != nil {
			return nil, fmt.Errorf("service: --streams: %w", err)
		}
	}
	prefix := cmp.Or(cfg.SnapshotPrefix, SnapshotFile)
	var held func(context.Context) (string, error)
	if cfg.SnapshotStore == SnapshotJetStream {
		held = func(ctx context.Context) (string, error) {
			return heldSnapshot(ctx, s.js, bucket, natsconn.SnapshotName(prefix, layout))
		}
	}
	if s.Streams, err = natsconn.EnsureStream(ensureCtx, s.js, natsconn.Stream{Replicas: cfg.Replicas, Layout: layout, Adopt: cfg.NATS != "",
		DataDir: cfg.DataDir, Snapshot: SnapshotFile, Held: held, Logger: s.log}); err != nil {
		return nil, err
	}
	s.Stream = s.Streams[0]
	maxBytes := cfg.MaxArtifactBytes
	if maxBytes <= 0 {
		maxBytes = canon.DefaultMaxSize
	}
	s.Metrics = metrics.New()
	var verify provenance.Verifier
	if len(cfg.ProvenanceRoots) > 0 {
		s.Reverifier, err = substrate.NewReverifier(cfg.ProvenanceRoots...)
		if err != nil {
			return nil, fmt.Errorf("service: --provenance-root: %w", err)
		}
		s.Reverifier.TTL = cfg.ProvenanceCacheTTL
		verify = s.Reverifier.Verify
		s.Metrics.WatchReverifier(s.Reverifier)
	}
	announcer := bindwrite.NewAnnouncer(s.nc, s.Metrics)
	record, err := ledger.LayoutOf(s.Stream.CachedInfo().Config.Name)
	if err != nil {
		return nil, err
	}
	// Each layout's own snapshots, each stream's of a layout of several:
	// a projection is never restored over another stream.
	n := record.N()
	if cfg.OwnStreams && n < 2 {
		return nil, fmt.Errorf("service: --own-streams: the record %s is one stream; the engines share the streams of a record of several (--streams)", record.Stream())
	}
	// newPart is the runner of the stream of index k.
	newPart := func(ctx context.Context, k int) (*runner.Runner, error) {
		var snapshots runner.SnapshotStore
		if cfg.SnapshotStore == SnapshotJetStream {
			var err error
			if snapshots, err = snapshotBucket(ctx, s.js, s.Streams[k], bucket, natsconn.SnapshotNameAt(prefix, record, k)); err != nil {
				return nil, err
			}
		}
		// Over several streams each stream's runner has its share of the
		// engine's bounds: a stream holds the deliberations of its
		// partitions, and a client that picks ids can fill one stream's.
		maxDelibs, maxKept, inFlight := maxDeliberations(cfg.MaxDeliberations), cfg.MaxKeptBytes, cfg.InFlightBytes
		if n > 1 {
			if maxDelibs > 0 {
				maxDelibs = max(maxDelibs/n, 1)
			}
			if maxKept > 0 {
				maxKept = max(maxKept/int64(n), 1)
			} else if maxKept == 0 {
				maxKept = max(projector.DefaultMaxKeptBytes/int64(n), 1)
			}
			inFlight = max(cmp.Or(inFlight, runner.DefaultInFlightBytes)/int64(n), 1<<20)
		}
		// Not ensureCtx: snapshots kept in JetStream take as long as their
		// size needs (runner.ObjectSnapshots bounds each read).
		return runner.New(ctx, s.js, s.Streams[k], runner.Config{
			SnapshotPath:  filepath.Join(cfg.DataDir, natsconn.SnapshotNameAt(SnapshotFile, record, k)),
			Snapshots:     snapshots,
			SnapshotEvery: cfg.SnapshotEvery,
			Projector: projector.Options{Validator: events.NewValidator(events.WithCanonOptions(canon.WithMaxSize(maxBytes))),
				Defaults: cfg.CharterDefaults, Rules: termination.Rules{}, MaxDeliberations: maxDelibs, MaxKeptBytes: maxKept},
			InFlightBytes: inFlight,
			Verify:        verify,
			Logger:        s.log.With("component", "projector"),
			Observe:       s.Metrics.Observe,
			OnApply:       announcer.OnApply,
		})
	}
	parts := make([]*runner.Runner, n)
	if cfg.OwnStreams {
		// The engines share the streams by leases (own.go): a stream's
		// runner is made when the engine takes it.
		if s.Runner, err = runner.NewOwnedSet(record, s.log.With("component", "projector")); err != nil {
			return nil, err
		}
	} else {
		for k := range n {
			if parts[k], err = newPart(ctx, k); err != nil {
				return nil, err
			}
		}
		s.Runner = parts[0]
		if n > 1 {
			if s.Runner, err = runner.NewSet(parts); err != nil {
				return nil, err
			}
		}
	}
	s.Metrics.WatchRunner(s.Runner)
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	superCtx, stopJudging := context.WithCancel(runCtx)
	// A watch of each stream (the first is the engine's: its report
	// carries the others' problems, watches.go).
	halt := func(reason string) {
		// The supervisor emits nothing more; the API answers 503
		// (httpapi.Guard, microapi's guard).
		stopJudging()
		s.log.Error("the engine stopped judging: restart it once the stream is safe", "reason", reason)
	}
	for k, part := range parts {
		var view health.Projection = part
		if cfg.OwnStreams {
			view = streamView{set: s.Runner, k: k}
		}
		wk := health.New(health.Config{JS: s.js, Stream: s.Streams[k], Runner: view, Server: s.conn.Server, Metrics: s.Metrics,
			Log: s.log.With("component", "watch"), CheckEvery: cfg.StreamCheckEvery, MaxConsumers: cfg.MaxConsumers, Halt: halt})
		s.watches = append(s.watches, wk)
	}
	// Every watch is told of the connection's permission errors before
	// it subscribes: a refused subscription to the advisories comes back
	// during its Subscribe.
	watched := watchSet(s.watches)
	s.watch.Store(&watched)
	for _, wk := range s.watches {
		subs, err := wk.Subscribe(s.nc)
		if err != nil {
			return nil, err
		}
		s.watchSubs = append(s.watchSubs, subs...)
	}
	w := s.watches[0]
	ejs := w.JetStream(s.js)
	var remote func(context.Context, int, api.PageRequest) ([]api.Summary, bool, error)
	if cfg.OwnStreams {
		remote = s.remotePage
	}
	s.Queries = readmodel.New(readmodel.Config{Runner: s.Runner, Stream: s.Stream, Streams: s.Streams, Reverifier: s.Reverifier, Remote: remote,
		Budget: cfg.ReadBudget, MinPositionWait: cfg.MinPositionWait,
		Receipts: func(ctx context.Context, id string, ordinals []uint64) (map[uint64][]byte, map[uint64]error, error) {
			return archive.Receipts(ctx, s.js, id, ordinals, verify)
		}})
	writer := bindwrite.New(s.Queries, s.Runner, ejs, w)
	writer.Key = s.Key
	// Engines that own streams serve the reads of the others' streams by
	// forwarding them to their owner (own.go), over NATS to its own query
	// subjects.
	var selfAPI string
	var route func(context.Context, string) (string, error)
	var unroute func(string)
	if cfg.OwnStreams {
		s.self.Name = engineName(cfg)
		selfAPI, route = EngineAPIPrefix(s.self.Name), s.routeNATS
		unroute = func(id string) { s.forgetRoute(s.Runner.Layout().Index(id)) }
	}
	httpAPI := httpapi.New(httpapi.Config{Queries: s.Queries, Writer: writer, Health: watched, Metrics: s.Metrics.Registry, EngineKey: s.creds.EngineKey,
		Stream: record.Stream(), Partitioned: record.Partitioned(), Streams: streamNames(record)})
	if s.micro, err = microapi.Add(s.nc, s.Queries, microapi.Config{Version: cfg.Version, Halted: watched.Halted,
		Health:  func(ctx context.Context) any { return watched.Report(ctx) },
		Ignored: s.Metrics.Ignored, EngineKey: s.creds.EngineKey, Stream: record.Stream(), Partitioned: record.Partitioned(), Streams: streamNames(record),
		Self: selfAPI, Route: route, Unroute: unroute}); err != nil {
		return nil, fmt.Errorf("service: micro service: %w", err)
	}
	// The service's subscriptions reach the server before Start returns:
	// a client that asks at once finds a responder.
	if err := s.nc.FlushTimeout(10 * time.Second); err != nil {
		return nil, fmt.Errorf("service: micro service: %w", err)
	}
	addr := cfg.HTTP
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	if s.httpLn, err = net.Listen("tcp", addr); err != nil {
		return nil, fmt.Errorf("service: --http: %w", err)
	}
	s.auth = httpapi.NewAuth(tokens, s.httpLn.Addr(), cfg.HTTPPublicReads)
	// The explorer's pages and live feed, and the binding pages (which
	// read binding moments and publish resolutions through the query
	// API), beside the query API, behind the same authentication and the
	// same halt (a halted engine serves no state as if it were sound).
	root := http.NewServeMux()
	root.Handle("/", httpAPI.Handler())
	explorer := web.New(s.Runner, s.Stream)
	explorer.Streams = s.Streams
	explorer.Halted = watched.Halted
	explorer.JetStream = ejs
	explorer.SignedIn = httpapi.SignedIn
	if cfg.OwnStreams {
		explorer.RemoteList = s.remoteList
	}
	explorer.Admit = func(r *http.Request) (func(), error) {
		t, err := httpAPI.Admit(r, readmodel.ReadList)
		if err != nil {
			return nil, err
		}
		return t.Done, nil
	}
	explorer.Register(root)
	s.explorer = explorer
	binder := web.NewBinder(s.Runner, s.Stream, writer, httpapi.Resolver)
	binder.Streams = s.Streams
	binder.Register(root)
	// min_position holds for the explorer's endpoints as for the API's,
	// applied once for both.
	// At most fds.HTTP connections: past it the next waits for the one
	// waiting longest for a request to have waited EvictAfter, which is
	// then closed, or is answered 503 (internal/httplimit); the NATS
	// server's clients and the files keep their descriptors.
	s.httpBudget = httplimit.NewBudget(s.httpLn, s.fds.HTTP)
	if cfg.HTTPEvictAfter > 0 {
		s.httpBudget.EvictAfter = cfg.HTTPEvictAfter
	}
	var handler http.Handler = httpapi.Guard(watched.Halted, httpAPI.MinPosition(root))
	if cfg.OwnStreams {
		// After the authentication: only who may read is forwarded.
		handler = s.routeHTTP(handler)
	}
	s.http = httplimit.Server(s.auth.Wrap(handler), s.httpBudget)
	s.http.RegisterOnShutdown(explorer.Shutdown)
	mem := metrics.NewMemoryLimit()
	bounds := metrics.BoundSources{Budget: s.httpBudget, Explorer: explorer, Reads: s.Queries.Budget(), Runner: s.Runner, Memory: mem, Consumers: w.ConsumerBound}
	s.Metrics.WatchBounds(bounds)
	s.Metrics.WatchDescriptors(s.fds.Limit, s.fds.HTTP, s.fds.NATS, s.fds.Files)
	for _, wk := range s.watches {
		wk.SetBounds(bounds.Report)
	}
	s.log.Info("descriptors", "limit", s.fds.Limit, "http_connections", s.fds.HTTP, "nats_clients", s.fds.NATS, "files", s.fds.Files)
	// The credentials are written before anything answers: a client that
	// sees /healthz answer finds them.
	s.creds.HTTPURL = s.HTTPURL()
	if s.creds.HTTPToken != "" {
		s.creds.SignInURL = s.creds.BindURL()
	}
	if err := writeCredentials(cfg.DataDir, s.creds); err != nil {
		return nil, err
	}
	s.credsPath = filepath.Join(cfg.DataDir, CredentialsFile)
	go func() {
		if err := s.http.Serve(s.httpBudget); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http", "err", err)
		}
	}()
	s.runDone = make(chan struct{})
	go func() {
		s.runErr = s.Runner.Run(runCtx)
		close(s.runDone)
	}()
	s.watchDone = make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for _, wk := range s.watches {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wk.Run(runCtx)
			}()
		}
		wg.Wait()
		close(s.watchDone)
	}()
	// Memory the embedded server's pools keep after a burst goes back to
	// the system once the engine is quiet (internal/reclaim).
	go mem.Run(runCtx, time.Second)
	rc := reclaim.New(0)
	s.Metrics.WatchReclaim(rc)
	go rc.Run(runCtx, 10*time.Second, func(n uint64) {
		s.log.Info("memory given back to the system", "bytes", n)
	})
	s.Supervisor = runner.NewSupervisor(s.Runner, ejs, s.log.With("component", "supervisor"))
	s.Supervisor.Settle = 300 * time.Millisecond
	s.Supervisor.Key = s.Key
	switch {
	case cfg.OwnStreams:
		if err := s.startOwner(ensureCtx, runCtx, cfg, newPart); err != nil {
			s.Close()
			return nil, err
		}
	case cfg.Leases && !cfg.NoSupervisor:
		if err := s.startLeases(ensureCtx, runCtx, cfg); err != nil {
			s.Close()
			return nil, err
		}
	}
	if !cfg.NoSupervisor {
		s.superDone = make(chan struct{})
		go func() {
			s.Supervisor.Run(superCtx)
			close(s.superDone)
		}()
	}
	return s, nil
}

// NATSURL is where participants connect.
func (s *Service) NATSURL() string { return s.conn.URL }

// Participant is the option that connects to the embedded default's
// server as its participant user (the credentials file's
// nats_participant_user): a client without credentials may only read. With
// --nats or --nats-config it adds nothing (those servers have users of
// their own).
func (s *Service) Participant() nats.Option {
	if s.creds.NATSParticipantUser == "" {
		return func(*nats.Options) error { return nil }
	}
	return nats.UserInfo(s.creds.NATSParticipantUser, s.creds.NATSParticipantPassword)
}

// DataDir is the engine's data directory (where its credentials file is).
func (s *Service) DataDir() string { return s.cfg.DataDir }

// HTTPAddr is the query API's address.
func (s *Service) HTTPAddr() string { return s.httpLn.Addr().String() }

// HTTPURL is the query API's base URL (a loopback address in place of an
// unspecified one, so that it can be opened on this machine).
func (s *Service) HTTPURL() string {
	addr := s.httpLn.Addr()
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ta.Port))
	}
	return "http://" + addr.String()
}

// Credentials are the secrets the engine generated at start (the NATS
// operator user of the embedded default, the HTTP token it drew), as the
// credentials file holds them. A program that runs an engine in process
// uses them to publish what a participant may not (a recording's
// _supervisor and principal messages).
func (s *Service) Credentials() Credentials { return s.creds }

// Descriptors is how the engine shares its open descriptors.
func (s *Service) Descriptors() fdplan.Descriptors { return s.fds }

// Explorer is the explorer the engine serves.
func (s *Service) Explorer() *web.Explorer { return s.explorer }

// HTTPBudget returns the HTTP connection budget's counts.
func (s *Service) HTTPBudget() httplimit.BudgetStats { return s.httpBudget.Stats() }

// Conn is the engine's own NATS connection.
func (s *Service) Conn() *nats.Conn { return s.nc }

// Done is closed when the runner stops; Err then says why.
func (s *Service) Done() <-chan struct{} { return s.runDone }

// Err is the runner's error once Done is closed.
func (s *Service) Err() error { return s.runErr }

// Close stops the engine gracefully: the API, the runner (which writes a
// last snapshot), the connection, then the embedded server.
func (s *Service) Close() error {
	var errs []error
	if s.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, s.http.Shutdown(ctx))
		cancel()
	}
	if s.micro != nil {
		errs = append(errs, s.micro.Stop())
	}
	if s.cancel != nil {
		s.cancel()
		if s.superDone != nil {
			<-s.superDone
		}
		if s.groupDone != nil {
			<-s.groupDone
		}
		if s.owner != nil {
			s.owner.wait()
		}
		if s.watchDone != nil {
			<-s.watchDone
		}
		if s.runDone != nil {
			<-s.runDone
			errs = append(errs, s.runErr)
		}
	}
	for _, sub := range s.watchSubs {
		sub.Unsubscribe()
	}
	s.conn.Close()
	if s.Reverifier != nil {
		s.Reverifier.Close()
	}
	if s.credsPath != "" {
		// Stale secrets are no use to anyone: the next start draws new ones.
		if err := os.Remove(s.credsPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		s.credsPath = ""
	}
	// Last: the next engine on this directory may start once this one is
	// gone.
	errs = append(errs, s.lock.Release())
	s.lock = nil
	return errors.Join(errs...)
}

// snapshotBucket opens the object store of the projection's snapshots,
// creating it when missing with the stream's storage and replicas.
func snapshotBucket(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, bucket, prefix string) (runner.SnapshotStore, error) {
	obs, err := js.ObjectStore(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		info, ierr := stream.Info(ctx)
		if ierr != nil {
			return nil, fmt.Errorf("service: snapshot bucket %s: %w", bucket, ierr)
		}
		obs, err = js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: bucket,
			Description: "parley: the projection's snapshots (engine serve --snapshot-store jetstream)",
			Storage:     info.Config.Storage, Replicas: info.Config.Replicas})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			obs, err = js.ObjectStore(ctx, bucket) // another engine created it meanwhile
		}
	}
	if err != nil {
		return nil, fmt.Errorf("service: snapshot bucket %s: %w", bucket, err)
	}
	return runner.ObjectSnapshots(ctx, obs, prefix)
}

// heldSnapshot names an object of the snapshot bucket under prefix ("bucket
// BUCKET, object NAME"), "" when the bucket or the objects do not exist.
func heldSnapshot(ctx context.Context, js jetstream.JetStream, bucket, prefix string) (string, error) {
	obs, err := js.ObjectStore(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	store, err := runner.ObjectSnapshots(ctx, obs, prefix)
	if err != nil {
		return "", err
	}
	kept, err := store.List(ctx)
	if err != nil || len(kept) == 0 {
		return "", err
	}
	return "bucket " + bucket + ", object " + kept[0].Name, nil
}
