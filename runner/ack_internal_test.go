package runner

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/internal/jstest"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/wire"
)

// The runner reads each message's position, time and pending count from
// its reply subject itself; on messages a real server delivers it must
// agree with jetstream's own Metadata.
func TestAckMetadata_AgreesWithJetStream(t *testing.T) {
	_, nc := jstest.Start(t)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := ledger.Ensure(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		if _, err := js.Publish(ctx, wire.ControlSubject(uuid.Must(uuid.NewV7()).String()), []byte(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := js.OrderedConsumer(ctx, wire.StreamName, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(n)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for msg := range batch.Messages() {
		meta, err := msg.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		seq, ts, pending, ok := ackMetadata(msg.Reply())
		if !ok || seq != meta.Sequence.Stream || ts != meta.Timestamp.UnixNano() || pending != meta.NumPending {
			t.Fatalf("%q: got %d %d %d %v, jetstream says %d %d %d", msg.Reply(), seq, ts, pending, ok,
				meta.Sequence.Stream, meta.Timestamp.UnixNano(), meta.NumPending)
		}
		got++
	}
	if got != n {
		t.Fatalf("read %d of %d messages", got, n)
	}
}

func TestAckMetadata_Forms(t *testing.T) {
	for _, c := range []struct {
		reply        string
		seq, pending uint64
		ts           int64
		ok           bool
	}{
		{"$JS.ACK.PARLEY.c1.1.42.7.1700000000000000000.3", 42, 3, 1700000000000000000, true},
		{"$JS.ACK._.acchash.PARLEY.c1.1.42.7.1700000000000000000.3.tok", 42, 3, 1700000000000000000, true},
		{"$JS.ACK.dom.acchash.PARLEY.c1.1.42.7.1700000000000000000.3", 42, 3, 1700000000000000000, true},
		{"$JS.ACK.dom.acchash.PARLEY.c1.1.42.7.1700000000000000000.3.tok.more", 42, 3, 1700000000000000000, true},
		{"", 0, 0, 0, false},
		{"_INBOX.abc", 0, 0, 0, false},
		{"$JS.ACK.PARLEY.c1.1.42.7.1700000000000000000", 0, 0, 0, false},     // 8 tokens
		{"$JS.ACK.d.h.PARLEY.c1.1.42.7.1700000000000000000", 0, 0, 0, false}, // 10 tokens
		{"$JS.ACK.PARLEY.c1.1.x.7.1700000000000000000.3", 0, 0, 0, false},    // not a number
		{"$JS.ACK.PARLEY.c1.1.0.7.1700000000000000000.3", 0, 0, 0, false},    // position 0
		{"$JS.ACK.PARLEY.c1.1.42.7.99999999999999999999.3", 0, 0, 0, false},  // 20 digits
		{"$JS.ACK.PARLEY.c1.1.42.7.9300000000000000000.3", 0, 0, 0, false},   // past int64
		{"$JS.ACK.PARLEY.c1.1.-42.7.1700000000000000000.3", 0, 0, 0, false},  // a sign
		{"$JS.ACK.PARLEY.c1.1..7.1700000000000000000.3", 0, 0, 0, false},     // empty
	} {
		seq, ts, pending, ok := ackMetadata(c.reply)
		if ok != c.ok || seq != c.seq || ts != c.ts || pending != c.pending {
			t.Errorf("%q: got %d %d %d %v, want %d %d %d %v", c.reply, seq, ts, pending, ok, c.seq, c.ts, c.pending, c.ok)
		}
	}
}

func FuzzAckMetadata(f *testing.F) {
	f.Add("$JS.ACK.PARLEY.c1.1.42.7.1700000000000000000.3")
	f.Add("$JS.ACK._.acchash.PARLEY.c1.1.42.7.1700000000000000000.3.tok")
	f.Fuzz(func(t *testing.T, reply string) {
		seq, ts, _, ok := ackMetadata(reply)
		if ok && (seq == 0 || ts < 0) {
			t.Fatalf("%q: accepted position %d time %d", reply, seq, ts)
		}
	})
}
