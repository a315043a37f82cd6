package main

import (
	"bufio"
	"encoding/gob"
	"fmt"
	"log"
	"os"
	"os/exec"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
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
	cmd := exec.Command(os.Args[0], "-publish-child", f.Name())
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	outPipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	out := bufio.NewScanner(outPipe)
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
	in := bufio.NewScanner(os.Stdin)
	publishAll(w, func() {
		fmt.Println("ready")
		if !in.Scan() || in.Text() != "go" {
			log.Fatal("publisher process: no go")
		}
	}, func(p int) (func(int) (jetstream.PubAckFuture, error), func() <-chan struct{}, func()) {
		nc, err := nats.Connect(job.URL)
		if err != nil {
			log.Fatal(err)
		}
		if job.Raw {
			js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(w.pending))
			ids := ledger.NewMsgIDs()
			subject := projector.ArtifactSubject(w.ids[p], fmt.Sprintf("p%d", p))
			return func(i int) (jetstream.PubAckFuture, error) {
				a := w.arts[p][i]
				msg := &nats.Msg{Subject: subject, Data: a.Canonical, Header: nats.Header{}}
				return js.PublishMsgAsync(msg, jetstream.WithMsgID(ids.Artifact(subject, a.ID.String())),
					jetstream.WithExpectStream(ledger.StreamName), jetstream.WithStallWait(30*time.Second))
			}, js.PublishAsyncComplete, nc.Close
		}
		c, err := client.New(nc, fmt.Sprintf("p%d", p), jetstream.WithPublishAsyncMaxPending(w.pending))
		if err != nil {
			log.Fatal(err)
		}
		return func(i int) (jetstream.PubAckFuture, error) {
			return c.PublishArtifactAsync(w.ids[p], w.arts[p][i])
		}, c.PublishAsyncComplete, nc.Close
	})
	fmt.Println("done")
}
