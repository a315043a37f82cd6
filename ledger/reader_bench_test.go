package ledger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/wire"
)

// BenchmarkReader reads a stream of 100,000 messages of 600 B from its
// start, over TCP: with a Reader (an ordered push consumer, as
// participants read), and with nats.go's ordered pull consumer (as they
// read before they were refused pulls, and as the engine's runner reads).
// One op is the whole stream; msgs/s is reported.
func BenchmarkReader(b *testing.B) {
	const n = 100_000
	s, err := embedded.Start(embedded.Config{Dir: b.TempDir(), Host: "127.0.0.1", Port: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { embedded.Stop(s) })
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := Ensure(ctx, js, 1); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 600)
	for i := range n {
		if _, err := js.PublishAsync(fmt.Sprintf("parley.0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.art.p%d", i%10), body); err != nil {
			b.Fatal(err)
		}
	}
	<-js.PublishAsyncComplete()

	b.Run("push", func(b *testing.B) {
		for b.Loop() {
			r, err := Read(ctx, nc, "", 0)
			if err != nil {
				b.Fatal(err)
			}
			for range n {
				if _, err := r.Next(ctx); err != nil {
					b.Fatal(err)
				}
			}
			r.Stop()
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
	b.Run("pull", func(b *testing.B) {
		for b.Loop() {
			cons, err := js.OrderedConsumer(ctx, wire.StreamName, jetstream.OrderedConsumerConfig{})
			if err != nil {
				b.Fatal(err)
			}
			it, err := cons.Messages()
			if err != nil {
				b.Fatal(err)
			}
			for range n {
				if _, err := it.Next(); err != nil {
					b.Fatal(err)
				}
			}
			it.Stop()
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
}
