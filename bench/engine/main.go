// Command engine measures the engine against raw JetStream on the same
// machine, in one run, so that the ratios are not at the mercy of a noisy
// host:
//
//   - ingest: K participants publish N sealed artifacts through the client
//     (async, with Msg-Id); the rate at which the projection has accepted
//     them, beside raw JetStream async publish of the same bytes to the same
//     stream configuration with no engine, and beside that publish read
//     meanwhile by a bare ordered consumer (the ceiling of any projection
//     fed by the stream);
//
//   - replay: rebuild the projection of M artifacts from the stream, beside
//     a bare ordered consumer reading the same stream;
//
//   - memory: heap held by the projection per artifact (bodies stay in the
//     stream, so this is all of it);
//
//   - concurrency: D deliberations of 10 participants each, all at once.
//
// With -streams S, the ingest instead spreads the artifacts over 64
// deliberations and runs the engine on the partitioned record in one
// stream and over S (engine serve --streams), beside the bare consumer's
// floor, in each round.
//
// With -partitioned, the ingest runs on the partitioned record too (the
// server's subject mapping, the one stream PARLEY_0000_1023;
// docs/SCALING.md), beside the unpartitioned one in each round.
//
//	go run ./bench/engine -n 100000 -k 8 -m 1000000 -d 1000
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/benchkit"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/partition"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/signing"
	"github.com/parley-engine/parley/wire"
)

var rebuildProfile, rebuildMemProfile string

func main() {
	n := flag.Int("n", 100000, "artifacts for the ingest benchmark")
	k := flag.Int("k", 8, "participants for the ingest benchmark")
	m := flag.Int("m", 1000000, "artifacts for the replay and memory benchmark")
	d := flag.Int("d", 1000, "deliberations for the concurrency benchmark (10 participants each)")
	flag.BoolVar(&partitionedIngest, "partitioned", false, "ingest on the partitioned record too (engine serve --partitioned), beside the unpartitioned one")
	ownMemory := flag.Int("own-memory", 0, "fold this many artifacts of a record of four streams (100 deliberations) by one engine holding every stream, and by the engines that would share them with --own-streams (one, two, three streams), and report each one's projection heap; 0: not")
	foldDir = flag.String("fold-server", "", "(internal to -own-memory) fold the record at this server")
	foldStreams = flag.String("fold-streams", "", "(internal to -own-memory) the streams to fold, comma-separated")
	flag.IntVar(&streamsIngest, "streams", 0, "ingest spread over 64 deliberations on the partitioned record over this many streams, beside one stream (engine serve --streams); 0: not")
	flag.BoolVar(&signedIngest, "signed", true, "ingest a signed deliberation too (a key bound to every participant, signatures required), beside the unsigned one")
	rounds := flag.Int("rounds", 3, "rounds of the ingest benchmark (raw, raw read by a bare consumer, engine) and of the replay (bare consumer, rebuild), alternating their order")
	per := flag.Int("per", 5, "artifacts per participant per deliberation in the concurrency benchmark")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.StringVar(&rebuildProfile, "rebuild-profile", "", "write a CPU profile of the engine's rebuild alone (replay) to this file")
	flag.StringVar(&rebuildMemProfile, "rebuild-memprofile", "", "write a heap profile after the first rebuild to this file (its allocations are the whole process's since it started)")
	flag.Parse()
	ctx := context.Background()
	defer benchkit.CPUProfile(*cpuprofile)()

	if *foldDir != "" {
		foldHeld(ctx, *foldDir, *foldStreams)
		return
	}
	fmt.Printf("%s\n\n", benchkit.Machine())
	if *ownMemory > 0 {
		ownedMemory(ctx, *ownMemory)
		return
	}
	if *n > 0 {
		ingest(ctx, *n, *k, *rounds)
	}
	if *m > 0 {
		replay(ctx, *m, *rounds)
	}
	if *d > 0 {
		concurrent(ctx, *d, 10, *per)
	}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// allocated is the bytes the process has allocated on the heap so far.
func allocated() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

func perMsg(cpu time.Duration, n uint64) float64 {
	return float64(cpu.Microseconds()) / float64(max(n, 1))
}

func tempDir() string { return benchkit.TempDir("parley-bench-") }

// claims seals n claims of about 300 bytes.
func claims(n int, tag string) []*events.Artifact {
	out := make([]*events.Artifact, n)
	for i := range out {
		out[i] = events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{
			Statement: fmt.Sprintf("%s %d: the cache keeps p99 latency under 50 ms for every workload we measured, across three regions and two traffic mixes", tag, i)}})
	}
	return out
}

// signedIngest: -signed; partitionedIngest: -partitioned.
var signedIngest, partitionedIngest bool

// streamsIngest: -streams.
var streamsIngest int

// foldDir, foldStreams: one measure of -own-memory, in a process of its own.
var foldDir, foldStreams *string

// spread is how many deliberations the -streams ingest spreads its
// artifacts over (a deliberation's messages are in one stream).
const spread = 64

func ingest(ctx context.Context, n, k, rounds int) {
	arts := claims(n, "ingest")
	id := uuid.Must(uuid.NewV7()).String()

	// Raw JetStream: the same bytes, subjects and Msg-Ids, no engine. With
	// consume, a bare ordered consumer (in process, pulling as the engine's
	// runner pulls) reads the stream meanwhile, and the time is until it
	// has everything: the most any projection fed by the stream can do.
	raw := func(consume bool) time.Duration {
		dir := tempDir()
		defer os.RemoveAll(dir)
		srv := benchkit.StartServer(ctx, embedded.Config{Dir: dir, Host: "127.0.0.1", Port: -1}, 0)
		defer srv.Stop()
		srv.NC.Close()
		s := srv.Server
		var read chan struct{}
		if consume {
			read = make(chan struct{})
			cnc := srv.InProcess()
			defer cnc.Close()
			cjs, _ := jetstream.New(cnc)
			cons, err := cjs.OrderedConsumer(ctx, wire.StreamName, jetstream.OrderedConsumerConfig{})
			if err != nil {
				log.Fatal(err)
			}
			var got int
			cc, err := cons.Consume(func(jetstream.Msg) {
				if got++; got == n {
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
		for p := 0; p < k; p++ {
			wg.Add(1)
			go func(p int) {
				defer wg.Done()
				nc, _ := nats.Connect(s.ClientURL())
				defer nc.Close()
				js, _ := jetstream.New(nc)
				ids := wire.NewMsgIDs()
				for i := p; i < n; i += k {
					msg := &nats.Msg{Subject: wire.ArtifactSubject(id, fmt.Sprintf("p%d", p)), Data: arts[i].Canonical}
					if _, err := js.PublishMsgAsync(msg, jetstream.WithMsgID(ids.Artifact(msg.Subject, arts[i].ID.String())), jetstream.WithStallWait(30*time.Second)); err != nil {
						log.Fatal(err)
					}
				}
				<-js.PublishAsyncComplete()
			}(p)
		}
		wg.Wait()
		if consume {
			<-read
		}
		return time.Since(start)
	}

	// The engine: the client's async publish, until the projection has
	// accepted every artifact.
	// With signed, the charter binds a key to every participant and
	// requires signatures, and every artifact is signed (docs/VERIFY.md):
	// the engine verifies each signature ahead of the fold, on every core.
	var keys []nkeys.KeyPair
	bound := map[string]string{}
	for p := 0; p < k; p++ {
		kp, _ := nkeys.CreateUser()
		pub, _ := kp.PublicKey()
		keys = append(keys, kp)
		bound[fmt.Sprintf("p%d", p)] = pub
	}
	engine := func(signed, partitioned bool) time.Duration {
		dir := tempDir()
		defer os.RemoveAll(dir)
		s := benchkit.StartEngine(ctx, service.Config{DataDir: dir, Partitioned: partitioned})
		defer s.Close()
		nc, _ := nats.Connect(s.NATSURL(), s.Participant())
		orch, _ := client.New(nc, "orchestrator")
		ch := client.Charter{Title: "ingest"}
		if signed {
			ch.Keys, ch.RequireSignatures = bound, true
		}
		if err := orch.OpenID(ctx, id, ch); err != nil {
			log.Fatal(err)
		}
		nc.Close()
		// Signed: each participant signed its artifacts before the clock
		// starts (as participants elsewhere would have), and publishes them
		// with their headers as the client does (subject, headers, its
		// Nats-Msg-Id): the time is the engine's, verification included.
		var sigs []signing.Headers
		if signed {
			sigs = make([]signing.Headers, n)
			for p := 0; p < k; p++ {
				sg, err := signing.NewSigner(keys[p])
				if err != nil {
					log.Fatal(err)
				}
				for i := p; i < n; i += k {
					if sigs[i], err = sg.Sign(id, fmt.Sprintf("p%d", p), arts[i].ID.String()); err != nil {
						log.Fatal(err)
					}
				}
			}
		}
		start := time.Now()
		var wg sync.WaitGroup
		for p := 0; p < k; p++ {
			wg.Add(1)
			go func(p int) {
				defer wg.Done()
				nc, _ := nats.Connect(s.NATSURL(), s.Participant())
				defer nc.Close()
				if signed {
					js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(client.DefaultAsyncMaxPending))
					ids := wire.NewMsgIDs()
					for i := p; i < n; i += k {
						msg := &nats.Msg{Subject: wire.ArtifactSubject(id, fmt.Sprintf("p%d", p)), Data: arts[i].Canonical, Header: nats.Header{}}
						sigs[i].Set(msg.Header)
						if _, err := js.PublishMsgAsync(msg, jetstream.WithMsgID(ids.Artifact(msg.Subject, arts[i].ID.String())), jetstream.WithStallWait(30*time.Second)); err != nil {
							log.Fatal(err)
						}
					}
					<-js.PublishAsyncComplete()
					return
				}
				c, _ := client.New(nc, fmt.Sprintf("p%d", p))
				for i := p; i < n; i += k {
					if _, err := c.PublishArtifactAsync(id, arts[i]); err != nil {
						log.Fatal(err)
					}
				}
				<-c.PublishAsyncComplete()
			}(p)
		}
		wg.Wait()
		benchkit.WaitApplied(ctx, s)
		elapsed := time.Since(start)
		v, err := s.Queries.Get(id)
		if err != nil || v.Artifacts != n {
			log.Fatalf("engine accepted %d of %d (%v)", v.Artifacts, n, err)
		}
		return elapsed
	}

	// spreadEngine: the engine on the partitioned record over streams
	// streams, the artifacts spread over spread deliberations (artifact
	// i to deliberation i mod spread), until the projection has accepted
	// them all.
	spreadEngine := func(streams int) time.Duration {
		dir := tempDir()
		defer os.RemoveAll(dir)
		s := benchkit.StartEngine(ctx, service.Config{DataDir: dir, Partitioned: true, Streams: streams})
		defer s.Close()
		nc, _ := nats.Connect(s.NATSURL(), s.Participant())
		orch, _ := client.New(nc, "orchestrator")
		ids := make([]string, spread)
		for j := range ids {
			ids[j] = uuid.Must(uuid.NewV7()).String()
			if err := orch.OpenID(ctx, ids[j], client.Charter{Title: "ingest"}); err != nil {
				log.Fatal(err)
			}
		}
		nc.Close()
		start := time.Now()
		var wg sync.WaitGroup
		for p := 0; p < k; p++ {
			wg.Add(1)
			go func(p int) {
				defer wg.Done()
				nc, _ := nats.Connect(s.NATSURL(), s.Participant())
				defer nc.Close()
				c, _ := client.New(nc, fmt.Sprintf("p%d", p))
				for i := p; i < n; i += k {
					if _, err := c.PublishArtifactAsync(ids[i%spread], arts[i]); err != nil {
						log.Fatal(err)
					}
				}
				<-c.PublishAsyncComplete()
			}(p)
		}
		wg.Wait()
		benchkit.WaitApplied(ctx, s)
		elapsed := time.Since(start)
		total := 0
		for _, id := range ids {
			v, err := s.Queries.Get(id)
			if err != nil {
				log.Fatal(err)
			}
			total += v.Artifacts
		}
		if total != n {
			log.Fatalf("engine over %d streams accepted %d of %d", streams, total, n)
		}
		return elapsed
	}
	if streamsIngest > 0 {
		fmt.Printf("ingest  %d artifacts, %d participants, spread over %d deliberations: the engine over 1 and %d streams, beside the bare consumer's floor; %d rounds\n", n, k, spread, streamsIngest, rounds)
		var oneToBare, manyToBare, manyToOne []float64
		for r := range rounds {
			var bareT, oneT, manyT time.Duration
			if r%2 == 0 {
				bareT, oneT, manyT = raw(true), spreadEngine(1), spreadEngine(streamsIngest)
			} else {
				manyT, oneT, bareT = spreadEngine(streamsIngest), spreadEngine(1), raw(true)
			}
			bareRate, oneRate, manyRate := float64(n)/bareT.Seconds(), float64(n)/oneT.Seconds(), float64(n)/manyT.Seconds()
			fmt.Printf("  round %d\n", r+1)
			fmt.Printf("  bare ordered consumer (floor)    %9.0f msgs/s  (%s)\n", bareRate, bareT.Round(time.Millisecond))
			fmt.Printf("  engine, 1 stream                 %9.0f msgs/s  (%s) = %.2f of the floor\n", oneRate, oneT.Round(time.Millisecond), oneRate/bareRate)
			fmt.Printf("  engine, %d streams                %9.0f msgs/s  (%s) = %.2f of the floor, %.2f of 1 stream\n", streamsIngest, manyRate, manyT.Round(time.Millisecond), manyRate/bareRate, manyRate/oneRate)
			oneToBare, manyToBare, manyToOne = append(oneToBare, oneRate/bareRate), append(manyToBare, manyRate/bareRate), append(manyToOne, manyRate/oneRate)
		}
		fmt.Printf("  median (range) of %d rounds: 1 stream/floor %s, %d streams/floor %s, %d streams/1 stream %s\n\n", rounds, median(oneToBare), streamsIngest, median(manyToBare), streamsIngest, median(manyToOne))
		return
	}

	fmt.Printf("ingest  %d artifacts, %d participants (~%d B each), %d rounds\n", n, k, len(arts[0].Canonical), rounds)
	var toRaw, toBare, bareToRaw, signedToUnsigned, partToUnpart []float64
	for r := range rounds {
		var rawT, bareT, engT, sigT, partT time.Duration
		// Alternate the order, so that none of them always goes first.
		if r%2 == 0 {
			rawT, bareT, engT = raw(false), raw(true), engine(false, false)
			if partitionedIngest {
				partT = engine(false, true)
			}
			if signedIngest {
				sigT = engine(true, false)
			}
		} else {
			if signedIngest {
				sigT = engine(true, false)
			}
			if partitionedIngest {
				partT = engine(false, true)
			}
			engT, bareT, rawT = engine(false, false), raw(true), raw(false)
		}
		rawRate, bareRate, engRate := float64(n)/rawT.Seconds(), float64(n)/bareT.Seconds(), float64(n)/engT.Seconds()
		fmt.Printf("  round %d\n", r+1)
		fmt.Printf("  raw JetStream async publish      %9.0f msgs/s  (%s)\n", rawRate, rawT.Round(time.Millisecond))
		fmt.Printf("    read by a bare ordered consumer %8.0f msgs/s  (%s) = %.2f of raw publish\n", bareRate, bareT.Round(time.Millisecond), bareRate/rawRate)
		fmt.Printf("  engine: accepted into projection %9.0f msgs/s  (%s)\n", engRate, engT.Round(time.Millisecond))
		fmt.Printf("  ratio engine/raw                 %9.2f  (goal >= 0.75)\n", engRate/rawRate)
		fmt.Printf("  ratio engine/bare consumer       %9.2f\n", engRate/bareRate)
		if partitionedIngest {
			partRate := float64(n) / partT.Seconds()
			fmt.Printf("  engine, the record partitioned   %9.0f msgs/s  (%s) = %.2f of unpartitioned\n", partRate, partT.Round(time.Millisecond), partRate/engRate)
			partToUnpart = append(partToUnpart, partRate/engRate)
		}
		if signedIngest {
			sigRate := float64(n) / sigT.Seconds()
			fmt.Printf("  engine, every artifact signed    %9.0f msgs/s  (%s) = %.2f of unsigned\n", sigRate, sigT.Round(time.Millisecond), sigRate/engRate)
			signedToUnsigned = append(signedToUnsigned, sigRate/engRate)
		}
		toRaw, toBare, bareToRaw = append(toRaw, engRate/rawRate), append(toBare, engRate/bareRate), append(bareToRaw, bareRate/rawRate)
	}
	fmt.Printf("  median (range) of %d rounds: engine/raw %s, bare consumer/raw %s, engine/bare consumer %s\n", rounds, median(toRaw), median(bareToRaw), median(toBare))
	if partitionedIngest {
		fmt.Printf("  partitioned/unpartitioned ingest %s\n", median(partToUnpart))
	}
	if signedIngest {
		fmt.Printf("  signed/unsigned ingest %s\n", median(signedToUnsigned))
	}
	fmt.Println()
}

// median formats the median and the range of v.
func median(v []float64) string {
	v = slices.Clone(v)
	slices.Sort(v)
	return fmt.Sprintf("%.2f (%.2f-%.2f)", v[len(v)/2], v[0], v[len(v)-1])
}

func replay(ctx context.Context, m, rounds int) {
	dir := tempDir()
	defer os.RemoveAll(dir)
	srv := benchkit.StartServer(ctx, embedded.Config{Dir: dir, DontListen: true}, 8192)
	defer srv.Stop()
	js, stream := srv.JS, srv.Stream
	// 100 deliberations; in each, a chain of objections, each objecting to
	// the one before (one reference per artifact).
	fill := time.Now()
	fillChains(js, m, "replay")
	info, _ := stream.Info(ctx)
	last := info.State.LastSeq
	fmt.Printf("replay  %d messages (%d MB in the stream; filled in %s)\n", last, info.State.Bytes>>20, time.Since(fill).Round(time.Second))

	var ratios []float64
	for r := range rounds {
		if rounds > 1 {
			fmt.Printf("  round %d\n", r+1)
		}
		var bareT, projT time.Duration
		var bareCPU, projCPU time.Duration
		// Alternate the order, so that neither always reads first.
		if r%2 == 0 {
			bareT, bareCPU = bareRead(ctx, js, last)
			projT, projCPU = rebuild(ctx, js, stream, last, r == 0)
		} else {
			projT, projCPU = rebuild(ctx, js, stream, last, r == 0)
			bareT, bareCPU = bareRead(ctx, js, last)
		}
		bareRate, projRate := float64(last)/bareT.Seconds(), float64(last)/projT.Seconds()
		fmt.Printf("  bare ordered consumer            %9.0f msgs/s  (%s, CPU %.1f us a message)\n", bareRate, bareT.Round(time.Millisecond), perMsg(bareCPU, last))
		fmt.Printf("  engine: projection rebuilt       %9.0f msgs/s  (%s, CPU %.1f us a message)\n", projRate, projT.Round(time.Millisecond), perMsg(projCPU, last))
		fmt.Printf("  ratio engine/bare                %9.2f  (goal >= 0.8)\n", projRate/bareRate)
		ratios = append(ratios, projRate/bareRate)
	}
	if rounds > 1 {
		fmt.Printf("  median (range) of %d rounds: engine/bare %s\n", rounds, median(ratios))
	}
	fmt.Println()
}

// bareRead reads the stream's last messages with a bare ordered consumer,
// pulling as the engine's runner pulls; it returns the time and the CPU.
func bareRead(ctx context.Context, js jetstream.JetStream, last uint64) (time.Duration, time.Duration) {
	runtime.GC()
	a0 := allocated()
	defer func() { fmt.Printf("    the bare consumer allocated %d B a message\n", (allocated()-a0)/last) }()
	cpu0 := cpuTime()
	start := time.Now()
	cons, err := js.OrderedConsumer(ctx, wire.StreamName, jetstream.OrderedConsumerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	it, _ := cons.Messages(jetstream.PullMaxBytes(runner.PullBytes))
	for got := uint64(0); got < last; got++ {
		if _, err := it.Next(); err != nil {
			log.Fatal(err)
		}
	}
	it.Stop()
	return time.Since(start), cpuTime() - cpu0
}

// rebuild runs the engine's runner from nothing to the stream's last
// message and returns the time and the CPU; with first, it also writes
// the rebuild profile (if asked) and reports the projection's memory.
func rebuild(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, last uint64, first bool) (time.Duration, time.Duration) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if first && rebuildProfile != "" {
		f, err := os.Create(rebuildProfile)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(f)
	}
	a0 := allocated()
	cpu0 := cpuTime()
	start := time.Now()
	r, err := runner.New(ctx, js, stream, runner.Config{})
	if err != nil {
		log.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { r.Run(rctx); close(done) }()
	if err := r.WaitFor(ctx, last); err != nil {
		log.Fatal(err)
	}
	projT := time.Since(start)
	projCPU := cpuTime() - cpu0
	fmt.Printf("    the rebuild allocated %d B a message\n", (allocated()-a0)/last)
	if first && rebuildMemProfile != "" {
		f, err := os.Create(rebuildMemProfile)
		if err != nil {
			log.Fatal(err)
		}
		pprof.Lookup("allocs").WriteTo(f, 0)
		f.Close()
	}
	if first && rebuildProfile != "" {
		pprof.StopCPUProfile()
	}
	cancel()
	<-done
	if first {
		runtime.GC()
		runtime.ReadMemStats(&after)
		var artifacts int
		r.EachDeliberation(func(d *projector.Deliberation) { artifacts += d.Artifacts() })
		held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		fmt.Printf("  memory  %d artifacts in the projection: %d MB heap, %d bytes per artifact (goal <= 215)\n",
			artifacts, held>>20, held/int64(max(artifacts, 1)))
	}
	runtime.KeepAlive(r)
	return projT, projCPU
}

func concurrent(ctx context.Context, delibs, parts, per int) {
	dir := tempDir()
	defer os.RemoveAll(dir)
	s := benchkit.StartEngine(ctx, service.Config{DataDir: dir})
	defer s.Close()
	nc := benchkit.Connect(s.NATSURL(), s.Participant())
	defer nc.Close()
	orch, _ := client.New(nc, "orchestrator")
	ids := make([]string, delibs)
	for i := range ids {
		var err error
		if ids[i], err = orch.Open(ctx, client.Charter{Title: fmt.Sprintf("deliberation %d", i)}); err != nil {
			log.Fatal(err)
		}
	}
	// Each participant's artifacts, sealed ahead.
	work := make([][]*events.Artifact, parts)
	for p := range work {
		work[p] = claims(delibs*per, fmt.Sprintf("p%d", p))
	}
	start := time.Now()
	var wg sync.WaitGroup
	for p := 0; p < parts; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			nc, _ := nats.Connect(s.NATSURL(), s.Participant())
			defer nc.Close()
			c, _ := client.New(nc, fmt.Sprintf("p%d", p))
			for i, a := range work[p] {
				if _, err := c.PublishArtifactAsync(ids[i%delibs], a); err != nil {
					log.Fatal(err)
				}
			}
			<-c.PublishAsyncComplete()
		}(p)
	}
	wg.Wait()
	benchkit.WaitApplied(ctx, s)
	elapsed := time.Since(start)
	total := delibs * parts * per
	for _, id := range ids {
		v, err := s.Queries.Get(id)
		if err != nil || v.Artifacts != parts*per || len(v.Participants) != parts {
			log.Fatalf("deliberation %s: %+v %v", id, v, err)
		}
	}
	fmt.Printf("concurrency  %d deliberations x %d participants x %d artifacts = %d, all at once\n", delibs, parts, per, total)
	fmt.Printf("  accepted into projection         %9.0f msgs/s  (%s); every deliberation complete\n", float64(total)/elapsed.Seconds(), elapsed.Round(time.Millisecond))
}

// chainDelibs is how many deliberations fillChains spreads its artifacts
// over.
const chainDelibs = 100

// fillChains publishes m artifacts over chainDelibs deliberations, each
// opened with the charter title: in each, a chain of objections, each
// objecting to the one before (one reference per artifact).
func fillChains(js jetstream.JetStream, m int, title string) {
	for dnum := 0; dnum < chainDelibs; dnum++ {
		id := uuid.Must(uuid.NewV7()).String()
		if _, err := js.PublishAsync(wire.ControlSubject(id), []byte(`{"op":"open","charter":{"title":"`+title+`"}}`), jetstream.WithStallWait(30*time.Second)); err != nil {
			log.Fatal(err)
		}
		prev := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "root " + id}})
		js.PublishAsync(wire.ArtifactSubject(id, "p0"), prev.Canonical, jetstream.WithStallWait(30*time.Second))
		for i := 1; i < m/chainDelibs; i++ {
			a := events.MustSeal(events.Draft{Type: events.TypeObjection,
				Payload:    events.Objection{Statement: fmt.Sprintf("objection %d: the previous point does not hold for mixed workloads", i), Blocking: i%10 == 0},
				References: []events.Reference{{Target: prev.ID, Relation: events.ObjectsTo}}})
			if _, err := js.PublishAsync(wire.ArtifactSubject(id, fmt.Sprintf("p%d", i%10)), a.Canonical, jetstream.WithStallWait(30*time.Second)); err != nil {
				log.Fatal(err)
			}
			prev = a
		}
	}
	<-js.PublishAsyncComplete()
}

// ownedMemory fills a record of four streams with m artifacts over 100
// deliberations (the chains of objections of replay) and measures the
// projection heap of runners of every stream, beside runners of only
// some: what an engine that owns streams holds (engine serve
// --own-streams; three engines over four streams hold 2, 1 and 1). Each
// measure runs in a process of its own (this command, -fold-server), so
// that none sees another's heap.
func ownedMemory(ctx context.Context, m int) {
	dir := tempDir()
	defer os.RemoveAll(dir)
	// The server listens: each measure is a process of its own, whose
	// heap holds the runners and its connection, not the server's.
	srv, err := embedded.Start(embedded.Config{Dir: dir, Host: "127.0.0.1", Port: -1, Mappings: mappings()})
	if err != nil {
		log.Fatal(err)
	}
	defer embedded.Stop(srv)
	nc := benchkit.Connect(srv.ClientURL())
	defer nc.Close()
	js := benchkit.JetStream(nc, 4096)
	four, _ := ledger.PartitionedOver(4)
	streams, err := four.EnsureAll(ctx, js, 1)
	if err != nil {
		log.Fatal(err)
	}
	fillChains(js, m, "memory")
	var last []uint64
	for _, st := range streams {
		info, err := st.Info(ctx)
		if err != nil {
			log.Fatal(err)
		}
		last = append(last, info.State.LastSeq)
	}
	fmt.Printf("memory by ownership  %d artifacts over %d deliberations in four streams (messages a stream: %v), each measure in a process of its own\n", m, chainDelibs, last)
	measure := func(held string) (heap int64, artifacts int) {
		out, err := exec.Command(os.Args[0], "-fold-server", srv.ClientURL(), "-fold-streams", held).Output()
		if err != nil {
			log.Fatalf("fold %s: %v", held, err)
		}
		if _, err := fmt.Sscanf(string(out), "%d %d", &heap, &artifacts); err != nil {
			log.Fatalf("fold %s: %q", held, out)
		}
		return heap, artifacts
	}
	allHeap, allArts := measure("0,1,2,3")
	fmt.Printf("  one engine, every stream          %6.1f MB heap, %7d artifacts (%d B an artifact)\n", float64(allHeap)/(1<<20), allArts, allHeap/int64(max(allArts, 1)))
	for _, held := range []string{"0,1", "2", "3"} {
		h, a := measure(held)
		fmt.Printf("  an engine owning streams %-8s %6.1f MB heap, %7d artifacts: %.2f of the heap, %.2f of the artifacts\n",
			held, float64(h)/(1<<20), a, float64(h)/float64(max(allHeap, 1)), float64(a)/float64(max(allArts, 1)))
	}
}

func mappings() []embedded.Mapping {
	var ms []embedded.Mapping
	for _, mp := range partition.Mappings() {
		ms = append(ms, embedded.Mapping{From: mp.From, To: mp.To})
	}
	return ms
}

// foldHeld folds the streams of the record at the server url and prints
// the heap the runners hold and the artifacts they folded.
func foldHeld(ctx context.Context, url, held string) {
	nc := benchkit.Connect(url)
	js := benchkit.JetStream(nc, 4096)
	four, _ := ledger.PartitionedOver(4)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var rs []*runner.Runner
	for _, f := range strings.Split(held, ",") {
		k, _ := strconv.Atoi(f)
		st, err := js.Stream(ctx, four.StreamAt(k))
		if err != nil {
			log.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			log.Fatal(err)
		}
		r, err := runner.New(ctx, js, st, runner.Config{})
		if err != nil {
			log.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { r.Run(rctx); close(done) }()
		if err := r.WaitFor(ctx, four.Position(k, info.State.LastSeq)); err != nil {
			log.Fatal(err)
		}
		cancel()
		<-done
		rs = append(rs, r)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	artifacts := 0
	for _, r := range rs {
		r.EachDeliberation(func(d *projector.Deliberation) { artifacts += d.Artifacts() })
	}
	runtime.KeepAlive(rs)
	fmt.Printf("%d %d\n", int64(after.HeapAlloc)-int64(before.HeapAlloc), artifacts)
}
