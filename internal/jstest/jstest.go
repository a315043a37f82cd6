// Package jstest starts what tests of JetStream code need: a real embedded
// NATS server with JetStream, on a temporary directory, and a client
// connected to it in process; both end with the test.
package jstest

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/partition"
)

// Start starts the server and connects to it.
func Start(tb testing.TB) (*server.Server, *nats.Conn) {
	tb.Helper()
	return start(tb, nil)
}

// StartPartitioned is Start with the partitioned record's subject mapping
// (partition.Mappings) on the server.
func StartPartitioned(tb testing.TB) (*server.Server, *nats.Conn) {
	tb.Helper()
	var ms []embedded.Mapping
	for _, m := range partition.Mappings() {
		ms = append(ms, embedded.Mapping{From: m.From, To: m.To})
	}
	return start(tb, ms)
}

func start(tb testing.TB, ms []embedded.Mapping) (*server.Server, *nats.Conn) {
	tb.Helper()
	s, err := embedded.Start(embedded.Config{Dir: tb.TempDir(), DontListen: true, Mappings: ms})
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
