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
// The clients read the answers' bytes and the next cursor and decode
// nothing, so that what grows is the engine's.
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
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

func main() {
	n := flag.Int("n", 100000, "deliberations")
	c := flag.Int("c", 50, "concurrent clients")
	limit := flag.Int("limit", wire.MaxPageLimit, "page size of the walks")
	whole := flag.Bool("whole", true, "also measure the whole list in one answer")
	flag.Parse()
	ctx := context.Background()
	fmt.Printf("machine: %d CPUs, %s\n", runtime.NumCPU(), runtime.Version())

	dir, err := os.MkdirTemp("", "parley-bench-lists-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := service.Start(ctx, service.Config{DataDir: dir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	start := time.Now()
	last := open(ctx, s, *n)
	if err := s.Runner.WaitFor(ctx, last); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("opened %d deliberations in %.1f s\n", s.Runner.Deliberations(), time.Since(start).Seconds())

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *c, MaxConnsPerHost: *c}}
	base := "http://" + s.HTTPAddr()

	// Pages.
	var pages, items atomic.Int64
	idle, peak, took := measure(*c, func() {
		url := base + "/api/v1/deliberations?limit=" + strconv.Itoa(*limit)
		for next := ""; ; {
			u := url
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
	})
	if want := int64(*c) * int64(*n); items.Load() != want {
		log.Fatalf("the walks listed %d deliberations, want %d", items.Load(), want)
	}
	fmt.Printf("pages of %d: %d clients each walked all %d deliberations (%d pages in all) in %.1f s\n",
		*limit, *c, *n, pages.Load(), took.Seconds())
	fmt.Printf("  RSS %s before, %s at the peak: %s\n", mib(idle), mib(peak), plus(peak-idle))

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
	var bytesOne atomic.Int64
	idle, peak, took = measure(*c, func() {
		resp, err := hc.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			log.Fatal(err)
		}
		k, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		bytesOne.Store(k)
	})
	fmt.Printf("whole list in one answer (%.1f MB): %d clients at once in %.1f s\n", float64(bytesOne.Load())/1e6, *c, took.Seconds())
	fmt.Printf("  RSS %s before, %s at the peak: %s\n", mib(idle), mib(peak), plus(peak-idle))
}

// open publishes n open control messages asynchronously and returns the
// last one's position.
func open(ctx context.Context, s *service.Service, n int) uint64 {
	nc, err := nats.Connect(s.NATSURL())
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		log.Fatal(err)
	}
	futs := make([]jetstream.PubAckFuture, 0, n)
	for i := range n {
		body := `{"op":"open","charter":{"title":"deliberation ` + strconv.Itoa(i) + `"}}`
		f, err := js.PublishAsync(wire.ControlSubject(uuid.Must(uuid.NewV7()).String()), []byte(body))
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

// measure runs work in c goroutines at once and returns the resident
// memory before (after a collection) and at its peak while they run.
func measure(c int, work func()) (idle, peak int64, took time.Duration) {
	runtime.GC()
	debug.FreeOSMemory()
	time.Sleep(time.Second)
	idle = rss()
	stop := make(chan struct{})
	done := make(chan int64)
	go func() {
		p := idle
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
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	wg.Wait()
	took = time.Since(start)
	close(stop)
	return idle, <-done, took
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
