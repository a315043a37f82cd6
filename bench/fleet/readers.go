package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-engine/parley/api"
)

// With -reader-process, the HTTP readers run in a process of their own, as
// a browser, curl or a dashboard does, instead of in the engine's: the
// latency measured is then the engine's (and the machine's), not also the
// reader goroutines' wait for the engine process's scheduler. The parent
// starts this program again with -read-child, writes the job as one JSON
// line; the child starts reading, says "ready", records latencies between
// "start" and "stop" on its standard input, and answers "stop" with one
// JSON line of results.
var readerProcess bool

type readJob struct {
	Base    string        // the engine's .../api/v1/deliberations/
	Control string        // the bare HTTP server's URL
	IDs     []string      // deliberations to read
	Readers int           // concurrent readers of the engine
	Every   time.Duration // pause between one reader's requests
}

type readResult struct {
	Reads, Control []time.Duration
	Errors         int
}

// readerProc is the reader process as the parent sees it.
type readerProc struct {
	cmd *exec.Cmd
	in  *bufio.Writer
	out *bufio.Scanner
	raw interface{ Close() error }
}

func startReaders(job readJob) *readerProc {
	cmd, in, out := spawn("-read-child")
	rp := &readerProc{cmd: cmd, in: bufio.NewWriter(in), out: out, raw: in}
	rp.out.Buffer(nil, 1<<28)
	line, _ := json.Marshal(job)
	rp.say(string(line))
	rp.expect("ready")
	return rp
}

func (rp *readerProc) say(line string) {
	fmt.Fprintln(rp.in, line)
	rp.in.Flush()
}

func (rp *readerProc) expect(word string) {
	if !rp.out.Scan() || rp.out.Text() != word {
		log.Fatalf("reader process: %q, want %q (%v)", rp.out.Text(), word, rp.out.Err())
	}
}

// finish stops the readers and returns what they measured.
func (rp *readerProc) finish() readResult {
	rp.say("stop")
	if !rp.out.Scan() {
		log.Fatalf("reader process: no result (%v)", rp.out.Err())
	}
	var res readResult
	if err := json.Unmarshal(rp.out.Bytes(), &res); err != nil {
		log.Fatalf("reader process: %v", err)
	}
	rp.raw.Close()
	if err := rp.cmd.Wait(); err != nil {
		log.Fatalf("reader process: %v", err)
	}
	return res
}

// runReadChild is the reader process.
func runReadChild() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<26)
	if !in.Scan() {
		log.Fatal("reader process: no job")
	}
	var job readJob
	if err := json.Unmarshal(in.Bytes(), &job); err != nil {
		log.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: job.Readers + 1}, Timeout: 30 * time.Second}
	var measuring, stopped atomic.Bool
	lat := make([][]time.Duration, job.Readers+1)
	errs := make([]int, job.Readers+1)
	var wg sync.WaitGroup
	for r := range job.Readers + 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 13))
			for !stopped.Load() {
				id := job.IDs[rng.IntN(len(job.IDs))]
				q0 := time.Now()
				var err error
				if r == job.Readers {
					err = get(hc, job.Control, nil)
				} else {
					var v api.View
					if err = get(hc, job.Base+id, &v); err == nil && v.ID != id {
						err = errors.New("another deliberation")
					}
				}
				if err != nil {
					errs[r]++
				} else if measuring.Load() {
					lat[r] = append(lat[r], time.Since(q0))
				}
				if job.Every > 0 {
					time.Sleep(job.Every)
				}
			}
		}()
	}
	fmt.Println("ready")
	for in.Scan() {
		switch in.Text() {
		case "start":
			measuring.Store(true)
		case "stop":
			stopped.Store(true)
			wg.Wait()
			var res readResult
			for r := range job.Readers {
				res.Reads = append(res.Reads, lat[r]...)
			}
			res.Control = lat[job.Readers]
			for _, e := range errs {
				res.Errors += e
			}
			b, _ := json.Marshal(res)
			fmt.Println(string(b))
			return
		}
	}
	log.Fatal("reader process: no stop")
}
