package natsconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/partition"
)

// Config of the engine's connection: the embedded server's, unless URL
// names a cluster.
type Config struct {
	// URL, when set, is a comma-separated list of URLs of an existing NATS
	// cluster to use instead of the embedded server (--nats).
	URL string
	// Dir is the embedded server's store.
	Dir string
	// Listen is the embedded server's client address (host:port; port 0
	// picks a free one; empty: 127.0.0.1:4222).
	Listen string
	// ConfigFile is a nats-server configuration file for the embedded
	// server, with its own users (--nats-config). Without it (and without
	// URL) the server runs with the generated authorization (users.go).
	ConfigFile string
	// Credentials for NATS: a .creds file, an nkey seed file, TLS files.
	Creds, NKey            string
	TLSCA, TLSCert, TLSKey string
	User, Password         string
	// MaxConn is the embedded server's max_connections (0: the server's
	// default).
	MaxConn int
	// ParticipantPassword is ParticipantUser's on the embedded default
	// (required there; the engine keeps it in its data directory).
	ParticipantPassword string
	// AnonymousWrites makes a client without credentials ParticipantUser
	// on the embedded default, as it was before the reader: anyone who
	// reaches the server may then write to the record, and make the server
	// hold what it writes (docs/SECURITY.md).
	AnonymousWrites bool
	// Partitioned installs the server's subject mapping of the
	// partitioned record (partition.Mappings, docs/SCALING.md) on the
	// embedded server, in its configuration file's accounts too, and
	// gives the generated users their permissions on the mapped
	// subjects. With URL, the cluster's configuration carries the
	// mapping.
	Partitioned bool
	// Streams is the partitioned record's number of streams (more than
	// one implies Partitioned): the users' permissions name each.
	Streams int
	// Principals are the participants the HTTP tokens stand for, reserved
	// to the engine in the generated authorization (ReservedTokens).
	Principals []string
	// SnapshotBucket is the object store of the projection's snapshots,
	// which the generated authorization gives the engine alone (empty:
	// none).
	SnapshotBucket string
	Logger         *slog.Logger
	// OnError, when set, sees each asynchronous error of the connection
	// (a permission denied) before it is logged.
	OnError func(error)
}

// Conn is the engine's connection, and the embedded server it started.
type Conn struct {
	NC *nats.Conn
	// Server is the embedded server (nil with a cluster).
	Server *server.Server
	// URL is where participants connect.
	URL string
	// MaxConn is the embedded server's max_connections in force (a
	// configuration file's own, if it sets one); Config.MaxConn with a
	// cluster.
	MaxConn int
	// OperatorPassword is the password of OperatorUser, drawn at start on
	// the embedded default (empty otherwise).
	OperatorPassword string
}

// Connect starts the embedded server (unless cfg.URL names a cluster) and
// connects the engine to it. Without a configuration file the embedded
// server gets the generated authorization (users.go), and the engine its
// own user. On an error, what it started is stopped.
func Connect(ctx context.Context, cfg Config) (_ *Conn, err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts, err := options(cfg, log)
	if err != nil {
		return nil, err
	}
	c := &Conn{MaxConn: cfg.MaxConn}
	if cfg.URL != "" {
		c.URL = cfg.URL
		if c.NC, err = nats.Connect(cfg.URL, opts...); err != nil {
			return nil, fmt.Errorf("service: connect to NATS at %s: %w", cfg.URL, err)
		}
		return c, nil
	}
	host, port, err := splitHostPort(cfg.Listen, "127.0.0.1", 4222)
	if err != nil {
		return nil, fmt.Errorf("service: --listen: %w", err)
	}
	if port == 0 {
		port = -1
	}
	ecfg := embedded.Config{Dir: cfg.Dir, Host: host, Port: port,
		ConfigFile: cfg.ConfigFile, Logger: log.With("component", "nats"), MaxConn: cfg.MaxConn}
	layout := ledger.Unpartitioned
	if cfg.Partitioned || cfg.Streams > 1 {
		if layout, err = ledger.PartitionedOver(max(cfg.Streams, 1)); err != nil {
			return nil, fmt.Errorf("service: --streams: %w", err)
		}
		for _, m := range partition.Mappings() {
			ecfg.Mappings = append(ecfg.Mappings, embedded.Mapping{From: m.From, To: m.To})
		}
	}
	if cfg.ConfigFile == "" {
		if cfg.User != "" || cfg.Password != "" || cfg.Creds != "" || cfg.NKey != "" {
			return nil, errors.New("service: --user, --password, --creds and --nkey are for --nats or --nats-config: the embedded default generates its own users")
		}
		if cfg.ParticipantPassword == "" {
			return nil, errors.New("service: the embedded default needs the participant user's password")
		}
		enginePassword := secret()
		c.OperatorPassword = secret()
		ecfg.Users = embeddedUsers(layout, enginePassword, c.OperatorPassword, cfg.ParticipantPassword, cfg.Principals, cfg.SnapshotBucket)
		ecfg.NoAuthUser = ReaderUser
		if cfg.AnonymousWrites {
			ecfg.NoAuthUser = ParticipantUser
		}
		opts = append(opts, nats.UserInfo(EngineUser, enginePassword))
	}
	if c.Server, err = embedded.StartContext(ctx, ecfg); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			embedded.Stop(c.Server)
		}
	}()
	c.URL = c.Server.ClientURL()
	if v, err := c.Server.Varz(nil); err == nil {
		c.MaxConn = v.MaxConn // a configuration file's own, if it sets one
	}
	if cfg.ConfigFile != "" {
		// A refused in-process connection surfaces as a closed pipe, after
		// seconds; a TCP one says why at once.
		probe, err := nats.Connect(c.URL, opts...)
		if err != nil {
			hint := ""
			switch {
			case cfg.User == "" && cfg.Creds == "" && cfg.NKey == "":
				hint = " (" + cfg.ConfigFile + " has users: give the engine's with --user and --password)"
			case errors.Is(err, nats.ErrAuthorization):
				hint = " (does " + cfg.ConfigFile + " have this user, with this password?)"
			}
			return nil, fmt.Errorf("service: connect to the embedded NATS server: %w%s", err, hint)
		}
		probe.Close()
	}
	// The engine itself talks to its server in-process.
	if c.NC, err = nats.Connect("", append(opts, nats.InProcessServer(c.Server))...); err != nil {
		return nil, fmt.Errorf("service: connect to the embedded NATS server: %w", err)
	}
	return c, nil
}

// Close closes the connection, then stops the embedded server.
func (c *Conn) Close() {
	if c == nil {
		return
	}
	if c.NC != nil {
		c.NC.Close()
	}
	if c.Server != nil {
		embedded.Stop(c.Server)
	}
}

// options are the engine's connection options; a credential that cannot
// be used (an nkey seed file that is missing or holds no seed) is an error
// at once.
func options(c Config, log *slog.Logger) ([]nats.Option, error) {
	opts := []nats.Option{nats.Name("parley-engine"), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { log.Warn("nats disconnected", "err", err) }),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("nats reconnected", "url", nc.ConnectedUrl()) }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if c.OnError != nil {
				c.OnError(err)
			}
			if sub != nil {
				log.Warn("nats", "subject", sub.Subject, "err", err)
			} else {
				log.Warn("nats", "err", err)
			}
		})}
	if c.Creds != "" {
		if _, err := os.Stat(c.Creds); err != nil {
			return nil, fmt.Errorf("service: --creds: %w", err)
		}
		opts = append(opts, nats.UserCredentials(c.Creds))
	}
	if c.NKey != "" {
		o, err := nats.NkeyOptionFromSeed(c.NKey)
		if err != nil {
			return nil, fmt.Errorf("service: --nkey %s: %w", c.NKey, err)
		}
		opts = append(opts, o)
	}
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	if c.TLSCert != "" || c.TLSKey != "" {
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	return opts, nil
}

func splitHostPort(addr, defHost string, defPort int) (string, int, error) {
	if addr == "" {
		return defHost, defPort, nil
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	if host == "" {
		host = defHost
	}
	return host, port, nil
}
