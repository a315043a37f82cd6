package integration

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/parley-engine/parley/embedded"
)

// natsServer is a NATS server standing for an external cluster node.
type natsServer struct {
	s   *server.Server
	url string
}

func startStandalone(t testing.TB, storeDir string, port int) *natsServer {
	t.Helper()
	s, err := embedded.Start(embedded.Config{Dir: storeDir, Host: "127.0.0.1", Port: port, ServerName: "external"})
	if err != nil {
		t.Fatal(err)
	}
	return &natsServer{s: s, url: s.ClientURL()}
}

func (n *natsServer) stop() { embedded.Stop(n.s) }
