package partition_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/internal/jstest"
	"github.com/parley-engine/parley/partition"
	"github.com/parley-engine/parley/wire"
)

// The mapping inside an account, as deploy/cluster/accounts.conf would
// carry it, on a 3-node cluster: a participant connected to one node
// publishes on the ordinary subject; the message is stored, mapped, in
// its partition's stream on 3 replicas, and a subscriber on another node
// sees the mapped subject.
func TestMapping_Cluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-node cluster")
	}
	const n = 3
	var routes []string
	ports := make([][2]int, n)
	for i := range n {
		ports[i] = [2]int{jstest.FreePort(t), jstest.FreePort(t)}
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[i][1]))
	}
	dir := t.TempDir()
	nodes := make([]*server.Server, n)
	for i := range n {
		conf := fmt.Sprintf(`server_name: n%d
listen: 127.0.0.1:%d
cluster {
  name: parley
  listen: 127.0.0.1:%d
  routes: [%s]
}
`, i+1, ports[i][0], ports[i][1], strings.Join(routes, ", ")) + accountConf()
		file := filepath.Join(dir, fmt.Sprintf("n%d.conf", i+1))
		if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := embedded.Start(embedded.Config{Dir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)), ConfigFile: file})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = s
		t.Cleanup(func() { embedded.Stop(s) })
	}
	eventually.True(t, 30*time.Second, "a meta leader that knows every node", func() bool {
		for _, s := range nodes {
			if s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) == n {
				return true
			}
		}
		return false
	})
	conn := func(i int, user string) *nats.Conn {
		nc, err := nats.Connect(nodes[i].ClientURL(), nats.UserInfo(user, user))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	ctx := context.Background()
	ajs, err := jetstream.New(conn(0, "admin"))
	if err != nil {
		t.Fatal(err)
	}
	l, _ := partition.NewLayout(2)
	for _, r := range l.Streams() {
		if _, err := ajs.CreateStream(ctx, jetstream.StreamConfig{Name: r.Name(), Subjects: r.Subjects(), Replicas: 3}); err != nil {
			t.Fatal(err)
		}
	}
	watcher := conn(2, "admin")
	sub, err := watcher.SubscribeSync(partition.Prefix + ">")
	if err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(conn(1, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		d := uuid.NewString()
		subj := wire.ArtifactSubject(d, "alice")
		mapped, _ := partition.Subject(subj)
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ack, err := js.Publish(pctx, subj, []byte("x"), jetstream.WithMsgID(d))
		cancel()
		if err != nil {
			t.Fatalf("publish on %s: %v", subj, err)
		}
		if ack.Stream != l.Stream(d).Name() {
			t.Fatalf("%s stored in %s, want %s", subj, ack.Stream, l.Stream(d).Name())
		}
		st, err := ajs.Stream(ctx, ack.Stream)
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.GetMsg(ctx, ack.Sequence)
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != mapped {
			t.Fatalf("stored as %s, want %s", m.Subject, mapped)
		}
		got, err := sub.NextMsg(10 * time.Second)
		if err != nil || got.Subject != mapped {
			t.Fatalf("the subscriber on another node: %v, %v; want %s", got, err, mapped)
		}
	}
}
