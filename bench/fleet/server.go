package main

import (
	"io"
	"log"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/embedded"
)

// With -server-process, the NATS server runs in a process of its own (an
// embedded server, as `engine serve` starts it, in this program started
// again with -server-child DIR), for the raw baselines and the engine
// alike: the engine then connects to it as to an external server (its
// NATS setting), as it would to a nats-server beside it. The child prints
// its client URL and stops when its standard input closes.
var serverProcess bool

// natsServer is a NATS server for one load: in this process or in a child.
type natsServer struct {
	url      string
	inProc   nats.Option // connects in process; nil for a child
	stop     func()
	external bool
}

func startServer(dir string) *natsServer {
	if !serverProcess {
		s, err := embedded.Start(embedded.Config{Dir: dir, Host: "127.0.0.1", Port: -1})
		if err != nil {
			log.Fatal(err)
		}
		return &natsServer{url: s.ClientURL(), inProc: nats.InProcessServer(s), stop: func() { embedded.Stop(s) }}
	}
	cmd, in, sc := spawn("-server-child", dir)
	if !sc.Scan() {
		log.Fatalf("server process: no URL (%v)", sc.Err())
	}
	return &natsServer{url: sc.Text(), external: true, stop: func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			log.Printf("server process: %v", err)
		}
	}}
}

// connect connects to the server: in process when it is in this process.
func (ns *natsServer) connect() (*nats.Conn, error) {
	if ns.inProc != nil {
		return nats.Connect("", ns.inProc)
	}
	return nats.Connect(ns.url)
}

// runServerChild is the server process.
func runServerChild(dir string) {
	s, err := embedded.Start(embedded.Config{Dir: dir, Host: "127.0.0.1", Port: -1, ReadyTimeout: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	os.Stdout.WriteString(s.ClientURL() + "\n")
	io.Copy(io.Discard, os.Stdin)
	embedded.Stop(s)
}
