// Package embedded runs the NATS server with JetStream inside the parley
// process: the single-machine default of engine serve, and the real server
// every test uses.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Config of an embedded server.
type Config struct {
	// Dir holds the JetStream file store (in Dir/jetstream). Required: an
	// empty store directory would fall back to a shared temporary one.
	Dir string
	// Host and Port to listen on for clients; Port -1 picks a free port.
	// DontListen serves in-process connections only.
	Host       string
	Port       int
	DontListen bool
	// ServerName names the server (default "parley").
	ServerName string
	// ConfigFile, when set, is a nats-server configuration file whose
	// options are used (Dir, Host and Port still apply when set).
	ConfigFile string
	// Logger receives the server's log; nil discards it.
	Logger *slog.Logger
	// ReadyTimeout bounds the wait for the server (default 30 s). A server
	// that cannot start (its port in use, a store it cannot write) fails
	// at once with the server's own reason, whatever the timeout.
	ReadyTimeout time.Duration
	// MaxFileStore, when positive, is the JetStream file storage limit of
	// the server, in bytes (the max_file_store of a configuration file):
	// past it, the server refuses every publish to a file-backed stream.
	MaxFileStore int64
	// MaxPayload is the largest message the server accepts (default
	// DefaultMaxPayload). It is above parley's artifact size limit on
	// purpose: an artifact between the two reaches the stream and is
	// recorded as a limit.size rejection, instead of vanishing at the door;
	// one above MaxPayload is refused by the server and never reaches the
	// record.
	MaxPayload int32
	// MaxConn, when positive, is the most clients the server takes at
	// once (max_connections; a configuration file's own takes
	// precedence): past it a client is refused, and the descriptors the
	// rest of the process needs stay free.
	MaxConn int
	// Users, when set, is the server's authorization: only these users
	// may connect, each with its permissions, and a client that presents
	// no credentials is the user named NoAuthUser (none: it is refused).
	// Not with ConfigFile, which carries its own. Without Users the server
	// has no authorization at all: every client may publish and subscribe
	// anything, as the tests that start a bare server want.
	Users      []*server.User
	NoAuthUser string
	// Mappings, when set, are subject mappings the server applies to
	// what clients publish (a configuration file's mappings block): in
	// the global account, and in every account a ConfigFile declares but
	// the system account. A mapping of the same source as one of the
	// file's replaces it.
	Mappings []Mapping
}

// Mapping is a subject mapping: a publish on From is delivered and
// stored as To (with the server's mapping functions, {{wildcard(1)}},
// {{partition(n,1)}}, …).
type Mapping struct {
	From, To string
}

// DefaultMaxPayload is 4 MiB.
const DefaultMaxPayload = 4 << 20

// Start starts a server and waits until it accepts connections with
// JetStream enabled (StartContext with no deadline of its own).
func Start(cfg Config) (*server.Server, error) {
	return StartContext(context.Background(), cfg)
}

// StartContext starts a server and waits until it accepts connections with
// JetStream enabled, or the server reports that it cannot start (the
// error is the server's, such as a port in use or a store directory it
// cannot create), or ctx ends (the server is then shut down).
func StartContext(ctx context.Context, cfg Config) (*server.Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("embedded: a store directory is required")
	}
	opts := &server.Options{}
	if cfg.ConfigFile != "" {
		o, err := server.ProcessConfigFile(cfg.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("embedded: config %s: %w", cfg.ConfigFile, err)
		}
		opts = o
	}
	if len(cfg.Users) > 0 {
		if cfg.ConfigFile != "" {
			return nil, errors.New("embedded: users come from the configuration file; give one or the other")
		}
		opts.Users = cfg.Users
		opts.NoAuthUser = cfg.NoAuthUser
	} else if cfg.NoAuthUser != "" {
		return nil, errors.New("embedded: NoAuthUser names none of the users")
	}
	if err := addMappings(opts, cfg.Mappings); err != nil {
		return nil, err
	}
	opts.JetStream = true
	opts.StoreDir = filepath.Clean(cfg.Dir)
	opts.NoSigs = true
	if cfg.Host != "" {
		opts.Host = cfg.Host
	}
	if cfg.Port != 0 {
		opts.Port = cfg.Port
	}
	opts.DontListen = cfg.DontListen
	switch {
	case cfg.MaxPayload > 0:
		opts.MaxPayload = cfg.MaxPayload
	case opts.MaxPayload == 0:
		opts.MaxPayload = DefaultMaxPayload
	}
	if cfg.ServerName != "" {
		opts.ServerName = cfg.ServerName
	} else if opts.ServerName == "" {
		opts.ServerName = "parley"
	}
	if cfg.MaxConn > 0 && opts.MaxConn == 0 {
		opts.MaxConn = cfg.MaxConn
	}
	if cfg.MaxFileStore > 0 {
		opts.JetStreamMaxStore = cfg.MaxFileStore
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	// The logger is installed even when the log is discarded: it is how a
	// server that cannot start says why (Fatalf, which in a library does
	// not exit).
	l := cfg.Logger
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	// Passwords given as Users are drawn by the program that embeds the
	// server and never written to a file the server reads: the server's
	// advice on plaintext passwords in configuration files is no warning
	// here.
	lg := &logger{l: l, generated: len(cfg.Users) > 0, fatal: make(chan string, 1)}
	s.SetLoggerV2(lg, false, false, false)
	started := make(chan struct{})
	go func() {
		s.Start()
		close(started)
	}()
	timeout := cfg.ReadyTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	deadline := time.Now().Add(timeout)
	fail := func(err error) (*server.Server, error) {
		// Start returns once its listeners run (or at its fatal error); a
		// Shutdown before that races it inside the server. A store that
		// takes long to recover is not waited for past 10 s.
		select {
		case <-started:
		case <-time.After(10 * time.Second):
		}
		s.Shutdown()
		s.WaitForShutdown()
		return nil, err
	}
	for {
		// A fatal report wins over readiness: a server whose JetStream
		// failed may still accept connections.
		select {
		case msg := <-lg.fatal:
			return fail(fmt.Errorf("embedded: the NATS server cannot start: %s", msg))
		case <-ctx.Done():
			return fail(fmt.Errorf("embedded: start interrupted: %w", context.Cause(ctx)))
		default:
		}
		// Each wait is short, so that a fatal report or ctx is seen at once.
		ready := s.ReadyForConnections(50 * time.Millisecond)
		if ready && s.JetStreamEnabled() {
			return s, nil
		}
		if time.Now().After(deadline) {
			if !ready {
				return fail(fmt.Errorf("embedded: server not ready after %s", timeout))
			}
			return fail(errors.New("embedded: JetStream did not start"))
		}
		if ready {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// addMappings adds ms to the global account and every account of opts
// but the system account.
func addMappings(opts *server.Options, ms []Mapping) error {
	if len(ms) == 0 {
		return nil
	}
	global := false
	for _, a := range opts.Accounts {
		global = global || a.Name == server.DEFAULT_GLOBAL_ACCOUNT
	}
	if !global {
		opts.Accounts = append(opts.Accounts, server.NewAccount(server.DEFAULT_GLOBAL_ACCOUNT))
	}
	for _, a := range opts.Accounts {
		if a.Name == server.DEFAULT_SYSTEM_ACCOUNT || (opts.SystemAccount != "" && a.Name == opts.SystemAccount) {
			continue
		}
		for _, m := range ms {
			if err := a.AddMapping(m.From, m.To); err != nil {
				return fmt.Errorf("embedded: mapping %s to %s in account %s: %w", m.From, m.To, a.Name, err)
			}
		}
	}
	return nil
}

// Stop shuts s down and waits for it.
func Stop(s *server.Server) {
	s.Shutdown()
	s.WaitForShutdown()
}

// logger adapts the server's logging to slog.
type logger struct {
	l         *slog.Logger
	generated bool
	fatal     chan string // the first fatal report, for StartContext
}

const plaintextPasswords = "Plaintext passwords detected, use nkeys or bcrypt"

func (g *logger) Noticef(format string, v ...any) { g.log(slog.LevelDebug, format, v) }
func (g *logger) Warnf(format string, v ...any) {
	if g.generated && format == plaintextPasswords {
		g.log(slog.LevelDebug, format, v)
		return
	}
	g.log(slog.LevelWarn, format, v)
}
func (g *logger) Fatalf(format string, v ...any) {
	g.log(slog.LevelError, format, v)
	select {
	case g.fatal <- fmt.Sprintf(format, v...):
	default:
	}
}
func (g *logger) Errorf(format string, v ...any) { g.log(slog.LevelError, format, v) }
func (g *logger) Debugf(format string, v ...any) { g.log(slog.LevelDebug, format, v) }
func (g *logger) Tracef(format string, v ...any) { g.log(slog.LevelDebug-4, format, v) }

func (g *logger) log(level slog.Level, format string, v []any) {
	if !g.l.Enabled(context.Background(), level) {
		return
	}
	g.l.Log(context.Background(), level, fmt.Sprintf(format, v...))
}
