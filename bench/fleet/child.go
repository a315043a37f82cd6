package main

import (
	"bufio"
	"encoding/gob"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"time"

	"github.com/parley-engine/parley/events"
)

// With -publisher-process, the publishers run in a process of their own,
// as participants do, instead of in the engine's: the parent writes the
// work to a file and starts this program again with -publish-child FILE.
// The child connects every publisher, says "ready", waits for "go" on its
// standard input, publishes everything, waits for the acknowledgements
// and says "done".
var publisherProcess bool

type childJob struct {
	URL     string
	Raw     bool // raw JetStream publish (the baseline), not the client
	Pending int
	Rate    float64
	IDs     []string
	Arts    [][][]byte // each publisher's artifacts, canonical bytes
}

// publishOut runs the publishing of w in a child process against url and
// returns the time from "go" to "done".
func publishOut(w *work, url string, raw bool, onStart func()) time.Duration {
	job := childJob{URL: url, Raw: raw, Pending: w.pending, Rate: w.rate, IDs: w.ids, Arts: make([][][]byte, len(w.arts))}
	for p, arts := range w.arts {
		for _, a := range arts {
			job.Arts[p] = append(job.Arts[p], a.Canonical)
		}
	}
	f, err := os.CreateTemp("", "parley-fleet-job-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.Remove(f.Name())
	if err := gob.NewEncoder(f).Encode(job); err != nil {
		log.Fatal(err)
	}
	f.Close()
	cmd, in, out := spawn("-publish-child", f.Name())
	expect := func(word string) {
		if !out.Scan() || out.Text() != word {
			log.Fatalf("publisher process: %q, want %q (%v)", out.Text(), word, out.Err())
		}
	}
	expect("ready")
	onStart()
	t0 := time.Now()
	fmt.Fprintln(in, "go")
	expect("done")
	elapsed := time.Since(t0)
	in.Close()
	if err := cmd.Wait(); err != nil {
		log.Fatalf("publisher process: %v", err)
	}
	return elapsed
}

// spawn starts this program again with args, its standard error this
// process's, and returns its standard input and a scanner of its output.
func spawn(args ...string) (*exec.Cmd, io.WriteCloser, *bufio.Scanner) {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	return cmd, in, bufio.NewScanner(out)
}

// runChild is the publisher process.
func runChild(path string) {
	f, err := os.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	var job childJob
	if err := gob.NewDecoder(f).Decode(&job); err != nil {
		log.Fatal(err)
	}
	f.Close()
	w := &work{ids: job.IDs, arts: make([][]*events.Artifact, len(job.Arts)), pending: job.Pending, rate: job.Rate}
	for p, arts := range job.Arts {
		for _, b := range arts {
			a, err := events.Validate(b)
			if err != nil {
				log.Fatal(err)
			}
			w.arts[p] = append(w.arts[p], a)
		}
	}
	publisher := clientPublisher
	if job.Raw {
		publisher = rawPublisher
	}
	in := bufio.NewScanner(os.Stdin)
	publishAll(w, func() {
		fmt.Println("ready")
		if !in.Scan() || in.Text() != "go" {
			log.Fatal("publisher process: no go")
		}
	}, publisher(w, job.URL))
	fmt.Println("done")
}
