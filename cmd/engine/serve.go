package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/service"
)

func runServe(ctx context.Context, e *env, args []string) int {
	var cfg service.Config
	var logLevel, logFormat, defaultsFile string
	fs := newFlags(e, "serve", "[flags]", `Runs the engine: an embedded NATS server with JetStream (unless --nats names
an existing cluster), the PARLEY stream, the projector, and the query API
over HTTP and as the NATS micro service "parley". Stops gracefully on
SIGINT or SIGTERM.`)
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
	fs.StringVar(&cfg.NATSConfig, "nats-config", "", "nats-server configuration file for the embedded server (for example deploy/nats.conf)")
	fs.IntVar(&cfg.Replicas, "replicas", 1, "replicas of the PARLEY stream when the engine creates it")
	fs.IntVar(&cfg.MaxArtifactBytes, "max-artifact-bytes", canon.DefaultMaxSize, "largest artifact accepted into a deliberation")
	fs.DurationVar(&cfg.SnapshotEvery, "snapshot-every", 30*time.Second, "interval between projection snapshots")
	fs.BoolVar(&cfg.NoSupervisor, "no-supervisor", false, "do not run the termination supervisor")
	fs.StringVar(&defaultsFile, "charter-defaults", "", `JSON file of engine-wide charter defaults: {"limits":{…},"policy":{…}}`)
	fs.Var((*roots)(&cfg.ProvenanceRoots), "provenance-root", "a directory to re-verify provenance annotations against, for charters with a provenance policy (repeatable)")
	fs.DurationVar(&cfg.ProvenanceCacheTTL, "provenance-cache-ttl", time.Minute, "how long a re-verification result is reused")
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
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		fmt.Fprintf(e.stderr, "engine serve: --log-level: %v\n", err)
		return exitUsage
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(e.stderr, hopts)
	if logFormat == "json" {
		h = slog.NewJSONHandler(e.stderr, hopts)
	}
	cfg.Logger = slog.New(h)
	cfg.Version = engineVersion()

	s, err := service.Start(ctx, cfg)
	if err != nil {
		cfg.Logger.Error("engine did not start", "err", err)
		fmt.Fprintf(e.stderr, "engine serve: %v\n", err)
		return 1
	}
	where := "embedded"
	if cfg.NATS != "" {
		where = "cluster"
	}
	fmt.Fprintf(e.stdout, "parley engine %s\n  nats  %s (%s)\n  http  http://%s/api/v1/deliberations\n  data  %s\n",
		cfg.Version, s.NATSURL(), where, s.HTTPAddr(), cfg.DataDir)
	cfg.Logger.Info("engine started", "nats", s.NATSURL(), "http", s.HTTPAddr(), "data", cfg.DataDir)
	code := exitOK
	select {
	case <-ctx.Done():
		cfg.Logger.Info("shutting down")
	case <-s.Done():
		cfg.Logger.Error("projector stopped", "err", s.Err())
		code = 1
	}
	if err := s.Close(); err != nil {
		cfg.Logger.Error("shutdown", "err", err)
		code = 1
	}
	cfg.Logger.Info("stopped", "position", s.Runner.Position())
	return code
}
