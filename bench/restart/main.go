// Command restart measures how long the engine takes to be back at the
// head of a stream of about a million artifacts after a restart, three
// ways, in turn, in one run:
//
//   - rebuild: no snapshot, the projection rebuilt from the whole stream;
//   - snapshot: a clean restart (the engine wrote its snapshots when it
//     stopped), so only the snapshots are loaded;
//   - snapshot + tail: the snapshots taken -tail messages before the end
//     (as after a crash), loaded, and the tail replayed;
//   - snapshot, jetstream: the same snapshots as a clean restart's, kept
//     in the object store of --snapshot-store jetstream (in the same
//     server's store) instead of files.
//
// Beside them, the projection rebuilt by a runner alone on the same store
// (no snapshots, metrics or announcements; with the default fold options
// and with the engine's), as a reference for the rebuild.
//
// Each is timed from service.Start to the moment the runner's position
// reaches the stream's last sequence, with the part service.Start took
// (the embedded server recovering its store, the snapshots loaded); and
// the snapshots read alone, in parallel as the runner reads them, from the
// files and from the object store.
// Files are in the page cache: this is a warm restart.
//
//	go run ./bench/restart -m 1000000 -tail 100000 -runs 3
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/benchkit"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

const delibs = 100

func main() {
	m := flag.Int("m", 1000000, "artifacts before the tail (100 deliberations, each a chain of objections)")
	tail := flag.Int("tail", 100000, "artifacts published after the snapshot the third kind of restart starts from")
	runs := flag.Int("runs", 3, "rounds of the three restarts")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the restarts to this file")
	short := flag.Bool("short", false, "small sizes for a quick check (-m 50000 -tail 5000 -runs 1)")
	flag.Parse()
	if *short {
		*m, *tail, *runs = 50000, 5000, 1
	}
	ctx := context.Background()
	fmt.Println(benchkit.Machine())

	dir := benchkit.TempDir("parley-restart-")
	defer os.RemoveAll(dir)
	saved := filepath.Join(dir, "saved")
	if err := os.Mkdir(saved, 0o750); err != nil {
		log.Fatal(err)
	}

	// The stream: M artifacts written straight to the engine's store.
	t0 := time.Now()
	srv := benchkit.StartServer(ctx, embedded.Config{Dir: filepath.Join(dir, "nats"), DontListen: true}, 8192)
	js := srv.JS
	ids := make([]string, delibs)
	heads := make([]*events.Artifact, delibs)
	for d := range ids {
		ids[d] = uuid.Must(uuid.NewV7()).String()
		if _, err := js.PublishAsync(wire.ControlSubject(ids[d]), []byte(`{"op":"open","charter":{"title":"restart"}}`), jetstream.WithStallWait(time.Minute)); err != nil {
			log.Fatal(err)
		}
	}
	extend(ids, heads, *m/delibs, 0, func(subject string, data []byte) {
		if _, err := js.PublishAsync(subject, data, jetstream.WithStallWait(time.Minute)); err != nil {
			log.Fatal(err)
		}
	})
	<-js.PublishAsyncComplete()
	srv.Stop()
	fmt.Printf("stream: %d deliberations x %d artifacts, written in %s\n", delibs, *m/delibs, time.Since(t0).Round(time.Millisecond))

	cfg := service.Config{DataDir: dir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", NoSupervisor: true}
	snapshots := func() []string {
		fs, _ := filepath.Glob(filepath.Join(dir, "projection.snapshot.*"))
		return fs
	}

	// A first start builds the projection; a snapshot is taken, saved for
	// the tail restarts, and the tail published through the engine; it
	// stops, writing its last snapshots.
	s, d, _ := start(ctx, cfg)
	fmt.Printf("first start (rebuild): %s\n", d.Round(time.Millisecond))
	t := time.Now()
	if err := s.Runner.Snapshot(); err != nil {
		log.Fatal(err)
	}
	var size int64
	for _, f := range snapshots() {
		fi, _ := os.Stat(f)
		size += fi.Size()
		copyFile(f, filepath.Join(saved, filepath.Base(f)))
	}
	fmt.Printf("snapshot of every shard: %s, %d MB in %d files\n", time.Since(t).Round(time.Millisecond), size>>20, len(snapshots()))
	nc := benchkit.Connect(s.NATSURL(), s.Participant())
	js = benchkit.JetStream(nc, 8192)
	extend(ids, heads, *tail/delibs, *m/delibs, func(subject string, data []byte) {
		if _, err := js.PublishAsync(subject, data, jetstream.WithStallWait(time.Minute)); err != nil {
			log.Fatal(err)
		}
	})
	<-js.PublishAsyncComplete()
	nc.Close()
	info, err := s.Stream.Info(ctx)
	if err != nil {
		log.Fatal(err)
	}
	last := info.State.LastSeq
	closeEngine(s)
	// The same snapshots as objects: what an engine of --snapshot-store
	// jetstream would have written as it stopped.
	putObjects(ctx, dir, snapshots())
	var artifacts int
	fmt.Printf("then a tail of %d artifacts: the stream holds %d messages (%d MB)\n\n", *tail/delibs*delibs, last, info.State.Bytes>>20)

	defer benchkit.CPUProfile(*cpuprofile)()
	kinds := []string{"rebuild", "snapshot", "snapshot + tail", "snapshot, jetstream"}
	total := map[string][]time.Duration{}
	startPart := map[string][]time.Duration{}
	parts := map[string][]time.Duration{}
	for r := 0; r < *runs; r++ {
		for _, kind := range kinds {
			switch kind {
			case "rebuild":
				for _, f := range snapshots() {
					os.Remove(f)
				}
			case "snapshot + tail":
				for _, f := range snapshots() {
					os.Remove(f)
				}
				fs, _ := filepath.Glob(filepath.Join(saved, "projection.snapshot.*"))
				for _, f := range fs {
					copyFile(f, filepath.Join(dir, filepath.Base(f)))
				}
			}
			runtime.GC()
			kcfg := cfg
			if kind == "snapshot, jetstream" {
				kcfg.SnapshotStore = service.SnapshotJetStream
			}
			s, d, sd := start(ctx, kcfg)
			if kind != "rebuild" && s.Runner.StartPosition() == 0 {
				log.Fatalf("%s: the snapshots were not used: %v", kind, s.Runner.SnapshotsNotUsed())
			}
			total[kind] = append(total[kind], d)
			startPart[kind] = append(startPart[kind], sd)
			artifacts = 0
			s.Runner.EachDeliberation(func(d *projector.Deliberation) { artifacts += d.Artifacts() })
			if want := delibs * (*m/delibs + *tail/delibs); artifacts != want {
				log.Fatalf("%s: %d artifacts in the projection, want %d", kind, artifacts, want)
			}
			// Close writes the last snapshots: the next start is clean.
			closeEngine(s)
			fmt.Printf("  round %d  %-16s back at the head (%d) after %6s  (service.Start %s)\n", r+1, kind, last, d.Round(time.Millisecond), sd.Round(time.Millisecond))
		}
		// Beside the engine's rebuild, the runner alone (as bench/engine's
		// replay runs it, with no snapshots, metrics or announcements) on
		// the same store, with the default fold options and with the
		// engine's (the supervisor's rules in the fold).
		for _, kind := range []string{"runner alone", "runner alone + rules"} {
			runtime.GC()
			opts := projector.Options{}
			if kind == "runner alone + rules" {
				opts = projector.Options{Validator: events.NewValidator(), Rules: termination.Rules{}}
			}
			d := bareRebuild(ctx, dir, opts, last)
			total[kind] = append(total[kind], d)
			fmt.Printf("  round %d  %-16s back at the head (%d) after %6s\n", r+1, kind, last, d.Round(time.Millisecond))
		}
		// The parts of a start from snapshots, each alone: the embedded
		// server opening its store, and the shards' snapshots read in
		// parallel as the runner reads them.
		runtime.GC()
		t := time.Now()
		srv, err := embedded.Start(embedded.Config{Dir: filepath.Join(dir, "nats"), DontListen: true})
		if err != nil {
			log.Fatal(err)
		}
		parts["embedded server start"] = append(parts["embedded server start"], time.Since(t))
		embedded.Stop(srv)
		runtime.GC()
		t = time.Now()
		readSnapshots(snapshots())
		parts["snapshots read"] = append(parts["snapshots read"], time.Since(t))
		runtime.GC()
		parts["objects read"] = append(parts["objects read"], readObjects(ctx, dir))
	}
	fmt.Printf("\nmedian (range) of %d rounds, %d artifacts\n", *runs, artifacts)
	for _, kind := range kinds {
		fmt.Printf("  %-29s %s  (service.Start %s)\n", kind, spread(total[kind]), spread(startPart[kind]))
	}
	for _, kind := range []string{"runner alone", "runner alone + rules"} {
		fmt.Printf("  %-29s %s\n", "rebuild, "+kind, spread(total[kind]))
	}
	fmt.Printf("  snapshot / rebuild (medians): %.2f\n", benchkit.Median(total["snapshot"]).Seconds()/benchkit.Median(total["rebuild"]).Seconds())
	fmt.Printf("  the parts of a start from snapshots, each alone: the embedded server opening its store %s; the %d snapshots read in parallel %s\n",
		spread(parts["embedded server start"]), len(snapshots()), spread(parts["snapshots read"]))
	fmt.Printf("  the same snapshots read in parallel from the object store (in process, the server started): %s\n", spread(parts["objects read"]))
}

// putObjects puts the snapshot files into the engine's snapshot bucket as
// the engine writes them (runner.ObjectSnapshots).
func putObjects(ctx context.Context, dir string, files []string) {
	srv := benchkit.StartServer(ctx, embedded.Config{Dir: filepath.Join(dir, "nats"), DontListen: true}, 0)
	defer srv.Stop()
	obs, err := srv.JS.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: runner.DefaultSnapshotBucket, Storage: jetstream.FileStorage})
	if err != nil {
		log.Fatal(err)
	}
	store, err := runner.ObjectSnapshots(ctx, obs, service.SnapshotFile)
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range files {
		var i, n int
		if _, err := fmt.Sscanf(filepath.Base(f), service.SnapshotFile+".%d-of-%d", &i, &n); err != nil {
			log.Fatal(err)
		}
		err := store.Write(ctx, i, n, func(w io.Writer) error {
			fh, err := os.Open(f)
			if err != nil {
				return err
			}
			defer fh.Close()
			_, err = io.Copy(w, fh)
			return err
		})
		if err != nil {
			log.Fatal(err)
		}
	}
}

// readObjects reads the snapshots of the engine's bucket in parallel, as
// the runner does, and returns the time that took (the server's start
// not included).
func readObjects(ctx context.Context, dir string) time.Duration {
	srv := benchkit.StartServer(ctx, embedded.Config{Dir: filepath.Join(dir, "nats"), DontListen: true}, 0)
	defer srv.Stop()
	obs, err := srv.JS.ObjectStore(ctx, runner.DefaultSnapshotBucket)
	if err != nil {
		log.Fatal(err)
	}
	store, err := runner.ObjectSnapshots(ctx, obs, service.SnapshotFile)
	if err != nil {
		log.Fatal(err)
	}
	t := time.Now()
	var wg sync.WaitGroup
	for i := range runner.DefaultShards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			found, err := store.Read(ctx, i, runner.DefaultShards, runner.DefaultMaxSnapshotBytes, func(r io.Reader) error {
				_, err := projector.ReadSnapshot(r, projector.DefaultOptions())
				return err
			})
			if err != nil || !found {
				log.Fatalf("shard %d: found %v, %v", i, found, err)
			}
		}()
	}
	wg.Wait()
	return time.Since(t)
}

// bareRebuild rebuilds the projection of the store in dir with a runner
// alone (no snapshots) over an in-process connection, and returns the time
// until its position is last.
func bareRebuild(ctx context.Context, dir string, opts projector.Options, last uint64) time.Duration {
	srv := benchkit.StartServer(ctx, embedded.Config{Dir: filepath.Join(dir, "nats"), DontListen: true}, 0)
	defer srv.Stop()
	js, stream := srv.JS, srv.Stream
	t := time.Now()
	r, err := runner.New(ctx, js, stream, runner.Config{Projector: opts})
	if err != nil {
		log.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { r.Run(rctx); close(done) }()
	if err := r.WaitFor(ctx, last); err != nil {
		log.Fatal(err)
	}
	d := time.Since(t)
	cancel()
	<-done
	return d
}

// start starts the engine on cfg's directory and returns it once its
// position has reached the stream's last sequence, with the time that took
// and the part of it service.Start took.
func start(ctx context.Context, cfg service.Config) (*service.Service, time.Duration, time.Duration) {
	t := time.Now()
	s, err := service.Start(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	started := time.Since(t)
	benchkit.WaitApplied(ctx, s)
	return s, time.Since(t), started
}

// extend seals n more objections in each deliberation's chain (every tenth
// blocking), from index from, and publishes them with pub (safe for
// concurrent use), sealing on every core, one deliberation per worker at a
// time, each in order.
func extend(ids []string, heads []*events.Artifact, n, from int, pub func(subject string, data []byte)) {
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := w; d < len(ids); d += workers {
				prev := heads[d]
				for i := from; i < from+n; i++ {
					var a *events.Artifact
					if prev == nil {
						a = events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "root " + ids[d]}})
					} else {
						a = events.MustSeal(events.Draft{Type: events.TypeObjection,
							Payload:    events.Objection{Statement: fmt.Sprintf("objection %d: the previous point does not hold for mixed workloads", i), Blocking: i%10 == 0},
							References: []events.Reference{{Target: prev.ID, Relation: events.ObjectsTo}}})
					}
					pub(wire.ArtifactSubject(ids[d], fmt.Sprintf("p%d", i%10)), a.Canonical)
					prev = a
				}
				heads[d] = prev
			}
		}()
	}
	wg.Wait()
}

// readSnapshots reads the snapshot files in parallel, as the runner does.
func readSnapshots(files []string) {
	var wg sync.WaitGroup
	for _, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fh, err := os.Open(f)
			if err != nil {
				log.Fatal(err)
			}
			defer fh.Close()
			if _, err := projector.ReadSnapshot(bufio.NewReaderSize(fh, 1<<20), projector.DefaultOptions()); err != nil {
				log.Fatal(err)
			}
		}()
	}
	wg.Wait()
}

// closeEngine stops s. A runner stopped before it has created its
// consumer (a start from snapshots at the head of the stream is at once
// where it should be) reports the cancellation as its error: not a failure.
func closeEngine(s *service.Service) {
	if err := s.Close(); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}

func copyFile(from, to string) {
	b, err := os.ReadFile(from)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o640); err != nil {
		log.Fatal(err)
	}
}

func spread(d []time.Duration) string {
	return fmt.Sprintf("%6s (%s-%s)", benchkit.Median(d).Round(time.Millisecond), slices.Min(d).Round(time.Millisecond), slices.Max(d).Round(time.Millisecond))
}
