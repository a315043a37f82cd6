package service

import (
	"log/slog"
	"time"

	"github.com/parley-engine/parley/health"

	"github.com/parley-engine/parley/httpapi"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/readmodel"
)

// Config of the engine service.
type Config struct {
	// DataDir holds the embedded server's store (DataDir/nats) and the
	// projection's snapshot (DataDir/projection.snapshot).
	DataDir string
	// Listen is the embedded server's client address (host:port; port 0
	// picks a free one).
	Listen string
	// HTTP is the query API's address (host:port; port 0 picks a free one).
	HTTP string
	// NATS, when set, is a comma-separated list of URLs of an existing
	// NATS cluster to use instead of the embedded server.
	NATS string
	// Credentials for NATS: a .creds file, an nkey seed file, TLS files.
	Creds, NKey            string
	TLSCA, TLSCert, TLSKey string
	User, Password         string
	// Partitioned stores the record partitioned (--partitioned;
	// docs/SCALING.md): the server's subject mapping stores
	// parley.<d>.art.<p> as parley.p.<n>.<d>.art.<p> and parley.<d>.ctl as
	// parley.p.<n>.<d>.ctl, in the one stream PARLEY_0000_1023. The
	// engine installs the mapping on its embedded server (in a
	// NATSConfig's accounts too) and gives its generated users their
	// permissions on the mapped subjects. On a cluster (NATS) the
	// cluster's configuration carries the mapping, and the engine reads
	// the layout the cluster holds (a partitioned stream even without
	// Partitioned); with Partitioned it refuses the unpartitioned stream.
	// A server that holds both layouts is refused.
	Partitioned bool
	// Streams is the number of streams of the partitioned record, a
	// power of two (--streams; more than 1 implies Partitioned): the
	// partitions spread over them in contiguous ranges
	// (PARLEY_0000_0255 … PARLEY_0768_1023 for four), each stream
	// folded by a runner of its own, a position the stream's index and
	// sequence (ledger.Layout.Position). It is chosen when the record is
	// created: an engine told another count than the server holds
	// refuses to start, but on a cluster (NATS) it reads the layout it
	// finds.
	Streams int
	// Replicas of the PARLEY stream when the engine creates it (1
	// embedded; 3 is usual on a cluster).
	Replicas int
	// MaxArtifactBytes is the artifact size limit (default 1 MiB).
	MaxArtifactBytes int
	// MaxDeliberations bounds the deliberations the engine holds
	// (DefaultMaxDeliberations when 0, none when negative), spread evenly
	// over the projection's shards; an open past it is refused
	// (deliberation.limit).
	MaxDeliberations int
	// MaxConsumers bounds the stream's consumers that are not the
	// engine's own (health.DefaultMaxConsumers when 0): past it the
	// engine deletes each new one (limit.consumers).
	MaxConsumers int
	// MaxKeptBytes bounds the bytes of the summaries kept of rejected, late
	// and foreign messages across every deliberation
	// (projector.DefaultMaxKeptBytes when 0, none when negative), spread
	// evenly over the projection's shards.
	MaxKeptBytes int64
	// InFlightBytes bounds the bytes of messages read from the stream and
	// not yet applied (runner.DefaultInFlightBytes when 0).
	InFlightBytes int64
	// SnapshotEvery is the interval between projection snapshots.
	SnapshotEvery time.Duration
	// SnapshotStore is where the projection's snapshots are kept:
	// SnapshotFiles (the default, "" too) in the data directory, or
	// SnapshotJetStream in the object store SnapshotBucket, where an
	// engine with an empty data directory finds them.
	SnapshotStore string
	// SnapshotBucket is the object store of SnapshotJetStream (default
	// runner.DefaultSnapshotBucket), created when missing with the
	// stream's storage and replicas; only the engine's user may use it on
	// the embedded default.
	SnapshotBucket string
	// SnapshotPrefix names the objects of SnapshotJetStream
	// (SnapshotPrefix.<i>-of-<n>; default SnapshotFile): engine groups
	// with different prefixes may share a bucket.
	SnapshotPrefix string
	// NATSConfig is a nats-server configuration file for the embedded
	// server (for example deploy/nats.conf), with its own users. Without
	// it (and without NATS) the embedded server runs with an authorization
	// the engine generates: a client without credentials is a reader,
	// who may read but publish nothing the stream keeps; the participant
	// user (its password in DataDir/participant.secret, kept across
	// restarts, and in the credentials file) may publish but not as
	// _supervisor or as a principal, nor touch the stream's
	// administration; the engine connects in process as its own user; an
	// operator user's password goes to the credentials file
	// (docs/SECURITY.md).
	NATSConfig string
	// AnonymousWrites makes a client without credentials a participant on
	// the embedded default (--anonymous-writes): whoever reaches the
	// server may write, and make the server hold what it writes.
	AnonymousWrites bool
	// HTTPTokens authenticate the HTTP API: a principal's resolution needs
	// one, and is published as the participant it stands for; so does
	// every read when the API listens beyond loopback, unless
	// HTTPPublicReads. None: the engine draws one at each start, for
	// wire.PrincipalToken, and writes it to the credentials file.
	HTTPTokens      []httpapi.Token
	HTTPPublicReads bool
	// CharterDefaults are the engine-wide limits and policy used where a
	// charter is silent.
	CharterDefaults projector.Defaults
	// ProvenanceRoots are the directories the engine re-verifies
	// provenance annotations against (substrate.code.read, grep, git.log,
	// fs.mtime), for deliberations whose charter has a provenance policy.
	// None: annotations are judged by the discipline alone.
	ProvenanceRoots []string
	// ProvenanceCacheTTL is how long a re-verification is reused (0: one
	// minute).
	ProvenanceCacheTTL time.Duration
	// EngineKey is the file of the engine's key, an nkeys user seed
	// (engine keygen), which must exist; empty: DataDir/engine.nk,
	// created at the first start. Engines that share a stream may share
	// a key or each hold their own: an auditor trusts the public keys
	// (docs/VERIFY.md).
	EngineKey string
	// NoSupervisor turns the termination supervisor off (another engine
	// supervises, or an auditor only reads).
	NoSupervisor bool
	// Leases makes the engine one of several that share the
	// deliberations' supervision by partition leases (engine serve
	// --leases): each engine's supervisor judges only the deliberations
	// of the partitions whose lease it holds (lease.Group: about an equal
	// share each, taken over within LeaseTTL and a round when an engine
	// dies), and renews the lease right before each write
	// (docs/SCALING.md). Every engine still folds the whole record and
	// answers every read.
	Leases bool
	// OwnStreams makes the engine one of several that share the streams
	// of a record of several (Streams) by stream leases (engine serve
	// --own-streams): each folds only the streams whose lease it holds,
	// each from the latest snapshot (SnapshotStore jetstream, so that
	// another engine takes a stream over near its head), judges only
	// their deliberations, and forwards the reads of the others' to their
	// owner (docs/SCALING.md). A dead engine's streams are taken within
	// LeaseTTL and a round.
	OwnStreams bool
	// AdvertiseURL is the base URL at which the other engines reach this
	// one's HTTP API, to forward reads (default: HTTPURL, a loopback
	// address when HTTP listens on every interface).
	AdvertiseURL string
	// EngineName names the engine among those (default: the host's name
	// and the process id); each must have its own.
	EngineName string
	// LeaseTTL is the leases' time to live when the engine creates their
	// bucket (lease.DefaultTTL when 0); an existing bucket keeps its own.
	LeaseTTL time.Duration
	// StreamCheckEvery is the interval of the stream watch's check of the
	// stream's configuration and state (0: DefaultStreamCheckEvery);
	// advisories ask for one at once in between (package health).
	StreamCheckEvery time.Duration
	// HTTPMaxConns is the HTTP connection budget: at most this many
	// connections open at once (0: a quarter of the open-descriptor
	// limit, at most 2,048; fdplan.Descriptors).
	HTTPMaxConns int
	// HTTPEvictAfter is how long an HTTP connection may wait for a request
	// before a full budget gives its place to a new one (0:
	// httplimit.DefaultEvictAfter, 10 s).
	HTTPEvictAfter time.Duration
	// ReadBudget bounds the expensive reads of HTTP clients that are not
	// signed in (the zero value: readmodel.DefaultReadBudget).
	ReadBudget readmodel.ReadBudget
	// MinPositionWait is how long a read with a min_position waits for
	// the projection to reach it before answering projection.behind (0:
	// readmodel.DefaultMinPositionWait).
	MinPositionWait time.Duration
	Version         string
	Logger          *slog.Logger
}

// Where the projection's snapshots are kept (Config.SnapshotStore).
const (
	SnapshotFiles     = "files"
	SnapshotJetStream = "jetstream"
)

// DefaultMaxDeliberations is the default bound on the deliberations an
// engine holds: with a charter of at most projector.MaxControlBytes and
// the state of a deliberation that holds nothing more, about 70 MB at
// most (docs/OPERATIONS.md).
const DefaultMaxDeliberations = 10000

func maxDeliberations(n int) int {
	switch {
	case n == 0:
		return DefaultMaxDeliberations
	case n < 0:
		return 0
	}
	return n
}

// DefaultMaxConsumers is the default bound on the stream's consumers that
// are not the engine's own (Config.MaxConsumers).
const DefaultMaxConsumers = health.DefaultMaxConsumers
