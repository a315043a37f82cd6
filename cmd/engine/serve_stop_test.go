package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/wire"
)

// The stream deleted under a running engine (by the cluster's
// administrator): its consumer is dead, and engine serve exits 1 at once,
// saying why, instead of serving a projection that no longer moves.
// Started again on its data directory, it refuses to create an empty
// stream in the deleted one's place.
func TestServe_ExitsWhenTheStreamIsDeleted(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "nats.conf")
	os.WriteFile(conf, []byte(`
accounts { A { jetstream: enabled, users: [
  {user: admin, password: admin}
  {user: engine, password: engine}
] } }
`), 0o600)
	srv, err := embedded.Start(embedded.Config{Dir: t.TempDir(), ConfigFile: conf, Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.Stop(srv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	data := t.TempDir()
	args := []string{"serve", "--nats", srv.ClientURL(), "--user", "engine", "--password", "engine", "--data", data,
		"--http", "127.0.0.1:0", "--log-level", "warn"}
	go func() {
		done <- Run(ctx, args, strings.NewReader(""), &out, &errb)
	}()
	for !strings.Contains(out.String(), "  data  ") {
		select {
		case code := <-done:
			t.Fatalf("serve exited %d: %s", code, errb.String())
		case <-ctx.Done():
			t.Fatalf("serve printed %q", out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("admin", "admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	admin, _ := jetstream.New(nc)
	if err := admin.DeleteStream(ctx, wire.StreamName); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		said := errb.String()
		if code != 1 || !strings.Contains(said, "engine serve: the projection stopped: ") || !strings.Contains(said, "the stream "+wire.StreamName+" is gone") {
			t.Fatalf("serve exited %d, said:\n%s\nwant 1, the projection stopped, and why", code, said)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("serve still running 20 s after the stream's deletion: %s", errb.String())
	}
	var out2, errb2 syncBuffer
	if code := Run(ctx, args, strings.NewReader(""), &out2, &errb2); code != 1 || !strings.Contains(errb2.String(), "does not exist, but") {
		t.Fatalf("serve started again exited %d, said:\n%s", code, errb2.String())
	}
	if _, err := admin.Stream(ctx, wire.StreamName); err == nil {
		t.Fatal("the engine started again created a stream in the deleted one's place")
	}
}
