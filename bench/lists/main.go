// Command lists measures what listing deliberations costs the engine in
// memory: it starts an engine in this process (service.Start, embedded
// NATS, the supervisor on), opens N deliberations (open control messages,
// published asynchronously), then has C clients at once each walk the
// whole list over HTTP, page by page, and prints the resident memory
// (VmRSS, sampled every few milliseconds) before and at the peak of the
// walks. For comparison, in the same run, it then has C clients at once
// ask for the whole list in one answer as the engine did before pages
// (Queries.List, every deliberation in one slice, encoded in one piece),
// served beside the engine's API on another port.
//
// The clients run in a child process (this command again, with -walk or
// -whole-url), so that the memory measured is the engine's alone.
//
//	go run ./bench/lists -n 100000 -c 50
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/internal/benchkit"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

func main() {
	n := flag.Int("n", 100000, "deliberations")
	c := flag.Int("c", 50, "concurrent clients")
	limit := flag.Int("limit", wire.MaxPageLimit, "page size of the walks")
	whole := flag.Bool("whole", true, "also measure the whole list in one answer")
	walkURL := flag.String("walk", "", "(the child) walk the list at this URL page by page")
	wholeURL := flag.String("whole-url", "", "(the child) get the whole list at this URL")
	supervise := flag.Bool("supervisor", true, "run the termination supervisor, as the engine does by default")
	snapshots := flag.Bool("snapshots", false, "snapshot the projection as the engine does by default (every 30 s)")
	flag.Parse()
	switch {
	case *walkURL != "":
		walkAll(*walkURL, *c, *limit)
		return
	case *wholeURL != "":
		getAll(*wholeURL, *c)
		return
	}
	ctx := context.Background()
	fmt.Println(benchkit.Machine())

	dir := benchkit.TempDir("parley-bench-lists-")
	defer os.RemoveAll(dir)
	// No snapshot during the measures: writing one of 100,000
	// deliberations takes far more memory than any list (-snapshots to
	// see it in the pause between them).
	every := time.Hour
	if *snapshots {
		every = 0
	}
	s := benchkit.StartEngine(ctx, service.Config{DataDir: dir, SnapshotEvery: every, NoSupervisor: !*supervise})
	defer s.Close()

	start := time.Now()
	last := open(ctx, s, *n)
	if err := s.Runner.WaitFor(ctx, last); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("opened %d deliberations in %.1f s\n", s.Runner.Deliberations(), time.Since(start).Seconds())

	// Pages.
	var out []byte
	res := measure(func() {
		out = child("-walk", "http://"+s.HTTPAddr()+"/api/v1/deliberations", "-c", strconv.Itoa(*c), "-limit", strconv.Itoa(*limit))
	})
	var items, pages int64
	fmt.Sscan(string(out), &items, &pages)
	if want := int64(*c) * int64(*n); items != want {
		log.Fatalf("the walks listed %d deliberations, want %d", items, want)
	}
	fmt.Printf("pages of %d: %d clients at once each walked all %d deliberations (%d pages in all) in %.1f s\n%v\n", *limit, *c, *n, pages, res.took.Seconds(), res)

	// Nothing asked, as long: what the engine's own work (the
	// supervisor's ticks) adds meanwhile.
	walk := res.took
	res = measure(func() { time.Sleep(walk) })
	fmt.Printf("no requests for %.1f s\n%v\n", res.took.Seconds(), res)

	if !*whole {
		return
	}
	// The whole list in one answer, as before pages.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.Encode(s.Queries.List())
	})}
	go srv.Serve(ln)
	defer srv.Close()
	res = measure(func() {
		out = child("-whole-url", "http://"+ln.Addr().String()+"/", "-c", strconv.Itoa(*c))
	})
	var size int64
	fmt.Sscan(string(out), &size)
	fmt.Printf("whole list in one answer (%.1f MB): %d clients at once in %.1f s\n%v\n", float64(size)/1e6, *c, res.took.Seconds(), res)
}

// child runs this command with args and returns its standard output.
func child(args ...string) []byte {
	exe, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		log.Fatalf("%s %v: %v", exe, args, err)
	}
	return out
}

func httpClient(c int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c, MaxConnsPerHost: c}}
}

// walkAll has c clients at once each walk the list at url page by page,
// and prints the deliberations and the pages they read.
func walkAll(url string, c, limit int) {
	hc := httpClient(c)
	var pages, items atomic.Int64
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next := ""; ; {
				u := url + "?limit=" + strconv.Itoa(limit)
				if next != "" {
					u += "&cursor=" + next
				}
				resp, err := hc.Get(u)
				if err != nil {
					log.Fatal(err)
				}
				k := countItems(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					log.Fatalf("%s: %s", u, resp.Status)
				}
				pages.Add(1)
				items.Add(int64(k))
				if next = resp.Header.Get(wire.NextCursorHeader); next == "" {
					return
				}
			}
		}()
	}
	wg.Wait()
	fmt.Println(items.Load(), pages.Load())
}

// getAll has c clients at once get url, and prints the answer's size.
func getAll(url string, c int) {
	hc := httpClient(c)
	var size atomic.Int64
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := hc.Get(url)
			if err != nil {
				log.Fatal(err)
			}
			k, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			size.Store(k)
		}()
	}
	wg.Wait()
	fmt.Println(size.Load())
}

// open publishes n open control messages asynchronously and returns the
// last one's position.
func open(ctx context.Context, s *service.Service, n int) uint64 {
	nc := benchkit.Connect(s.NATSURL(), s.Participant())
	defer nc.Close()
	js := benchkit.JetStream(nc, 4096)
	futs := make([]jetstream.PubAckFuture, 0, n)
	for i := range n {
		body := `{"op":"open","charter":{"title":"deliberation ` + strconv.Itoa(i) + `"}}`
		f, err := js.PublishAsync(wire.ControlSubject(uuid.Must(uuid.NewV7()).String()), []byte(body), jetstream.WithStallWait(time.Minute))
		if err != nil {
			log.Fatal(err)
		}
		futs = append(futs, f)
	}
	var last uint64
	for _, f := range futs {
		select {
		case ack := <-f.Ok():
			last = max(last, ack.Sequence)
		case err := <-f.Err():
			log.Fatal(err)
		case <-ctx.Done():
			log.Fatal(ctx.Err())
		}
	}
	return last
}

// result is what a phase cost the engine.
type result struct {
	idle, peak int64 // resident memory before (after a collection) and at the peak
	took       time.Duration
	alloc      uint64 // bytes the engine allocated
	gcs        uint32 // collections
}

func (r result) String() string {
	return fmt.Sprintf("  RSS %s before, %s at the peak: %s (the engine allocated %.0f MB, %d collections)",
		mib(r.idle), mib(r.peak), plus(r.peak-r.idle), float64(r.alloc)/1e6, r.gcs)
}

// measure runs work and says what it cost the engine.
func measure(work func()) result {
	runtime.GC()
	debug.FreeOSMemory()
	time.Sleep(time.Second)
	r := result{idle: rss()}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	stop := make(chan struct{})
	done := make(chan int64)
	go func() {
		p := r.idle
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				done <- max(p, rss())
				return
			case <-t.C:
				p = max(p, rss())
			}
		}
	}()
	start := time.Now()
	work()
	r.took = time.Since(start)
	close(stop)
	r.peak = <-done
	runtime.ReadMemStats(&m1)
	r.alloc, r.gcs = m1.TotalAlloc-m0.TotalAlloc, m1.NumGC-m0.NumGC
	return r
}

// countItems reads a JSON array of objects and counts its top-level
// members, decoding nothing.
func countItems(r io.Reader) int {
	br := bufio.NewReaderSize(r, 32<<10)
	depth, n, inStr, esc := 0, 0, false, false
	for {
		b, err := br.ReadByte()
		if err != nil {
			return n
		}
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case b == '\\':
				esc = true
			case b == '"':
				inStr = false
			}
		case b == '"':
			inStr = true
		case b == '{' || b == '[':
			if depth == 1 && b == '{' {
				n++
			}
			depth++
		case b == '}' || b == ']':
			depth--
		}
	}
}

// rss is this process's resident memory (VmRSS) in bytes.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		log.Fatal(err)
	}
	for line := range bytes.Lines(b) {
		if f := strings.Fields(string(line)); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	log.Fatal("no VmRSS in /proc/self/status")
	return 0
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func plus(b int64) string { return fmt.Sprintf("+%.1f MiB", float64(b)/(1<<20)) }
