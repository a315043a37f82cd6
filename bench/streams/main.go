// Command streams measures raw JetStream ingest into the partitioned
// record, one stream against several, in one run, so that the ratio is
// not at the mercy of a noisy host.
//
// Each configuration starts an embedded server with the partition
// mapping (partition.MappingBlock) and the streams of a layout
// (partition.NewLayout); K publishers, each on its own connection, publish
// N messages in all, async, each with a Nats-Msg-Id, on the artifact
// subjects of D deliberations (so that the messages spread over the
// partitions as deliberations do), while one bare ordered consumer per
// stream reads it. The time is until every publish is acknowledged and
// every consumer has read its stream's share. Rounds alternate the order
// of the configurations.
//
//	go run ./bench/streams -n 200000 -k 8 -d 1000 -streams 1,4 -rounds 3
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/internal/benchkit"
	"github.com/parley-engine/parley/partition"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/wire"
)

func main() {
	n := flag.Int("n", 200000, "messages per configuration and round")
	k := flag.Int("k", 8, "publishers, each on its own connection")
	d := flag.Int("d", 1000, "deliberations the messages are spread over")
	size := flag.Int("size", 400, "bytes of each message")
	streams := flag.String("streams", "1,4", "stream counts to compare, the first being the base of the ratios")
	rounds := flag.Int("rounds", 3, "rounds, alternating the order of the configurations")
	flag.Parse()
	var counts []int
	for _, f := range strings.Split(*streams, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			log.Fatalf("-streams: %v", err)
		}
		if _, err := partition.NewLayout(c); err != nil {
			log.Fatal(err)
		}
		counts = append(counts, c)
	}
	if *n < 1 || *k < 1 || *d < 1 || *size < 1 || *rounds < 1 {
		log.Fatal("-n, -k, -d, -size and -rounds must be positive")
	}
	fmt.Println(benchkit.Machine())
	fmt.Printf("raw JetStream ingest through the partition mapping: %d messages of %d bytes, %d publishers, %d deliberations\n", *n, *size, *k, *d)

	ids := make([]string, *d)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	body := make([]byte, *size)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	rates := make(map[int][]float64)
	for r := range *rounds {
		order := slices.Clone(counts)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, c := range order {
			t := run(c, *n, *k, ids, body)
			rate := float64(*n) / t.Seconds()
			rates[c] = append(rates[c], rate)
			fmt.Printf("round %d  %4d stream(s)  %9.0f msgs/s  (%s)\n", r+1, c, rate, t.Round(time.Millisecond))
		}
		base := rates[counts[0]][r]
		for _, c := range counts[1:] {
			fmt.Printf("round %d  ratio %d/%d streams  %.2f\n", r+1, c, counts[0], rates[c][r]/base)
		}
	}
	for _, c := range counts {
		fmt.Printf("median %4d stream(s)  %9.0f msgs/s\n", c, benchkit.Median(rates[c]))
	}
	for _, c := range counts[1:] {
		var ratios []float64
		for r := range *rounds {
			ratios = append(ratios, rates[c][r]/rates[counts[0]][r])
		}
		fmt.Printf("median ratio %d/%d streams  %.2f (range %.2f to %.2f)\n", c, counts[0], benchkit.Median(ratios), slices.Min(ratios), slices.Max(ratios))
	}
}

// run measures one configuration: a fresh server with nstreams streams.
func run(nstreams, n, k int, ids []string, body []byte) time.Duration {
	ctx := context.Background()
	dir := benchkit.TempDir("parley-bench-streams-")
	defer os.RemoveAll(dir)
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte(partition.MappingBlock("")), 0o600); err != nil {
		log.Fatal(err)
	}
	s, err := embedded.Start(embedded.Config{Dir: filepath.Join(dir, "store"), ConfigFile: conf, Host: "127.0.0.1", Port: -1})
	if err != nil {
		log.Fatal(err)
	}
	defer embedded.Stop(s)
	nc := benchkit.Connect("", nats.InProcessServer(s))
	defer nc.Close()
	js := benchkit.JetStream(nc, 0)
	layout, _ := partition.NewLayout(nstreams)

	// What each stream will hold.
	want := make([]int64, nstreams)
	for i := range n {
		want[layout.Stream(ids[i%len(ids)]).Index]++
	}
	var remaining atomic.Int64
	remaining.Store(int64(n))
	read := make(chan struct{})
	for _, r := range layout.Streams() {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: r.Name(), Subjects: r.Subjects(), Storage: jetstream.FileStorage}); err != nil {
			log.Fatal(err)
		}
		if want[r.Index] == 0 {
			continue
		}
		cons, err := js.OrderedConsumer(ctx, r.Name(), jetstream.OrderedConsumerConfig{})
		if err != nil {
			log.Fatal(err)
		}
		cc, err := cons.Consume(func(jetstream.Msg) {
			if remaining.Add(-1) == 0 {
				close(read)
			}
		}, jetstream.PullMaxBytes(runner.PullBytes))
		if err != nil {
			log.Fatal(err)
		}
		defer cc.Stop()
	}

	start := time.Now()
	var wg sync.WaitGroup
	for p := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pnc := benchkit.Connect(s.ClientURL())
			defer pnc.Close()
			pjs := benchkit.JetStream(pnc, 0)
			msgIDs := wire.NewMsgIDs()
			token := fmt.Sprintf("p%d", p)
			for i := p; i < n; i += k {
				subj := wire.ArtifactSubject(ids[i%len(ids)], token)
				msg := &nats.Msg{Subject: subj, Data: body}
				if _, err := pjs.PublishMsgAsync(msg, jetstream.WithMsgID(msgIDs.Artifact(subj, strconv.Itoa(i))), jetstream.WithStallWait(30*time.Second)); err != nil {
					log.Fatal(err)
				}
			}
			select {
			case <-pjs.PublishAsyncComplete():
			case <-time.After(5 * time.Minute):
				log.Fatal("publishes unacknowledged after 5 minutes")
			}
		}()
	}
	wg.Wait()
	select {
	case <-read:
	case <-time.After(5 * time.Minute):
		log.Fatalf("the consumers read %d of %d after 5 minutes", int64(n)-remaining.Load(), n)
	}
	return time.Since(start)
}
