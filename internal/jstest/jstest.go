// Package jstest starts what tests of JetStream code need: a real embedded
// NATS server with JetStream, on a temporary directory, and a client
// connected to it in process; both end with the test.
package jstest

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/embedded"
)

// Start starts the server and connects to it.
func Start(tb testing.TB) (*server.Server, *nats.Conn) {
	tb.Helper()
	s, err := embedded.Start(embedded.Config{Dir: tb.TempDir(), DontListen: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { embedded.Stop(s) })
	nc, err := nats.Connect("", nats.InProcessServer(s))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return s, nc
}
