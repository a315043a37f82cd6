// Command fleet loads the engine with a fleet of publishers, each with its
// own NATS connection, its own client and its own deliberation, publishing
// sealed artifacts asynchronously as fast as it can, and measures, in one
// run, beside raw JetStream async publish of the same messages:
//
//   - the acknowledged publish rate, engine / raw;
//   - the projector's lag (the stream's last sequence minus the position up
//     to which the projection has applied everything), sampled every
//     -sample: its peak, in messages and in seconds of ingest (peak / the
//     publish rate);
//   - the time until the projection has everything, against the publish
//     time;
//   - the latency of GET /api/v1/deliberations/{id} (random deliberations,
//     a few concurrent readers over HTTP) during the load.
//
// The engine is started in process (service.Start) on a temporary
// directory, its embedded server listening on loopback TCP; the baseline
// is a fresh embedded server with the same stream configuration and no
// engine. Rounds alternate which of the two goes first. The publishers run
// in the benchmark's process, beside the engine, unless -publisher-process
// puts them in a process of their own, as participants are;
// -reader-process does the same for the HTTP readers, and -server-process
// for the NATS server (the engine then connects to it as to an external
// server, as `engine serve --nats` does).
//
//	go run ./bench/fleet -publishers 200 -n 1000 -runs 3
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/benchkit"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

var timeline bool

// catchupProfile, when set, is where the first engine round writes a CPU
// profile of its catch-up alone: from the last publish acknowledged to the
// projection having everything.
var catchupProfile string

func main() {
	publishers := flag.Int("publishers", 200, "publishers (each its own connection, client and deliberation)")
	n := flag.Int("n", 1000, "artifacts per publisher")
	runs := flag.Int("runs", 1, "rounds of raw + engine")
	readers := flag.Int("readers", 4, "concurrent HTTP readers during the engine load")
	readEvery := flag.Duration("read-every", 5*time.Millisecond, "pause between one reader's requests (0: none)")
	pending := flag.Int("pending", client.DefaultAsyncMaxPending, "async publishes in flight per publisher (jetstream.WithPublishAsyncMaxPending; the client's default); the server's stream ingest queue holds 100,000 messages, past which it refuses publishes")
	paced := flag.Float64("rate", 0, "pace the publishers at this many messages per second in all (0: as fast as they can)")
	sample := flag.Duration("sample", 20*time.Millisecond, "lag sampling interval")
	flag.BoolVar(&timeline, "timeline", false, "print the lag every tenth sample")
	short := flag.Bool("short", false, "small sizes for a quick check (20 publishers x 200)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the engine loads to this file")
	flag.StringVar(&catchupProfile, "catchup-profile", "", "write a CPU profile of the first engine round's catch-up (publishing done to projection complete) to this file (not with -cpuprofile)")
	flag.BoolVar(&publisherProcess, "publisher-process", false, "run the publishers in a process of their own (as participants are), not in the engine's")
	flag.BoolVar(&readerProcess, "reader-process", false, "run the HTTP readers (and the bare HTTP server's reader) in a process of their own, as a browser or curl is, not in the engine's")
	child := flag.String("publish-child", "", "(internal) be the publisher process of -publisher-process, with the work in this file")
	readChild := flag.Bool("read-child", false, "(internal) be the reader process of -reader-process")
	flag.BoolVar(&serverProcess, "server-process", false, "run the NATS server in a process of its own (an embedded server, as the engine starts it), for the baselines and the engine alike; the engine connects to it as to an external server")
	serverChild := flag.String("server-child", "", "(internal) be the server process of -server-process, with its store in this directory")
	flag.Parse()
	if *child != "" {
		runChild(*child)
		return
	}
	if *readChild {
		runReadChild()
		return
	}
	if *serverChild != "" {
		runServerChild(*serverChild)
		return
	}
	if *short {
		*publishers, *n = 20, 200
	}
	ctx := context.Background()

	fmt.Println(benchkit.Machine())
	w := newWork(*publishers, *n)
	w.pending, w.rate = *pending, *paced
	pace := "as fast as they can"
	if *paced > 0 {
		pace = fmt.Sprintf("paced at %.0f msgs/s in all", *paced)
	}
	fmt.Printf("fleet: %d publishers x %d artifacts = %d (~%d B each), async publish %s, %d in flight per publisher\n\n",
		*publishers, *n, *publishers**n, w.avgSize(), pace, *pending)

	var prof *os.File
	if *cpuprofile != "" {
		var err error
		if prof, err = os.Create(*cpuprofile); err != nil {
			log.Fatal(err)
		}
		defer prof.Close()
	}
	var results []result
	for r := 0; r < *runs; r++ {
		var res result
		engineRun := func() {
			runtime.GC()
			if prof != nil && r == 0 {
				pprof.StartCPUProfile(prof)
				defer pprof.StopCPUProfile()
			}
			res = engineLoad(ctx, w, *readers, *readEvery, *sample)
		}
		// Run before or after the engine; res.raw* set once res is.
		var raw, rawc, rawcRead time.Duration
		var rawControl []time.Duration
		var rawLag *lag
		rawRuns := func() {
			runtime.GC()
			raw, _, _, _ = rawLoad(ctx, w, false, *sample, *readEvery)
			runtime.GC()
			rawc, rawcRead, rawLag, rawControl = rawLoad(ctx, w, true, *sample, *readEvery)
		}
		if r%2 == 0 {
			rawRuns()
			engineRun()
		} else {
			engineRun()
			rawRuns()
		}
		res.raw, res.rawc, res.rawcRead, res.rawLag, res.rawControl = raw, rawc, rawcRead, rawLag, rawControl
		res.print(r+1, w.total())
		results = append(results, res)
	}
	if len(results) > 1 {
		summary(results, w.total())
	}
}

// work is every publisher's deliberation id and sealed artifacts of about
// 300 bytes: a chain in which each artifact after the first references the
// one before it (a CLAIM supports it, an OBJECTION objects to it).
type work struct {
	ids     []string
	arts    [][]*events.Artifact
	pending int
	rate    float64 // total messages per second, spread over the publishers (0: as fast as possible)
}

func newWork(publishers, n int) *work {
	w := &work{ids: make([]string, publishers), arts: make([][]*events.Artifact, publishers)}
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := int(next.Add(1) - 1); p < publishers; p = int(next.Add(1) - 1) {
				w.ids[p] = uuid.Must(uuid.NewV7()).String()
				w.arts[p] = chain(n, p)
			}
		}()
	}
	wg.Wait()
	return w
}

func chain(n, p int) []*events.Artifact {
	out := make([]*events.Artifact, n)
	for i := range out {
		d := events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprintf("p%d: claim %d holds", p, i)}}
		if i > 0 {
			d.References = []events.Reference{{Target: out[i-1].ID, Relation: events.Supports}}
			if i%2 == 1 {
				d.Type, d.Payload = events.TypeObjection, events.Objection{Statement: fmt.Sprintf("p%d: not %d", p, i)}
				d.References[0].Relation = events.ObjectsTo
			}
		}
		out[i] = events.MustSeal(d)
	}
	return out
}

func (w *work) total() int { return len(w.ids) * len(w.arts[0]) }

func (w *work) avgSize() int {
	b := 0
	for _, as := range w.arts {
		for _, a := range as {
			b += len(a.Canonical)
		}
	}
	return b / w.total()
}

func tempDir() string { return benchkit.TempDir("parley-fleet-") }

// publishAll starts one goroutine per publisher, releases them together,
// and returns when every publish is acknowledged, with the time from the
// release (onStart is called just before it). pub publishes publisher p's
// artifact i.
func publishAll(w *work, onStart func(), prepare prepare) time.Duration {
	var ready, wg sync.WaitGroup
	start := make(chan struct{})
	var failed atomic.Int64
	for p := range w.ids {
		ready.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			pub, done, closeFn := prepare(p)
			defer closeFn()
			futures := make([]jetstream.PubAckFuture, len(w.arts[p]))
			ready.Done()
			<-start
			t0 := time.Now()
			for i := range w.arts[p] {
				if w.rate > 0 {
					// Paced: publisher p's i-th message is due at i / its share of the rate.
					if d := time.Until(t0.Add(time.Duration(float64(i) * float64(len(w.ids)) / w.rate * float64(time.Second)))); d > 0 {
						time.Sleep(d)
					}
				}
				f, err := pub(i)
				if err != nil {
					log.Fatal(err)
				}
				futures[i] = f
			}
			<-done()
			for _, f := range futures {
				select {
				case err := <-f.Err():
					if failed.Add(1) == 1 {
						log.Printf("publisher %d: %v", p, err)
					}
				default:
				}
			}
		}()
	}
	ready.Wait()
	onStart()
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	if failed.Load() > 0 {
		log.Fatalf("%d publishes failed", failed.Load())
	}
	return elapsed
}

// lag samples the stream's last sequence minus a consumer's position
// every interval until stop is closed.
type lag struct {
	peak    uint64
	peakAt  time.Duration
	samples int
	t0      atomic.Pointer[time.Time]
	done    chan struct{}
}

func sampleLag(ctx context.Context, stream jetstream.Stream, pos func() uint64, every time.Duration, stop <-chan struct{}, applied func() int) *lag {
	l := &lag{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			info, err := stream.Info(ctx)
			if err != nil {
				continue
			}
			p := pos()
			t0 := l.t0.Load()
			if t0 == nil {
				continue
			}
			l.samples++
			last := info.State.LastSeq
			if last > p && last-p > l.peak {
				l.peak, l.peakAt = last-p, time.Since(*t0)
			}
			if timeline && l.samples%10 == 0 {
				line := fmt.Sprintf("    %6s  last %7d  position %7d  lag %7d", time.Since(*t0).Round(time.Millisecond), last, p, last-min(p, last))
				if applied != nil {
					line += fmt.Sprintf("  artifacts applied %7d", applied())
				}
				fmt.Println(line)
			}
		}
	}()
	return l
}

func (l *lag) start() { t := time.Now(); l.t0.Store(&t) }

// rawLoad: the same messages (subjects, bodies, Msg-Id and expected-stream
// headers) to a fresh embedded server with the PARLEY stream, no engine.
// With consume, a bare ordered consumer (over an in-process connection,
// configured as the engine's runner configures its own) reads the stream
// meanwhile, and its lag is sampled as the engine's is.
func rawLoad(ctx context.Context, w *work, consume bool, sample, readEvery time.Duration) (time.Duration, time.Duration, *lag, []time.Duration) {
	dir := tempDir()
	defer os.RemoveAll(dir)
	s := startServer(dir)
	defer s.stop()
	nc, err := s.connect()
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream, err := ledger.Ensure(ctx, js, 1)
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range w.ids {
		if _, err := js.Publish(ctx, wire.ControlSubject(id), []byte(`{"op":"open","charter":{"title":"fleet"}}`)); err != nil {
			log.Fatal(err)
		}
	}
	last := uint64(len(w.ids) + w.total())
	var consumed atomic.Uint64
	stop := make(chan struct{})
	caught := make(chan time.Time, 1)
	var l *lag
	if consume {
		cons, err := js.OrderedConsumer(ctx, wire.StreamName, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
		if err != nil {
			log.Fatal(err)
		}
		it, err := cons.Messages(jetstream.PullMaxBytes(runner.PullBytes))
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			defer it.Stop()
			for {
				msg, err := it.Next()
				if err != nil {
					log.Fatal(err)
				}
				meta, err := msg.Metadata()
				if err != nil {
					log.Fatal(err)
				}
				consumed.Store(meta.Sequence.Stream)
				if meta.Sequence.Stream == last {
					caught <- time.Now()
					return
				}
			}
		}()
		for consumed.Load() < uint64(len(w.ids)) {
			time.Sleep(time.Millisecond)
		}
		l = sampleLag(ctx, stream, consumed.Load, sample, stop, nil)
	}
	// With the consumer, the control of the engine load: GET of a constant
	// from a bare HTTP server in this process (the consumer's, as the
	// engine's process holds its bare server), read from where the engine
	// load reads it.
	var control []time.Duration
	var rp *readerProc
	readersDone := make(chan struct{})
	if consume {
		ctl, err := controlServer()
		if err != nil {
			log.Fatal(err)
		}
		defer ctl.Close()
		url := "http://" + ctl.Addr().String() + "/"
		if readerProcess {
			rp = startReaders(readJob{Control: url, IDs: w.ids, Every: readEvery})
			close(readersDone)
		} else {
			hc := &http.Client{Timeout: 30 * time.Second}
			go func() {
				defer close(readersDone)
				for {
					select {
					case <-stop:
						return
					default:
					}
					q0 := time.Now()
					if err := get(hc, url, nil); err == nil && l.t0.Load() != nil {
						control = append(control, time.Since(q0))
					}
					if readEvery > 0 {
						time.Sleep(readEvery)
					}
				}
			}()
		}
	}
	var t0 time.Time
	onStart := func() {
		t0 = time.Now()
		if l != nil {
			l.start()
		}
		if rp != nil {
			rp.say("start")
		}
	}
	var pub time.Duration
	if publisherProcess {
		pub = publishOut(w, s.url, true, onStart)
	} else {
		pub = publishAll(w, onStart, rawPublisher(w, s.url))
	}
	if !consume {
		return pub, 0, nil, nil
	}
	done := <-caught
	close(stop)
	<-l.done
	<-readersDone
	if rp != nil {
		control = rp.finish().Control
	}
	return pub, done.Sub(t0), l, control
}

// prepare connects publisher p to url and returns its publish function,
// what waits for its acknowledgements and its close, as publishAll takes
// them.
type prepare func(p int) (func(int) (jetstream.PubAckFuture, error), func() <-chan struct{}, func())

// rawPublisher publishes w's artifacts with raw JetStream async publish
// (the same subjects and Msg-Ids as the client).
func rawPublisher(w *work, url string) prepare {
	return func(p int) (func(int) (jetstream.PubAckFuture, error), func() <-chan struct{}, func()) {
		nc := benchkit.Connect(url)
		js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(w.pending))
		ids := wire.NewMsgIDs()
		subject := wire.ArtifactSubject(w.ids[p], fmt.Sprintf("p%d", p))
		return func(i int) (jetstream.PubAckFuture, error) {
			a := w.arts[p][i]
			msg := &nats.Msg{Subject: subject, Data: a.Canonical, Header: nats.Header{}}
			return js.PublishMsgAsync(msg, jetstream.WithMsgID(ids.Artifact(subject, a.ID.String())),
				jetstream.WithExpectStream(wire.StreamName), jetstream.WithStallWait(30*time.Second))
		}, js.PublishAsyncComplete, nc.Close
	}
}

// clientPublisher publishes w's artifacts through the client.
func clientPublisher(w *work, url string) prepare {
	return func(p int) (func(int) (jetstream.PubAckFuture, error), func() <-chan struct{}, func()) {
		nc := benchkit.Connect(url)
		c, err := client.New(nc, fmt.Sprintf("p%d", p), jetstream.WithPublishAsyncMaxPending(w.pending))
		if err != nil {
			log.Fatal(err)
		}
		return func(i int) (jetstream.PubAckFuture, error) {
			return c.PublishArtifactAsync(w.ids[p], w.arts[p][i])
		}, c.PublishAsyncComplete, nc.Close
	}
}

type result struct {
	raw, rawc, rawcRead time.Duration // raw publish; raw publish with a bare consumer, and the consumer's time to read everything
	rawLag              *lag
	rawControl          []time.Duration // GET of a constant from a bare HTTP server during the raw load with the bare consumer
	pub, proj           time.Duration
	lag                 *lag
	reads               []time.Duration // GET /api/v1/deliberations/{id}
	inProcess, control  []time.Duration // Queries.Get in process; GET of a constant from a bare HTTP server
	readErrs            int
}

// engineLoad: the fleet through the client against an engine in process.
func engineLoad(ctx context.Context, w *work, readers int, readEvery, sample time.Duration) result {
	dir := tempDir()
	defer os.RemoveAll(dir)
	cfg := service.Config{DataDir: dir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"}
	if serverProcess {
		ns := startServer(filepath.Join(dir, "nats"))
		defer ns.stop()
		cfg.NATS = ns.url
	}
	s := benchkit.StartEngine(ctx, cfg)
	defer s.Close()
	nc := benchkit.Connect(s.NATSURL())
	orch, _ := client.New(nc, "orchestrator")
	for _, id := range w.ids {
		if err := orch.OpenID(ctx, id, client.Charter{Title: "fleet"}); err != nil {
			log.Fatal(err)
		}
	}
	nc.Close()
	benchkit.WaitApplied(ctx, s)

	var res result
	stop := make(chan struct{})
	var applied func() int
	if timeline {
		applied = func() int {
			n := 0
			s.Runner.EachDeliberation(func(d *projector.Deliberation) { n += d.Artifacts() })
			return n
		}
	}
	res.lag = sampleLag(ctx, s.Stream, s.Runner.Position, sample, stop, applied)
	// The readers: GET /api/v1/deliberations/{id} of random deliberations;
	// beside them, two controls at the same pace: Queries.Get called in
	// process (the engine's read without HTTP), and GET of a constant from a
	// bare HTTP server in this process (HTTP and scheduling without the
	// engine's read).
	ctl, err := controlServer()
	if err != nil {
		log.Fatal(err)
	}
	defer ctl.Close()
	var readersDone sync.WaitGroup
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: readers + 1}, Timeout: 30 * time.Second}
	base := "http://" + s.HTTPAddr() + "/api/v1/deliberations/"
	lat := make([][]time.Duration, readers+2)
	errs := make([]int, readers+2)
	var rp *readerProc
	if readerProcess {
		rp = startReaders(readJob{Base: base, Control: "http://" + ctl.Addr().String() + "/", IDs: w.ids, Readers: readers, Every: readEvery})
	}
	for r := range readers + 2 {
		if rp != nil && r != readers {
			continue // in the reader process
		}
		readersDone.Add(1)
		go func() {
			defer readersDone.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 13))
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := w.ids[rng.IntN(len(w.ids))]
				q0 := time.Now()
				var err error
				switch r {
				case readers: // in process
					var v api.View
					if v, err = s.Queries.Get(id); err == nil && v.ID != id {
						err = errors.New("another deliberation")
					}
				case readers + 1: // the control server
					err = get(hc, "http://"+ctl.Addr().String()+"/", nil)
				default:
					var v api.View
					if err = get(hc, base+id, &v); err == nil && v.ID != id {
						err = errors.New("another deliberation")
					}
				}
				if err != nil {
					errs[r]++
					continue
				}
				if res.lag.t0.Load() != nil {
					lat[r] = append(lat[r], time.Since(q0))
				}
				if readEvery > 0 {
					time.Sleep(readEvery)
				}
			}
		}()
	}

	var t0 time.Time
	onStart := func() {
		t0 = time.Now()
		res.lag.start()
		if rp != nil {
			rp.say("start")
		}
	}
	if publisherProcess {
		res.pub = publishOut(w, s.NATSURL(), false, onStart)
	} else {
		res.pub = publishAll(w, onStart, clientPublisher(w, s.NATSURL()))
	}
	stopProfile := func() {}
	if catchupProfile != "" {
		f, err := os.Create(catchupProfile)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		catchupProfile = "" // the first round only
		stopProfile = func() { pprof.StopCPUProfile(); f.Close() }
	}
	benchkit.WaitApplied(ctx, s)
	res.proj = time.Since(t0)
	stopProfile()
	close(stop)
	<-res.lag.done
	readersDone.Wait()
	for r := range readers {
		res.reads = append(res.reads, lat[r]...)
		res.readErrs += errs[r]
	}
	res.inProcess, res.control = lat[readers], lat[readers+1]
	res.readErrs += errs[readers] + errs[readers+1]
	if rp != nil {
		out := rp.finish()
		res.reads, res.control = out.Reads, out.Control
		res.readErrs += out.Errors
	}
	for p, id := range w.ids {
		v, err := s.Queries.Get(id)
		if err != nil || v.Artifacts != len(w.arts[p]) {
			log.Fatalf("deliberation %s: %d of %d artifacts accepted (%v; %d rejections)", id, v.Artifacts, len(w.arts[p]), err, v.Rejections)
		}
	}
	return res
}

// get GETs url and decodes its JSON body into v (nil: discards it).
func get(hc *http.Client, url string, v any) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			return err
		}
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// controlServer serves a constant over HTTP on loopback.
func controlServer() (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	return ln, nil
}

// waitAll waits until the projection has applied the stream's last message.
func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func rate(total int, d time.Duration) float64 { return float64(total) / d.Seconds() }

func (r result) print(round, total int) {
	raw, rawc, pub := rate(total, r.raw), rate(total, r.rawc), rate(total, r.pub)
	fmt.Printf("round %d\n", round)
	fmt.Printf("  raw JetStream async publish, acknowledged   %9.0f msgs/s  (%s)\n", raw, r.raw.Round(time.Millisecond))
	fmt.Printf("    with a bare ordered consumer reading      %9.0f msgs/s  (%s); the consumer has everything after %s = %.2f x; peak lag %d msgs = %.2f s of ingest\n",
		rawc, r.rawc.Round(time.Millisecond), r.rawcRead.Round(time.Millisecond), r.rawcRead.Seconds()/r.rawc.Seconds(), r.rawLag.peak, float64(r.rawLag.peak)/rawc)
	fmt.Printf("  engine: client async publish, acknowledged  %9.0f msgs/s  (%s)\n", pub, r.pub.Round(time.Millisecond))
	fmt.Printf("  ratio engine/raw publish                    %9.2f\n", pub/raw)
	fmt.Printf("  projection has everything after             %9s  = %.2f x the publish time (goal <= 1.2)\n", r.proj.Round(time.Millisecond), r.proj.Seconds()/r.pub.Seconds())
	fmt.Printf("  accepted into the projection                %9.0f msgs/s = %.2f of raw publish (the bare consumer: %.0f msgs/s = %.2f)\n",
		rate(total, r.proj), rate(total, r.proj)/raw, rate(total, r.rawcRead), rate(total, r.rawcRead)/raw)
	fmt.Printf("  peak projector lag                          %9d msgs  at %s (%d samples) = %.2f s of ingest (goal < 1)\n",
		r.lag.peak, r.lag.peakAt.Round(time.Millisecond), r.lag.samples, float64(r.lag.peak)/pub)
	fmt.Printf("  GET /deliberations/{id} during the load     p50 %s  p99 %s  max %s  (%d requests, %d errors in all; goal p99 <= 50 ms)\n",
		ms(benchkit.Quantile(r.reads, 0.5)), ms(benchkit.Quantile(r.reads, 0.99)), ms(benchkit.Quantile(r.reads, 1)), len(r.reads), r.readErrs)
	fmt.Printf("    Queries.Get in process                    p50 %s  p99 %s  max %s  (%d)\n",
		ms(benchkit.Quantile(r.inProcess, 0.5)), ms(benchkit.Quantile(r.inProcess, 0.99)), ms(benchkit.Quantile(r.inProcess, 1)), len(r.inProcess))
	fmt.Printf("    GET of a constant from a bare HTTP server p50 %s  p99 %s  max %s  (%d)\n",
		ms(benchkit.Quantile(r.control, 0.5)), ms(benchkit.Quantile(r.control, 0.99)), ms(benchkit.Quantile(r.control, 1)), len(r.control))
	fmt.Printf("    the same during the raw load and its bare consumer, no engine: p50 %s  p99 %s  max %s  (%d)\n\n",
		ms(benchkit.Quantile(r.rawControl, 0.5)), ms(benchkit.Quantile(r.rawControl, 0.99)), ms(benchkit.Quantile(r.rawControl, 1)), len(r.rawControl))
}

func summary(rs []result, total int) {
	med := func(f func(result) float64) string {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return fmt.Sprintf("%.2f (%.2f-%.2f)", v[len(v)/2], v[0], v[len(v)-1])
	}
	fmt.Printf("median (range) of %d rounds\n", len(rs))
	fmt.Printf("  ratio engine/raw publish                    %s\n", med(func(r result) float64 { return rate(total, r.pub) / rate(total, r.raw) }))
	fmt.Printf("  accepted into the projection / raw publish  %s\n", med(func(r result) float64 { return rate(total, r.proj) / rate(total, r.raw) }))
	fmt.Printf("  bare consumer read / raw publish            %s\n", med(func(r result) float64 { return rate(total, r.rawcRead) / rate(total, r.raw) }))
	fmt.Printf("  projection time / publish time              %s\n", med(func(r result) float64 { return r.proj.Seconds() / r.pub.Seconds() }))
	fmt.Printf("  peak lag, seconds of ingest                 %s\n", med(func(r result) float64 { return float64(r.lag.peak) / rate(total, r.pub) }))
	fmt.Printf("  peak lag, thousands of messages             %s\n", med(func(r result) float64 { return float64(r.lag.peak) / 1000 }))
	fmt.Printf("  GET p50, ms                                 %s\n", med(func(r result) float64 { return float64(benchkit.Quantile(r.reads, 0.5)) / 1e6 }))
	fmt.Printf("  GET p99, ms                                 %s\n", med(func(r result) float64 { return float64(benchkit.Quantile(r.reads, 0.99)) / 1e6 }))
	fmt.Printf("  GET max, ms                                 %s\n", med(func(r result) float64 { return float64(benchkit.Quantile(r.reads, 1)) / 1e6 }))
	fmt.Printf("  Queries.Get in process p99, ms              %s\n", med(func(r result) float64 { return float64(benchkit.Quantile(r.inProcess, 0.99)) / 1e6 }))
	fmt.Printf("  bare HTTP server p99, ms                    %s\n", med(func(r result) float64 { return float64(benchkit.Quantile(r.control, 0.99)) / 1e6 }))
	fmt.Printf("  the same, raw load, no engine, p99, ms      %s\n", med(func(r result) float64 { return float64(benchkit.Quantile(r.rawControl, 0.99)) / 1e6 }))
	fmt.Printf("  raw publish, thousands of msgs/s            %s\n", med(func(r result) float64 { return rate(total, r.raw) / 1000 }))
	fmt.Printf("  engine publish, thousands of msgs/s         %s\n", med(func(r result) float64 { return rate(total, r.pub) / 1000 }))
	fmt.Printf("  bare consumer: read time / publish time     %s\n", med(func(r result) float64 { return r.rawcRead.Seconds() / r.rawc.Seconds() }))
	fmt.Printf("  bare consumer: peak lag, seconds of ingest  %s\n", med(func(r result) float64 { return float64(r.rawLag.peak) / rate(total, r.rawc) }))
}
