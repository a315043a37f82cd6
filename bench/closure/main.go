// Command closure measures ingest into some deliberations while another
// deliberation's decision, over a million artifacts, is verified again and
// again through the API, against the same ingest with no verification
// running, in alternating windows of one run:
//
//   - the big deliberation: a DAG of -m artifacts in layers 1,000 wide, each
//     CLAIM supporting two of the layer below, one artifact in 1,000 a
//     blocking OBJECTION to one below; a final DECISION decides the top
//     layer and disposes of every objection, so that its verification walks
//     the whole DAG and finds every objection by the fixpoint (the shape of
//     the closure package's benchmark);
//
//   - the others: -k publishers, each its own connection, client and
//     deliberation, half of the deliberations on the big one's shard and half
//     elsewhere, publishing at -rate in all (0: as fast as the projection
//     takes them, with at most -cap artifacts published and not yet
//     applied);
//
//   - two probes (one deliberation on the big one's shard, one elsewhere)
//     publish one artifact every -probe-every and wait until the projection
//     has applied it (Runner.WaitForIn): the latency of ingest;
//
//   - windows: "quiet" (nothing else), "verify" (the big decision's closure
//     verified through the HTTP API back to back), and "spin" (a goroutine
//     busy on one core, a control for the CPU a verification takes from the
//     others), in turn, -cycles times.
//
//     go run ./bench/closure -m 1000000 -cycles 4
package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/benchkit"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

const width = 1000

func main() {
	m := flag.Int("m", 1000000, "artifacts in the big deliberation")
	k := flag.Int("k", 8, "publishers into other deliberations (half on the big one's shard)")
	rate := flag.Float64("rate", 10000, "their publish rate in all, messages per second (0: as fast as the projection takes them)")
	lagCap := flag.Int("cap", 20000, "with -rate 0: artifacts published and not yet applied, at most, in all")
	window := flag.Duration("window", 3*time.Second, "length of a window")
	cycles := flag.Int("cycles", 4, "rounds of quiet, verify and spin windows")
	probeEvery := flag.Duration("probe-every", 10*time.Millisecond, "interval between a probe's artifacts")
	snapEvery := flag.Duration("snapshot-every", 30*time.Second, "the engine's snapshot interval (its default: 30 s)")
	verbose := flag.Bool("v", false, "print every window")
	short := flag.Bool("short", false, "small sizes for a quick check (-m 50000, -cycles 1, 1 s windows)")
	flag.Parse()
	if *short {
		*m, *cycles, *window = 50000, 1, time.Second
	}
	ctx := context.Background()
	fmt.Println(benchkit.Machine())

	dir := benchkit.TempDir("parley-closure-")
	defer os.RemoveAll(dir)
	s := benchkit.StartEngine(ctx, service.Config{DataDir: dir, SnapshotEvery: *snapEvery})
	defer s.Close()

	big, decision := fill(ctx, s, *m)
	bigShard := shardOf(big)

	// The other deliberations: half on the big one's shard.
	ids := make([]string, *k)
	for i := range ids {
		ids[i] = idOn(bigShard, i%2 == 0)
	}
	probes := [2]string{idOn(bigShard, true), idOn(bigShard, false)}
	nc := benchkit.Connect(s.NATSURL(), s.Participant())
	orch, _ := client.New(nc, "orchestrator")
	for _, id := range append(slices.Clone(ids), probes[:]...) {
		if err := orch.OpenID(ctx, id, client.Charter{Title: "elsewhere"}); err != nil {
			log.Fatal(err)
		}
	}
	nc.Close()
	benchkit.WaitApplied(ctx, s)

	hc := &http.Client{Timeout: time.Minute}
	closureURL := "http://" + s.HTTPAddr() + "/api/v1/deliberations/" + big + "/closure/" + decision.String()
	verify := func() (time.Duration, closure.Result) {
		t := time.Now()
		resp, err := hc.Get(closureURL)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		var r closure.Result
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			log.Fatal(err)
		}
		return time.Since(t), r
	}
	d, r := verify()
	if !r.OK || r.ClosureSize < *m {
		log.Fatalf("the big decision does not verify over the whole DAG: ok=%v size=%d %+v", r.OK, r.ClosureSize, r.Findings)
	}
	fmt.Printf("  one verification alone, through the API: %s (audited set %d)\n\n", d.Round(time.Millisecond), r.ClosureSize)

	// The load: publishers and probes, until stop.
	stop := make(chan struct{})
	var load sync.WaitGroup
	var published atomic.Int64
	for i, id := range ids {
		load.Add(1)
		go func() {
			defer load.Done()
			publish(ctx, s, id, fmt.Sprintf("p%d", i), *rate/float64(len(ids)), *lagCap/len(ids), stop, &published)
		}()
	}
	var probeMu sync.Mutex
	kind := "warm-up"
	// Per kind of window: each probe's latency (publish to applied), and
	// both probes' publish-to-acknowledgement part.
	probeLat := map[string]*[3][]time.Duration{}
	for j, id := range probes {
		load.Add(1)
		go func() {
			defer load.Done()
			nc := benchkit.Connect(s.NATSURL(), s.Participant())
			defer nc.Close()
			c, _ := client.New(nc, "probe")
			var prev *events.Artifact
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(*probeEvery):
				}
				a := next(prev, "probe", i)
				prev = a
				t := time.Now()
				ack, err := c.PublishArtifact(ctx, id, a)
				if err != nil {
					log.Fatal(err)
				}
				acked := time.Now()
				if err := s.Runner.WaitForIn(ctx, id, ack.Sequence); err != nil {
					log.Fatal(err)
				}
				lat, ackLat := time.Since(t), acked.Sub(t)
				probeMu.Lock()
				if probeLat[kind] == nil {
					probeLat[kind] = &[3][]time.Duration{}
				}
				probeLat[kind][j] = append(probeLat[kind][j], lat)
				probeLat[kind][2] = append(probeLat[kind][2], ackLat)
				probeMu.Unlock()
			}
		}()
	}
	applied := func() int {
		n := 0
		for _, id := range ids {
			s.Runner.ReadDeliberation(id, func(d *projector.Deliberation) { n += d.Artifacts() })
		}
		return n
	}
	stalls := monitor(s, dir, stop, *verbose)
	time.Sleep(*window) // warm-up

	type win struct {
		kind     string
		dur      time.Duration
		accepted int
		gcs      uint32
	}
	numGC := func() uint32 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.NumGC
	}
	var wins []win
	var verifications []time.Duration
	for c := 0; c < *cycles; c++ {
		for _, kd := range []string{"quiet", "verify", "spin"} {
			probeMu.Lock()
			kind = kd
			probeMu.Unlock()
			a0, g0, t0 := applied(), numGC(), time.Now()
			switch kd {
			case "quiet":
				time.Sleep(*window)
			case "verify":
				for time.Since(t0) < *window {
					d, r := verify()
					if !r.OK {
						log.Fatalf("verification failed: %+v", r.Findings)
					}
					verifications = append(verifications, d)
				}
			case "spin":
				spin(*window)
			}
			w := win{kd, time.Since(t0), applied() - a0, numGC() - g0}
			wins = append(wins, w)
			if *verbose {
				fmt.Printf("    %-7s %6s  %6.0f msgs/s accepted elsewhere  %d GC cycles\n", kd, w.dur.Round(time.Millisecond), float64(w.accepted)/w.dur.Seconds(), w.gcs)
			}
		}
	}
	probeMu.Lock()
	kind = "cool-down"
	probeMu.Unlock()
	close(stop)
	load.Wait()
	st := <-stalls

	fmt.Printf("windows of %s, %d cycles; %d publishers into other deliberations (%s), %d published in all\n",
		*window, *cycles, len(ids), paceOf(*rate, *lagCap), published.Load())
	fmt.Printf("  verifications of the big decision during the verify windows: %d, median %s (%s-%s)\n\n",
		len(verifications), benchkit.Median(verifications).Round(time.Millisecond), slices.Min(verifications).Round(time.Millisecond), slices.Max(verifications).Round(time.Millisecond))
	fmt.Printf("  %-7s %-28s %-28s %-28s %-28s %s\n", "window", "accepted elsewhere, msgs/s", "probe, big's shard", "probe, other shards", "of which publish to ack", "GC cycles/s")
	rates := map[string][]float64{}
	gcs, durs := map[string]float64{}, map[string]time.Duration{}
	for _, w := range wins {
		rates[w.kind] = append(rates[w.kind], float64(w.accepted)/w.dur.Seconds())
		gcs[w.kind] += float64(w.gcs)
		durs[w.kind] += w.dur
	}
	for _, kd := range []string{"quiet", "verify", "spin"} {
		rs := rates[kd]
		slices.Sort(rs)
		pl := probeLat[kd]
		if pl == nil {
			pl = &[3][]time.Duration{}
		}
		fmt.Printf("  %-7s %-28s %-28s %-28s %-28s %.1f\n", kd, fmt.Sprintf("%.0f (%.0f-%.0f)", rs[len(rs)/2], rs[0], rs[len(rs)-1]), lats(pl[0]), lats(pl[1]), lats(pl[2]), gcs[kd]/durs[kd].Seconds())
	}
	q, v := rates["quiet"], rates["verify"]
	fmt.Printf("\n  accepted elsewhere, verify / quiet (medians): %.2f; spin / quiet: %.2f\n", benchkit.Median(v)/benchkit.Median(q), benchkit.Median(rates["spin"])/benchkit.Median(q))
	fmt.Println("  (rates: median (range) over the windows; latencies in ms: p50 / p99 / max over every probe artifact of the windows)")
	fmt.Printf("\n  the projection stood still (its position unchanged for 250 ms or more, with messages waiting) %d times, %s in all; %d of them while a shard's snapshot was written (%s); shard snapshots seen being written: %d\n",
		st.n, st.total.Round(time.Millisecond), st.nSnap, st.snapTotal.Round(time.Millisecond), st.snapshots)
}

type stallStats struct {
	n, nSnap         int
	total, snapTotal time.Duration
	snapshots        int
}

// monitor samples the runner's position every 10 ms until stop and reports
// the stalls: the position unchanged for 250 ms or more while the stream
// holds messages after it. A stall overlaps a snapshot when a shard's
// snapshot temporary file was present during it (the runner writes each
// shard's snapshot to a temporary file in the data directory, then renames
// it).
func monitor(s *service.Service, dir string, stop <-chan struct{}, verbose bool) <-chan stallStats {
	out := make(chan stallStats, 1)
	go func() {
		var st stallStats
		var since time.Time
		var at uint64
		snapDuring := false
		seen := map[string]bool{}
		t0 := time.Now()
		end := func(now time.Time) {
			if !since.IsZero() {
				if d := now.Sub(since); d >= 250*time.Millisecond {
					st.n++
					st.total += d
					if snapDuring {
						st.nSnap++
						st.snapTotal += d
					}
					if verbose {
						fmt.Printf("      stall at %s for %s (snapshot being written: %v)\n", since.Sub(t0).Round(time.Millisecond), d.Round(time.Millisecond), snapDuring)
					}
				}
			}
			since, snapDuring = time.Time{}, false
		}
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				end(time.Now())
				out <- st
				return
			case <-tk.C:
			}
			tmps, _ := filepath.Glob(filepath.Join(dir, ".snapshot-*"))
			for _, t := range tmps {
				if !seen[t] {
					seen[t] = true
					st.snapshots++
				}
			}
			writing := len(tmps) > 0
			pos, now := s.Runner.Position(), time.Now()
			if pos != at {
				end(now)
				at = pos
				continue
			}
			if since.IsZero() {
				info, err := s.Stream.Info(context.Background())
				if err != nil || info.State.LastSeq <= pos {
					continue
				}
				since = now
			}
			snapDuring = snapDuring || writing
		}
	}()
	return out
}

func paceOf(rate float64, lagCap int) string {
	if rate > 0 {
		return fmt.Sprintf("paced at %.0f msgs/s in all", rate)
	}
	return fmt.Sprintf("as fast as the projection takes them, at most %d ahead", lagCap)
}

func lats(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	f := func(q float64) string {
		return fmt.Sprintf("%.1f", float64(benchkit.Quantile(d, q))/1e6)
	}
	return f(0.5) + " / " + f(0.99) + " / " + f(1)
}

func spin(d time.Duration) {
	var b [32]byte
	for t := time.Now(); time.Since(t) < d; {
		for range 1000 {
			b = sha256.Sum256(b[:])
		}
	}
}

// shardOf is the runner's shard of a deliberation: FNV-1a of its id modulo
// the number of shards (runner.Runner's shardOf, which is not exported;
// used here only to place the other deliberations).
func shardOf(id string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return h.Sum32() % runner.DefaultShards
}

// idOn returns a new deliberation id on shard (same) or off it.
func idOn(shard uint32, same bool) string {
	for {
		id := uuid.Must(uuid.NewV7()).String()
		if (shardOf(id) == shard) == same {
			return id
		}
	}
}

// next seals the artifact after prev in a publisher's chain (about 300
// bytes): a CLAIM supporting prev, or an OBJECTION to it.
func next(prev *events.Artifact, who string, i int) *events.Artifact {
	d := events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprintf("%s: claim %d holds", who, i)}}
	if prev != nil {
		d.References = []events.Reference{{Target: prev.ID, Relation: events.Supports}}
		if i%2 == 1 {
			d.Type, d.Payload = events.TypeObjection, events.Objection{Statement: fmt.Sprintf("%s: not %d", who, i)}
			d.References[0].Relation = events.ObjectsTo
		}
	}
	return events.MustSeal(d)
}

// publish seals and publishes a chain into deliberation id until stop:
// paced at rate, or (rate 0) as fast as the projection applies them, with
// at most lagCap published and not yet applied.
func publish(ctx context.Context, s *service.Service, id, who string, rate float64, lagCap int, stop <-chan struct{}, published *atomic.Int64) {
	nc := benchkit.Connect(s.NATSURL(), s.Participant())
	defer nc.Close()
	c, _ := client.New(nc, who, jetstream.WithPublishAsyncMaxPending(1024))
	var prev *events.Artifact
	t0, i0 := time.Now(), 0
	for i := 0; ; i++ {
		select {
		case <-stop:
			<-c.PublishAsyncComplete()
			return
		default:
		}
		if rate > 0 {
			// Paced; a publisher that fell behind does not catch up in a
			// burst, it goes on at the rate from where it is.
			due := t0.Add(time.Duration(float64(i-i0) / rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			} else if d < -50*time.Millisecond {
				t0, i0 = time.Now(), i
			}
		} else if i%64 == 0 {
			for {
				n := 0
				s.Runner.ReadDeliberation(id, func(d *projector.Deliberation) { n = d.Artifacts() })
				if i-n <= lagCap {
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
		a := next(prev, who, i)
		prev = a
		if _, err := c.PublishArtifactAsync(id, a); err != nil {
			log.Fatal(err)
		}
		published.Add(1)
	}
}

// fill builds the big deliberation and waits until the engine has it all
// (and the supervisor has completed it on its verified final decision).
func fill(ctx context.Context, s *service.Service, m int) (string, canon.Digest) {
	t0 := time.Now()
	nc := benchkit.Connect(s.NATSURL(), s.Participant())
	defer nc.Close()
	c, _ := client.New(nc, "builder")
	id := uuid.Must(uuid.NewV7()).String()
	if err := c.OpenID(ctx, id, client.Charter{Title: "a million artifacts"}); err != nil {
		log.Fatal(err)
	}
	js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(8192))
	subject := wire.ArtifactSubject(id, "builder")
	below := make([]canon.Digest, width)
	layer := make([]*events.Artifact, width)
	var dispositions []events.Disposition
	workers := runtime.GOMAXPROCS(0)
	for base := 0; base < m; base += width {
		n := min(width, m-base)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := w; j < n; j += workers {
					layer[j] = node(base, j, below)
				}
			}()
		}
		wg.Wait()
		for j := 0; j < n; j++ {
			if _, err := js.PublishAsync(subject, layer[j].Canonical, jetstream.WithStallWait(time.Minute)); err != nil {
				log.Fatal(err)
			}
			if layer[j].Type == events.TypeObjection {
				dispositions = append(dispositions, events.Disposition{Objection: layer[j].ID, Disposition: events.Overruled, Rationale: "measured again"})
			}
			below[j] = layer[j].ID
		}
	}
	var refs []events.Reference
	for j := range min(width, m) {
		if layer[j].Type == events.TypeClaim {
			refs = append(refs, events.Reference{Target: layer[j].ID, Relation: events.Decides})
		}
	}
	dec := events.MustSeal(events.Draft{Type: events.TypeDecision, References: refs, Payload: events.Decision{
		Outcome: "adopt the cache", Status: events.Final, ObjectionDispositions: dispositions, UnresolvedIssues: []events.Issue{}}})
	if _, err := js.PublishAsync(subject, dec.Canonical, jetstream.WithStallWait(time.Minute)); err != nil {
		log.Fatal(err)
	}
	<-js.PublishAsyncComplete()
	published := time.Since(t0)
	benchkit.WaitApplied(ctx, s)
	projected := time.Since(t0)
	var v api.View
	for {
		var err error
		if v, err = s.Queries.Get(id); err != nil {
			log.Fatal(err)
		}
		if v.Status != api.StatusOpen || time.Since(t0) > 10*time.Minute {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v.Status != api.StatusCompleted || v.Artifacts < m+1 {
		log.Fatalf("the big deliberation: %s, %d artifacts, %d rejections", v.Status, v.Artifacts, v.Rejections)
	}
	fmt.Printf("big deliberation: %d artifacts (%d blocking objections, a %d KB decision) published in %s, projected after %s, completed by the supervisor after %s\n",
		v.Artifacts, len(dispositions), len(dec.Canonical)>>10, published.Round(time.Millisecond), projected.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	return id, dec.ID
}

// node seals artifact j of the layer starting at base.
func node(base, j int, below []canon.Digest) *events.Artifact {
	i := base + j
	if base == 0 {
		return events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprintf("root %d", i)}})
	}
	if j == width/2 {
		return events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: fmt.Sprintf("objection %d", i), Blocking: true},
			References: []events.Reference{{Target: below[j], Relation: events.ObjectsTo}}})
	}
	return events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprintf("claim %d", i)},
		References: []events.Reference{{Target: below[j], Relation: events.Supports}, {Target: below[(j+1)%width], Relation: events.Supports}}})
}
