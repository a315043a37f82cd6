// Package fdplan shares the engine's open descriptors between the kinds
// of clients it has (Plan), once their limit is raised (RaiseFileLimit).
package fdplan

import "fmt"

// Descriptors is how the engine shares the process's open descriptors
// (RLIMIT_NOFILE, its soft limit raised to the hard one at start) so that
// no kind of client can take another's: HTTP connections are held to their
// budget (internal/httplimit.Budget), the embedded NATS server's clients to
// its max_connections, and what is left is kept for the store's files,
// snapshots, git processes and the engine's own. A client that opens
// sockets without end then exhausts only its own kind's share.
type Descriptors struct {
	// Limit is the soft limit the plan is made from (DefaultFileLimit
	// when the system says none).
	Limit int `json:"limit"`
	// HTTP is the HTTP connection budget (service.Config.HTTPMaxConns, or a
	// quarter of Limit, from 16 to 2,048: a held connection costs the
	// engine about 50 KB, so the default holds at most about 100 MB).
	HTTP int `json:"http_connections"`
	// NATS is the embedded server's max_connections: what is left once
	// HTTP and Files are set aside, at most the server's own default
	// (65,536); 0 with an external server, or a configuration file
	// (--nats-config) that sets its own.
	NATS int `json:"nats_clients"`
	// Files is kept for everything else: an eighth of Limit, from 64 to
	// 4,096.
	Files int `json:"files"`
}

// DefaultFileLimit is the limit planned with when the system gives none
// (or an unlimited one).
const DefaultFileLimit = 1 << 20

// maxNATSClients is the NATS server's own default max_connections.
const maxNATSClients = 64 << 10

// Plan shares limit descriptors; httpMax > 0 sets the HTTP
// budget; embedded says whether the NATS server is the engine's own.
func Plan(limit uint64, httpMax int, embedded bool) (Descriptors, error) {
	l := DefaultFileLimit
	if limit > 0 && limit < DefaultFileLimit {
		l = int(limit)
	}
	d := Descriptors{Limit: l, Files: min(max(l/8, 64), 4096), HTTP: min(max(l/4, 16), 2048)}
	if httpMax > 0 {
		d.HTTP = httpMax
	}
	left := l - d.HTTP - d.Files
	if embedded {
		d.NATS = min(left, maxNATSClients)
		left -= d.NATS
	}
	if left < 0 || (embedded && d.NATS < 16) {
		return d, fmt.Errorf("service: %d open descriptors (RLIMIT_NOFILE) cannot hold %d HTTP connections, %d kept for files and 16 NATS clients: lower --http-max-conns, or raise the limit (ulimit -n)", l, d.HTTP, d.Files)
	}
	return d, nil
}
