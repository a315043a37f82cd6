package natsconn

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-engine/parley/lease"
	"github.com/parley-engine/parley/wire"
)

func TestSplitHostPort(t *testing.T) {
	for _, c := range []struct {
		addr, host string
		port       int
		err        bool
	}{
		{"", "127.0.0.1", 4222, false},
		{":0", "127.0.0.1", 0, false},
		{"0.0.0.0:4333", "0.0.0.0", 4333, false},
		{"localhost:70000", "", 0, true},
		{"nope", "", 0, true},
	} {
		h, p, err := splitHostPort(c.addr, "127.0.0.1", 4222)
		if (err != nil) != c.err || h != c.host || p != c.port {
			t.Errorf("splitHostPort(%q) = %q, %d, %v", c.addr, h, p, err)
		}
	}
}

// The refusals that come before any server is started keep their words.
func TestConnectRefusals(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct {
		cfg  Config
		want string
	}{
		"missing creds": {Config{URL: "nats://127.0.0.1:1", Creds: filepath.Join(dir, "missing.creds")}, "service: --creds: "},
		"bad nkey":      {Config{URL: "nats://127.0.0.1:1", NKey: filepath.Join(dir, "missing.nk")}, "service: --nkey "},
		"bad listen":    {Config{Dir: dir, Listen: "nope"}, "service: --listen: "},
		"user on default": {Config{Dir: dir, Listen: "127.0.0.1:0", User: "u"},
			"service: --user, --password, --creds and --nkey are for --nats or --nats-config"},
	} {
		conn, err := Connect(context.Background(), c.cfg)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
			conn.Close()
		}
	}
}

func TestReservedTokens(t *testing.T) {
	got := ReservedTokens([]string{wire.PrincipalToken, "alice"})
	if strings.Join(got, " ") != wire.SupervisorToken+" "+wire.CheckpointToken+" "+wire.PrincipalToken+" alice" {
		t.Errorf("ReservedTokens = %q", got)
	}
}

// The lease bucket's subjects the engine may write are those of the
// bucket the lease package uses.
func TestLeaseSubjects(t *testing.T) {
	if want := "$KV." + lease.DefaultBucket + ".>"; LeaseSubjects != want {
		t.Errorf("LeaseSubjects %q, want %q", LeaseSubjects, want)
	}
}
