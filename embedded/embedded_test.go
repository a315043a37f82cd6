package embedded_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-engine/parley/embedded"
)

// A server that cannot start says why, at once: its port in use, a store
// it cannot make. An interrupted start stops the server.
func TestStart_FailsWithTheCause(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	_, err = embedded.Start(embedded.Config{Dir: t.TempDir(), Host: "127.0.0.1", Port: port})
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("port in use: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	_, err = embedded.Start(embedded.Config{Dir: filepath.Join(file, "store"), DontListen: true})
	if err == nil || !strings.Contains(err.Error(), "Can't start JetStream") {
		t.Errorf("a store under a file: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = embedded.StartContext(ctx, embedded.Config{Dir: t.TempDir(), DontListen: true})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled start: %v", err)
	}
	s, err := embedded.Start(embedded.Config{Dir: t.TempDir(), Host: "127.0.0.1", Port: -1, MaxFileStore: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.Stop(s)
	if got := s.JetStreamConfig().MaxStore; got != 1<<20 {
		t.Errorf("max_file_store %d", got)
	}
}
