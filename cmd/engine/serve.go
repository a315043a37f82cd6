package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/httpapi"
	"github.com/parley-engine/parley/lease"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/service"
)

func runServe(ctx context.Context, e *env, args []string) int {
	var cfg service.Config
	var logLevel, logFormat, defaultsFile string
	var tokens httpTokens
	var memLimit memoryLimit
	fs := newFlags(e, "serve", "[flags]", `Runs the engine: an embedded NATS server with JetStream (unless --nats names
an existing cluster), the PARLEY stream, the projector, and the query API
over HTTP and as the NATS micro service "parley". Stops gracefully on
SIGINT or SIGTERM.

The embedded server is not open: without --nats-config, a client without
credentials may only read. Participants publish as the participant user
(artifacts under any token but _supervisor and the principals', and control
messages), whose password is drawn at the first start and kept in
DATA/participant.secret; engine open, publish, control and mcp and relay
run --nats use it from credentials.json by default. The engine generates its
own user and an operator user at each start. Resolving a binding moment over
HTTP needs a token: the engine draws one at each start (unless --http-token
gives them). All go to credentials.json in the data directory, mode 0600,
removed at stop, with the /bind address that signs a browser in
(sign_in_url), which is printed only when standard output is a terminal:
never to a log. docs/SECURITY.md says who may do what.`)
	fs.StringVar(&cfg.DataDir, "data", "./parley-data", "data directory: the embedded server's store and the projection snapshot")
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:4222", "address of the embedded NATS server for participants (port 0 picks one)")
	fs.StringVar(&cfg.HTTP, "http", "127.0.0.1:8080", "address of the HTTP query API, /healthz and /metrics (port 0 picks one)")
	fs.StringVar(&cfg.NATS, "nats", "", "use an existing NATS cluster: URL[,URL...] (no embedded server)")
	fs.StringVar(&cfg.Creds, "creds", "", "NATS credentials file")
	fs.StringVar(&cfg.NKey, "nkey", "", "NATS nkey seed file")
	fs.StringVar(&cfg.User, "user", "", "NATS user")
	fs.StringVar(&cfg.Password, "password", "", "NATS password (or PARLEY_NATS_PASSWORD)")
	fs.StringVar(&cfg.TLSCA, "tls-ca", "", "CA certificate file for NATS TLS")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "client certificate file for NATS TLS")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "client key file for NATS TLS")
	fs.StringVar(&cfg.EngineKey, "engine-key", "", "the engine's key, an nkeys user seed file (engine keygen --out FILE); default DATA/engine.nk, created at the first start. It signs the supervisor's emissions and the checkpoints (docs/VERIFY.md)")
	fs.BoolVar(&cfg.AnonymousWrites, "anonymous-writes", false, "let clients without credentials publish as participants on the embedded default: whoever reaches the server may then write to the record, and make the engine and its server hold what it writes (docs/SECURITY.md)")
	fs.IntVar(&cfg.Streams, "streams", 1, "the number of streams of the partitioned record, a power of two (more than 1 implies --partitioned): the 1,024 partitions spread over them in contiguous ranges, PARLEY_0000_0255 … PARLEY_0768_1023 for four, each folded by a runner of its own (docs/SCALING.md). Chosen when the record is created")
	fs.BoolVar(&cfg.Partitioned, "partitioned", false, "store the record partitioned: the server's subject mapping stores each deliberation's subjects under its partition (parley.p.<n>.…) in the one stream PARLEY_0000_1023 (docs/SCALING.md). The engine installs the mapping on its embedded server; a cluster (--nats) carries it in its configuration, and the engine reads the layout the cluster holds")
	fs.StringVar(&cfg.NATSConfig, "nats-config", "", "nats-server configuration file for the embedded server (for example deploy/nats.conf)")
	fs.IntVar(&cfg.Replicas, "replicas", 1, "replicas of the PARLEY stream when the engine creates it")
	fs.IntVar(&cfg.MaxArtifactBytes, "max-artifact-bytes", canon.DefaultMaxSize, "largest artifact accepted into a deliberation")
	fs.IntVar(&cfg.MaxConsumers, "max-consumers", service.DefaultMaxConsumers, "most consumers of the stream not the engine's own (the readers', exports', witnesses'); past it the engine deletes each new one (limit.consumers); keep it well under the server's limit of a stream's consumers (1,000 by default)")
	fs.IntVar(&cfg.MaxDeliberations, "max-deliberations", service.DefaultMaxDeliberations, "most deliberations the engine holds (-1: no bound); an open past it is refused with deliberation.limit")
	fs.Int64Var(&cfg.MaxKeptBytes, "max-kept-bytes", projector.DefaultMaxKeptBytes, "most bytes of rejection summaries kept in detail across every deliberation (-1: no bound); past it the oldest are dropped, counts and digests stay whole")
	fs.Int64Var(&cfg.InFlightBytes, "in-flight-bytes", runner.DefaultInFlightBytes, "most bytes of messages read from the stream and not yet applied; past it the consumer waits (limit.in_flight_bytes)")
	fs.DurationVar(&cfg.SnapshotEvery, "snapshot-every", 30*time.Second, "interval between projection snapshots")
	fs.StringVar(&cfg.SnapshotStore, "snapshot-store", service.SnapshotFiles, "where the projection snapshots are kept: files (in the data directory) or jetstream (an object store, where an engine with an empty data directory restores from them)")
	fs.StringVar(&cfg.SnapshotBucket, "snapshot-bucket", runner.DefaultSnapshotBucket, "the object store of --snapshot-store jetstream, created when missing with the stream's storage and replicas; only the engine's user may use it")
	fs.StringVar(&cfg.SnapshotPrefix, "snapshot-prefix", service.SnapshotFile, "the name prefix of the snapshot objects in --snapshot-bucket (PREFIX.<shard>-of-<shards>): engine groups with their own prefixes may share a bucket")
	fs.Var(&memLimit, "memory-limit", "the Go runtime's soft memory limit, BYTES with an optional unit B, KiB, MiB, GiB or TiB (512MiB): the collector works harder as the engine's memory nears it, and the embedded server's caches of large messages are reclaimed sooner, at the cost of CPU under load (docs/OPERATIONS.md). Default: GOMEMLIMIT's, or none")
	fs.BoolVar(&cfg.NoSupervisor, "no-supervisor", false, "do not run the termination supervisor")
	fs.BoolVar(&cfg.Leases, "leases", false, "share the deliberations' supervision with the other engines of the stream by partition leases (bucket PARLEY_LEASES): this engine's supervisor judges only the partitions it holds (docs/SCALING.md)")
	fs.BoolVar(&cfg.OwnStreams, "own-streams", false, "share the streams of a record of several (--streams) with the other engines by stream leases (bucket PARLEY_LEASES): this engine folds and judges only the streams it holds, each from its latest snapshot in the snapshot bucket (implies --snapshot-store jetstream), and forwards the reads of the others' deliberations to their owner; a dead engine's streams are taken over within --lease-ttl and a round (docs/SCALING.md)")
	fs.StringVar(&cfg.AdvertiseURL, "advertise-url", "", "with --own-streams: the base URL at which the other engines reach this engine's HTTP API to forward reads (default: the --http address, loopback when it listens on every interface)")
	fs.StringVar(&cfg.EngineName, "engine-name", "", "this engine's name among those that share the partitions (--leases) or the streams (--own-streams); default: the host's name and the process id")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", lease.DefaultTTL, "the leases' time to live when this engine creates their bucket (--leases, --own-streams): a dead engine's partitions or streams are taken over that long after its last renewal, and a round more")
	fs.StringVar(&defaultsFile, "charter-defaults", "", `JSON file of engine-wide charter defaults: {"limits":{…},"policy":{…}}`)
	fs.Var((*roots)(&cfg.ProvenanceRoots), "provenance-root", "a directory to re-verify provenance annotations against, for charters with a provenance policy (repeatable)")
	fs.DurationVar(&cfg.ProvenanceCacheTTL, "provenance-cache-ttl", time.Minute, "how long a re-verification result is reused")
	fs.Var(&tokens, "http-token", "SECRET[=PARTICIPANT]: a token of the HTTP API, standing for PARTICIPANT (default principal), whom a resolution sent with it is published as (repeatable; or PARLEY_HTTP_TOKEN, comma-separated; default: one drawn at start)")
	fs.BoolVar(&cfg.HTTPPublicReads, "http-public-reads", false, "serve the API's reads without a token even when --http listens beyond loopback")
	fs.IntVar(&cfg.HTTPMaxConns, "http-max-conns", 0, "most HTTP connections open at once (0: a quarter of the open-descriptor limit, at most 2048; docs/OPERATIONS.md)")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&logFormat, "log-format", "text", "text or json")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "engine serve: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if defaultsFile != "" {
		b, err := os.ReadFile(defaultsFile)
		if err == nil {
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			err = dec.Decode(&cfg.CharterDefaults)
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "engine serve: --charter-defaults: %v\n", err)
			return exitUsage
		}
	}
	if cfg.Password == "" {
		cfg.Password = os.Getenv("PARLEY_NATS_PASSWORD")
	}
	if len(tokens) == 0 {
		for _, v := range strings.Split(os.Getenv("PARLEY_HTTP_TOKEN"), ",") {
			if v = strings.TrimSpace(v); v != "" {
				if err := tokens.Set(v); err != nil {
					fmt.Fprintf(e.stderr, "engine serve: PARLEY_HTTP_TOKEN: %v\n", err)
					return exitUsage
				}
			}
		}
	}
	cfg.HTTPTokens = tokens
	if cfg.OwnStreams {
		snapshotSet := false
		fs.Visit(func(f *flag.Flag) { snapshotSet = snapshotSet || f.Name == "snapshot-store" })
		switch {
		case !snapshotSet:
			cfg.SnapshotStore = service.SnapshotJetStream
		case cfg.SnapshotStore != service.SnapshotJetStream:
			fmt.Fprintf(e.stderr, "engine serve: --own-streams keeps the snapshots in JetStream (another engine takes a stream over from them): drop --snapshot-store %s\n", cfg.SnapshotStore)
			return exitUsage
		}
		if cfg.NoSupervisor {
			fmt.Fprintln(e.stderr, "engine serve: --own-streams needs the supervisor: an engine that holds a stream judges its deliberations (drop --no-supervisor)")
			return exitUsage
		}
	}
	if cfg.SnapshotStore != service.SnapshotFiles && cfg.SnapshotStore != service.SnapshotJetStream {
		fmt.Fprintf(e.stderr, "engine serve: --snapshot-store %q: give %s or %s\n", cfg.SnapshotStore, service.SnapshotFiles, service.SnapshotJetStream)
		return exitUsage
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		fmt.Fprintf(e.stderr, "engine serve: --log-level %q: give debug, info, warn or error\n", logLevel)
		return exitUsage
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(e.stderr, hopts)
	if logFormat == "json" {
		h = slog.NewJSONHandler(e.stderr, hopts)
	}
	cfg.Logger = slog.New(h)
	cfg.Version = engineVersion()
	if memLimit > 0 {
		// The limit is the process's: restore it when serve returns (a
		// test may run serve in its own process).
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(int64(memLimit)))
	}

	if msg := portsInUse(cfg); msg != "" {
		fmt.Fprintf(e.stderr, "engine serve: %s\n", msg)
		return 1
	}
	s, err := service.Start(ctx, cfg)
	if err != nil {
		// One line, on standard error: the logger would say it again.
		msg := err.Error()
		if strings.Contains(msg, "address already in use") {
			msg += " (is another engine running? --listen sets the NATS address, --http the HTTP one; port 0 picks a free one)"
		}
		fmt.Fprintf(e.stderr, "engine serve: %s\n", msg)
		return 1
	}
	where := "embedded; participants connect with the participant user of credentials.json, clients without credentials only read"
	if cfg.AnonymousWrites {
		where = "embedded; clients without credentials are participants (--anonymous-writes)"
	}
	switch {
	case cfg.NATS != "":
		where = "cluster"
	case cfg.NATSConfig != "":
		where = "embedded, users of " + cfg.NATSConfig
	}
	if l := s.Runner.Layout(); l.N() > 1 {
		where += fmt.Sprintf("; the record partitioned over %d streams, %s to %s", l.N(), l.StreamAt(0), l.StreamAt(l.N()-1))
	} else if l.Partitioned() {
		where += "; the record partitioned, in " + l.Stream()
	}
	c := s.Credentials()
	credsPath := filepath.Join(cfg.DataDir, service.CredentialsFile)
	// The sign-in address carries the token: printed only on a terminal.
	// Standard output under a service manager is its journal, readable by
	// whoever reads the logs.
	bind := c.BindURL()
	switch {
	case c.HTTPToken == "":
		bind += " (with an --http-token token: ?token=…)"
	case isTerminal(e.stdout):
	default:
		bind = c.HTTPURL + "/bind (sign in at the sign_in_url of " + credsPath + "; the token is not printed where standard output is not a terminal)"
	}
	fmt.Fprintf(e.stdout, "parley engine %s\n  nats  %s (%s)\n  http  %s/api/v1/deliberations\n  web   %s/ (the explorer)\n  bind  %s\n  data  %s (%s: the participant's and operator's NATS passwords and the HTTP token, mode 0600)\n  key   %s (the engine's public key: engine audit --trusted-key)\n",
		cfg.Version, s.NATSURL(), where, c.HTTPURL, c.HTTPURL, bind, cfg.DataDir, credsPath, c.EngineKey)
	started := []any{"nats", s.NATSURL(), "http", s.HTTPAddr(), "data", cfg.DataDir, "stream", s.Runner.Layout().Stream()}
	if l := debug.SetMemoryLimit(-1); l < math.MaxInt64 {
		started = append(started, "memory_limit", l)
	}
	cfg.Logger.Info("engine started", started...)
	code := exitOK
	select {
	case <-ctx.Done():
		cfg.Logger.Info("shutting down")
	case <-s.Done():
		// The runner ended on its own: its consumer did (the connection
		// closed, the stream deleted). Nothing is applied any more.
		why := s.Err()
		if why == nil {
			why = errors.New("the runner ended without an error")
		}
		cfg.Logger.Error("projector stopped", "err", why)
		fmt.Fprintf(e.stderr, "engine serve: the projection stopped: %v\n", why)
		code = 1
	}
	if err := s.Close(); err != nil {
		cfg.Logger.Error("shutdown", "err", err)
		code = 1
	}
	cfg.Logger.Info("stopped", "position", s.Runner.Position())
	return code
}

// portsInUse says which address the engine would listen on is taken, and
// the flag that moves it, before anything starts ("" when both are free).
// The embedded NATS server's address is its own config's with
// --nats-config, and there is none with --nats.
func portsInUse(cfg service.Config) string {
	check := []struct{ addr, flag, what string }{{cfg.HTTP, "--http", "the HTTP API"}}
	if cfg.NATS == "" && cfg.NATSConfig == "" {
		check = append([]struct{ addr, flag, what string }{{cfg.Listen, "--listen", "the embedded NATS server"}}, check...)
	}
	for _, c := range check {
		_, port, err := net.SplitHostPort(c.addr)
		if err != nil || port == "0" {
			continue // service.Start says what is wrong with it
		}
		ln, err := net.Listen("tcp", c.addr)
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Sprintf("%s (%s) is in use: is another engine running? Stop it, or give %s another address (port 0 picks a free one)", c.addr, c.what, c.flag)
			}
			continue
		}
		ln.Close()
	}
	return ""
}

// httpTokens is the repeatable --http-token flag.
type httpTokens []httpapi.Token

func (h *httpTokens) String() string { return "" }

func (h *httpTokens) Set(v string) error {
	t, err := httpapi.ParseToken(v)
	if err != nil {
		return err
	}
	*h = append(*h, t)
	return nil
}

// memoryLimit is the --memory-limit flag: bytes, written as GOMEMLIMIT
// is (an integer with an optional unit B, KiB, MiB, GiB or TiB).
type memoryLimit int64

func (m *memoryLimit) String() string {
	if m == nil || *m == 0 {
		return ""
	}
	return strconv.FormatInt(int64(*m), 10)
}

func (m *memoryLimit) Set(v string) error {
	n, err := parseMemoryLimit(v)
	if err != nil {
		return err
	}
	*m = memoryLimit(n)
	return nil
}

// parseMemoryLimit reads a size as GOMEMLIMIT does, but not "off" (leave
// the flag out) nor 0 (a limit the collector could never meet).
func parseMemoryLimit(v string) (int64, error) {
	units := []struct {
		suffix string
		shift  uint
	}{{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}, {"B", 0}}
	num, shift := v, uint(0)
	for _, u := range units {
		if strings.HasSuffix(v, u.suffix) {
			num, shift = strings.TrimSuffix(v, u.suffix), u.shift
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	switch {
	case err != nil || num == "" || num[0] == '+':
		return 0, fmt.Errorf("%q is not a size: give bytes with an optional unit B, KiB, MiB, GiB or TiB (512MiB)", v)
	case n == 0:
		return 0, fmt.Errorf("%q: the limit must be above 0 (leave the flag out for none)", v)
	case n > math.MaxInt64>>shift:
		return 0, fmt.Errorf("%q is too large", v)
	}
	return int64(n << shift), nil
}
