// Package benchkit is the setup the benchmark programs under bench share:
// a temporary store, an engine or a bare embedded NATS server started in
// the process with the stream created, connections to them, waiting for
// the projection to catch up, a CPU profile, and the medians and
// quantiles their reports print. Every failure is fatal (log.Fatal): a
// benchmark that cannot set up has nothing to measure.
package benchkit

import (
	"context"
	"fmt"
	"log"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/service"
)

// Machine is the line a report starts with: the CPUs and Go version.
func Machine() string {
	return fmt.Sprintf("machine: %d CPUs, %s", runtime.NumCPU(), runtime.Version())
}

// TempDir makes a new temporary directory whose name begins with prefix.
func TempDir(prefix string) string {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		log.Fatal(err)
	}
	return dir
}

// StartEngine starts an engine in the process (service.Start) with cfg,
// its NATS and HTTP listeners on loopback ports the system picks unless
// cfg says otherwise. cfg.DataDir is required.
func StartEngine(ctx context.Context, cfg service.Config) *service.Service {
	if cfg.DataDir == "" {
		log.Fatal("benchkit: StartEngine needs a data directory")
	}
	if cfg.Listen == "" && cfg.NATS == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.HTTP == "" {
		cfg.HTTP = "127.0.0.1:0"
	}
	s, err := service.Start(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	return s
}

// Connect connects to the NATS server at url with opts.
func Connect(url string, opts ...nats.Option) *nats.Conn {
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		log.Fatal(err)
	}
	return nc
}

// JetStream is nc's JetStream with at most pending async publishes in
// flight (0: the library's default).
func JetStream(nc *nats.Conn, pending int) jetstream.JetStream {
	var opts []jetstream.JetStreamOpt
	if pending > 0 {
		opts = append(opts, jetstream.WithPublishAsyncMaxPending(pending))
	}
	js, err := jetstream.New(nc, opts...)
	if err != nil {
		log.Fatal(err)
	}
	return js
}

// Server is a bare embedded NATS server (no engine) holding the engine's
// stream, and a connection to it.
type Server struct {
	*server.Server
	NC     *nats.Conn
	JS     jetstream.JetStream
	Stream jetstream.Stream
}

// StartServer starts an embedded server with cfg (embedded.Start), connects
// to it (in the process when it does not listen, else at its address),
// with at most pending async publishes in flight (0: the default), and
// creates the engine's stream, one replica (ledger.Ensure).
func StartServer(ctx context.Context, cfg embedded.Config, pending int) *Server {
	s, err := embedded.Start(cfg)
	if err != nil {
		log.Fatal(err)
	}
	out := &Server{Server: s}
	if cfg.DontListen {
		out.NC = Connect("", nats.InProcessServer(s))
	} else {
		out.NC = Connect(s.ClientURL())
	}
	out.JS = JetStream(out.NC, pending)
	if out.Stream, err = ledger.Ensure(ctx, out.JS, 1); err != nil {
		log.Fatal(err)
	}
	return out
}

// InProcess connects to the server in the process, whether or not it
// listens.
func (s *Server) InProcess() *nats.Conn { return Connect("", nats.InProcessServer(s.Server)) }

// Stop closes the connection and stops the server.
func (s *Server) Stop() {
	s.NC.Close()
	embedded.Stop(s.Server)
}

// WaitApplied waits, up to ten minutes, until the engine has applied every
// message its stream holds now.
func WaitApplied(ctx context.Context, s *service.Service) {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	l := s.Runner.Layout()
	for k, st := range s.Streams {
		info, err := st.Info(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if err := s.Runner.WaitFor(wctx, l.Position(k, info.State.LastSeq)); err != nil {
			log.Fatal(err)
		}
	}
}

// CPUProfile starts a CPU profile written to path and returns what stops
// it; with path empty it does nothing.
func CPUProfile(path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		log.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// Median is the middle of d (the upper one of an even count); d is not
// changed and must not be empty.
func Median[T time.Duration | float64](d []T) T {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// Quantile is the q-quantile of d (0 ≤ q ≤ 1: the element at rank
// q·len(d), the last for 1), 0 when d is empty; d is not changed.
func Quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
