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
// engine. Rounds alternate which of the two goes first.
//
//	go run ./bench/fleet -publishers 200 -n 1000 -runs 3
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/service"
)

func main() {
	publishers := flag.Int("publishers", 200, "publishers (each its own connection, client and deliberation)")
	n := flag.Int("n", 1000, "artifacts per publisher")
	runs := flag.Int("runs", 1, "rounds of raw + engine")
	readers := flag.Int("readers", 4, "concurrent HTTP readers during the engine load")
	readEvery := flag.Duration("read-every", 5*time.Millisecond, "pause between one reader's requests (0: none)")
	sample := flag.Duration("sample", 20*time.Millisecond, "lag sampling interval")
	short := flag.Bool("short", false, "small sizes for a quick check (20 publishers x 200)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the engine loads to this file")
	flag.Parse()
	if *short {
		*publishers, *n = 20, 200
	}
	ctx := context.Background()

	fmt.Printf("machine: %d CPUs, %s\n", runtime.NumCPU(), runtime.Version())
	w := newWork(*publishers, *n)
	fmt.Printf("fleet: %d publishers x %d artifacts = %d (~%d B each), async publish\n\n", *publishers, *n, *publishers**n, w.avgSize())

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
		var raw time.Duration
		var eng result
		engineRun := func() {
			runtime.GC()
			if prof != nil && r == 0 {
				pprof.StartCPUProfile(prof)
				defer pprof.StopCPUProfile()
			}
			eng = engineLoad(ctx, w, *readers, *readEvery, *sample)
		}
		rawRun := func() {
			runtime.GC()
			raw = rawLoad(ctx, w)
		}
		if r%2 == 0 {
			rawRun()
			engineRun()
		} else {
			engineRun()
			rawRun()
		}
		eng.raw = raw
		eng.print(r+1, w.total())
		results = append(results, eng)
	}
	if len(results) > 1 {
		summary(results, w.total())
	}
}

// work is every publisher's deliberation id and sealed artifacts of about
// 300 bytes: a chain in which each artifact after the first references the
// one before it (a CLAIM supports it, an OBJECTION objects to it).
type work struct {
	ids  []string
	arts [][]*events.Artifact
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

func tempDir() string {
	dir, err := os.MkdirTemp("", "parley-fleet-")
	if err != nil {
		log.Fatal(err)
	}
	return dir
}

// publishAll starts one goroutine per publisher, releases them together,
// and returns when every publish is acknowledged, with the time from the
// release. pub publishes publisher p's artifact i.
func publishAll(w *work, prepare func(p int) (pub func(i int) (jetstream.PubAckFuture, error), done func() <-chan struct{}, closeFn func())) time.Duration {
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
			for i := range w.arts[p] {
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
					log.Printf("publisher %d: %v", p, err)
					failed.Add(1)
				default:
				}
			}
		}()
	}
	ready.Wait()
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	if failed.Load() > 0 {
		log.Fatalf("%d publishes failed", failed.Load())
	}
	return elapsed
}

// rawLoad: the same messages (subjects, bodies, Msg-Id and expected-stream
// headers) to a fresh embedded server with the PARLEY stream, no engine.
func rawLoad(ctx context.Context, w *work) time.Duration {
	dir := tempDir()
	defer os.RemoveAll(dir)
	s, err := embedded.Start(embedded.Config{Dir: dir, Host: "127.0.0.1", Port: -1})
	if err != nil {
		log.Fatal(err)
	}
	defer embedded.Stop(s)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		log.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	if _, err := ledger.Ensure(ctx, js, 1); err != nil {
		log.Fatal(err)
	}
	for _, id := range w.ids {
		if _, err := js.Publish(ctx, projector.ControlSubject(id), []byte(`{"op":"open","charter":{"title":"fleet"}}`)); err != nil {
			log.Fatal(err)
		}
	}
	nc.Close()
	return publishAll(w, func(p int) (func(int) (jetstream.PubAckFuture, error), func() <-chan struct{}, func()) {
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			log.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		ids := ledger.NewMsgIDs()
		subject := projector.ArtifactSubject(w.ids[p], fmt.Sprintf("p%d", p))
		return func(i int) (jetstream.PubAckFuture, error) {
				a := w.arts[p][i]
				msg := &nats.Msg{Subject: subject, Data: a.Canonical, Header: nats.Header{}}
				return js.PublishMsgAsync(msg, jetstream.WithMsgID(ids.Artifact(subject, a.ID.String())),
					jetstream.WithExpectStream(ledger.StreamName), jetstream.WithStallWait(30*time.Second))
			}, js.PublishAsyncComplete, func() {
				nc.Close()
			}
	})
}

type result struct {
	raw, pub, proj   time.Duration
	peakLag          uint64
	peakAt           time.Duration
	samples          int
	reads            []time.Duration
	readErrs         int
	heapAfter        uint64
	projectionBefore time.Duration // catch-up of the opens, before the load
}

// engineLoad: the fleet through the client against an engine in process.
func engineLoad(ctx context.Context, w *work, readers int, readEvery, sample time.Duration) result {
	dir := tempDir()
	defer os.RemoveAll(dir)
	s, err := service.Start(ctx, service.Config{DataDir: dir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	nc, err := nats.Connect(s.NATSURL())
	if err != nil {
		log.Fatal(err)
	}
	orch, _ := client.New(nc, "orchestrator")
	for _, id := range w.ids {
		if err := orch.OpenID(ctx, id, client.Charter{Title: "fleet"}); err != nil {
			log.Fatal(err)
		}
	}
	nc.Close()
	var res result
	t := time.Now()
	waitAll(ctx, s)
	res.projectionBefore = time.Since(t)

	// The sampler: lag = the stream's last sequence - the runner's position.
	stop := make(chan struct{})
	var bg sync.WaitGroup
	var t0 time.Time
	var t0mu sync.Mutex
	bg.Add(1)
	go func() {
		defer bg.Done()
		tk := time.NewTicker(sample)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			info, err := s.Stream.Info(ctx)
			if err != nil {
				continue
			}
			pos := s.Runner.Position()
			res.samples++
			if last := info.State.LastSeq; last > pos && last-pos > res.peakLag {
				res.peakLag = last - pos
				t0mu.Lock()
				res.peakAt = time.Since(t0)
				t0mu.Unlock()
			}
		}
	}()
	// The readers: GET /api/v1/deliberations/{id} of random deliberations.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: readers}, Timeout: 30 * time.Second}
	base := "http://" + s.HTTPAddr() + "/api/v1/deliberations/"
	lat := make([][]time.Duration, readers)
	errs := make([]int, readers)
	for r := range readers {
		bg.Add(1)
		go func() {
			defer bg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 13))
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := w.ids[rng.IntN(len(w.ids))]
				q0 := time.Now()
				resp, err := hc.Get(base + id)
				if err != nil {
					errs[r]++
					continue
				}
				var v projector.View
				err = json.NewDecoder(resp.Body).Decode(&v)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || v.ID != id {
					errs[r]++
					continue
				}
				lat[r] = append(lat[r], time.Since(q0))
				if readEvery > 0 {
					time.Sleep(readEvery)
				}
			}
		}()
	}

	t0mu.Lock()
	t0 = time.Now()
	t0mu.Unlock()
	res.pub = publishAll(w, func(p int) (func(int) (jetstream.PubAckFuture, error), func() <-chan struct{}, func()) {
		nc, err := nats.Connect(s.NATSURL())
		if err != nil {
			log.Fatal(err)
		}
		c, err := client.New(nc, fmt.Sprintf("p%d", p))
		if err != nil {
			log.Fatal(err)
		}
		return func(i int) (jetstream.PubAckFuture, error) {
			return c.PublishArtifactAsync(w.ids[p], w.arts[p][i])
		}, c.PublishAsyncComplete, nc.Close
	})
	waitAll(ctx, s)
	res.proj = time.Since(t0)
	close(stop)
	bg.Wait()
	for r := range lat {
		res.reads = append(res.reads, lat[r]...)
		res.readErrs += errs[r]
	}
	for p, id := range w.ids {
		v, err := s.Queries.Get(id)
		if err != nil || v.Artifacts != len(w.arts[p]) {
			log.Fatalf("deliberation %s: %d of %d artifacts accepted (%v; %d rejections, %d pending)", id, v.Artifacts, len(w.arts[p]), err, v.Rejections, v.Pending)
		}
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.heapAfter = ms.HeapAlloc
	return res
}

// waitAll waits until the projection has applied the stream's last message.
func waitAll(ctx context.Context, s *service.Service) {
	info, err := s.Stream.Info(ctx)
	if err != nil {
		log.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := s.Runner.WaitFor(wctx, info.State.LastSeq); err != nil {
		log.Fatal(err)
	}
}

func pct(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func (r result) rates(total int) (raw, pub float64) {
	return float64(total) / r.raw.Seconds(), float64(total) / r.pub.Seconds()
}

func (r result) print(round, total int) {
	raw, pub := r.rates(total)
	fmt.Printf("round %d\n", round)
	fmt.Printf("  raw JetStream async publish, acknowledged   %9.0f msgs/s  (%s)\n", raw, r.raw.Round(time.Millisecond))
	fmt.Printf("  engine: client async publish, acknowledged  %9.0f msgs/s  (%s)\n", pub, r.pub.Round(time.Millisecond))
	fmt.Printf("  ratio engine/raw publish                    %9.2f\n", pub/raw)
	fmt.Printf("  projection has everything after             %9s  = %.2f x the publish time (goal <= 1.2)\n", r.proj.Round(time.Millisecond), r.proj.Seconds()/r.pub.Seconds())
	fmt.Printf("  peak projector lag                          %9d msgs  at %s (%d samples) = %.2f s of ingest (goal < 1)\n",
		r.peakLag, r.peakAt.Round(time.Millisecond), r.samples, float64(r.peakLag)/pub)
	fmt.Printf("  GET /deliberations/{id} during the load     p50 %s  p99 %s  max %s  (%d requests, %d errors; goal p99 <= 50 ms)\n",
		ms(pct(r.reads, 0.5)), ms(pct(r.reads, 0.99)), ms(pct(r.reads, 1)), len(r.reads), r.readErrs)
	fmt.Printf("  heap after the load                         %9d MB\n\n", r.heapAfter>>20)
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
	fmt.Printf("  ratio engine/raw publish                    %s\n", med(func(r result) float64 { raw, pub := r.rates(total); return pub / raw }))
	fmt.Printf("  projection time / publish time              %s\n", med(func(r result) float64 { return r.proj.Seconds() / r.pub.Seconds() }))
	fmt.Printf("  peak lag, seconds of ingest                 %s\n", med(func(r result) float64 { _, pub := r.rates(total); return float64(r.peakLag) / pub }))
	fmt.Printf("  peak lag, thousands of messages             %s\n", med(func(r result) float64 { return float64(r.peakLag) / 1000 }))
	fmt.Printf("  GET p99, ms                                 %s\n", med(func(r result) float64 { return float64(pct(r.reads, 0.99)) / 1e6 }))
	fmt.Printf("  raw publish, thousands of msgs/s            %s\n", med(func(r result) float64 { raw, _ := r.rates(total); return raw / 1000 }))
	fmt.Printf("  engine publish, thousands of msgs/s         %s\n", med(func(r result) float64 { _, pub := r.rates(total); return pub / 1000 }))
}
