// Command archive measures the recordings: the offline audit of a stream
// recording of M artifacts, and engine import beside raw JetStream async
// publish of the same messages, in one run.
//
//	go run ./bench/archive -m 1000000 -n 100000
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/archive"
	"github.com/parley-engine/parley/audit"
	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/benchkit"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/wire"
)

// write builds a stream recording of n artifacts: a chain of objections,
// each objecting to the one before, and a final decision at the end.
func write(path string, n int) (string, error) {
	id := uuid.Must(uuid.NewV7()).String()
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	w, _ := recording.NewWriter(f, recording.Stream, id)
	t := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	pos := uint64(1)
	w.Write(recording.Message{Position: pos, Subject: wire.ControlSubject(id), Time: t, Data: []byte(`{"op":"open","charter":{"title":"audit bench"}}`)})
	prev := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "root"}})
	for i := 0; i < n; i++ {
		a := prev
		if i > 0 {
			a = events.MustSeal(events.Draft{Type: events.TypeObjection,
				Payload:    events.Objection{Statement: fmt.Sprintf("objection %d: the previous point does not hold for mixed workloads", i), Blocking: false},
				References: []events.Reference{{Target: prev.ID, Relation: events.ObjectsTo}}})
		}
		pos++
		w.Write(recording.Message{Position: pos, Subject: wire.ArtifactSubject(id, fmt.Sprintf("p%d", i%10)), Time: t.Add(time.Duration(i) * time.Millisecond), Data: a.Canonical})
		prev = a
	}
	return id, w.Close()
}

func main() {
	m := flag.Int("m", 1000000, "artifacts in the audited recording")
	n := flag.Int("n", 100000, "messages for the import benchmark")
	flag.Parse()
	dir := benchkit.TempDir("parley-archive-bench-")
	defer os.RemoveAll(dir)
	fmt.Printf("%s\n\n", benchkit.Machine())

	if *m > 0 {
		path := filepath.Join(dir, "audit.jsonl")
		start := time.Now()
		if _, err := write(path, *m); err != nil {
			log.Fatal(err)
		}
		st, _ := os.Stat(path)
		fmt.Printf("audit   a stream recording of %d artifacts (%d MB, written in %s)\n", *m, st.Size()>>20, time.Since(start).Round(time.Second))
		f, _ := os.Open(path)
		start = time.Now()
		r, err := recording.NewReader(f)
		if err != nil {
			log.Fatal(err)
		}
		rep, err := audit.Run(r)
		if err != nil {
			log.Fatal(err)
		}
		el := time.Since(start)
		f.Close()
		fmt.Printf("  audited in %s: %.0f artifacts/s; ok %v, %d findings, state_digest %s\n\n", el.Round(time.Millisecond), float64(*m)/el.Seconds(), rep.OK, len(rep.Findings), rep.StateDigest[:19])
	}
	if *n > 0 {
		path := filepath.Join(dir, "import.jsonl")
		if _, err := write(path, *n); err != nil {
			log.Fatal(err)
		}
		rec, _ := os.ReadFile(path)
		ctx := context.Background()
		start := func() (*nats.Conn, jetstream.JetStream, func()) {
			d, _ := os.MkdirTemp(dir, "srv-")
			s := benchkit.StartServer(ctx, embedded.Config{Dir: d, Host: "127.0.0.1", Port: -1}, 4096)
			return s.NC, s.JS, s.Stop
		}
		// Raw: the same messages, async, with Msg-Ids, no headers.
		_, js, stop := start()
		r, _ := recording.NewReader(bytes.NewReader(rec))
		var msgs []recording.Message
		for {
			m, err := r.Next()
			if err != nil {
				break
			}
			m.Data = bytes.Clone(m.Data)
			msgs = append(msgs, m)
		}
		t0 := time.Now()
		for i, m := range msgs {
			if _, err := js.PublishMsgAsync(&nats.Msg{Subject: m.Subject, Data: m.Data}, jetstream.WithMsgID(fmt.Sprint("raw:", i)), jetstream.WithStallWait(30*time.Second)); err != nil {
				log.Fatal(err)
			}
			if i%archive.BatchSize == archive.BatchSize-1 {
				<-js.PublishAsyncComplete()
			}
		}
		<-js.PublishAsyncComplete()
		rawT := time.Since(t0)
		stop()
		// The import, in atomic batches (the stream as ledger.Ensure
		// creates it), then with async acknowledgements (a stream that
		// does not allow atomic batches).
		imp := func(atomic bool) (archive.ImportResult, time.Duration) {
			_, js, stop := start()
			defer stop()
			if !atomic {
				s, _ := js.Stream(ctx, wire.StreamName)
				cfg := s.CachedInfo().Config
				cfg.AllowAtomicPublish = false
				if _, err := js.UpdateStream(ctx, cfg); err != nil {
					log.Fatal(err)
				}
			}
			r, _ := recording.NewReader(bytes.NewReader(rec))
			t0 := time.Now()
			res, err := archive.Import(ctx, js, r, "", nil)
			if err != nil || res.Atomic != atomic {
				log.Fatal(res, err)
			}
			return res, time.Since(t0)
		}
		atomRes, atomT := imp(true)
		_, asyncT := imp(false)
		rawRate := float64(len(msgs)) / rawT.Seconds()
		atomRate, asyncRate := float64(atomRes.Published)/atomT.Seconds(), float64(atomRes.Published)/asyncT.Seconds()
		fmt.Printf("import  %d messages (one TCP connection, batches of %d)\n", atomRes.Published, archive.BatchSize)
		fmt.Printf("  raw JetStream async publish      %9.0f msgs/s  (%s)\n", rawRate, rawT.Round(time.Millisecond))
		fmt.Printf("  engine import, atomic batches    %9.0f msgs/s  (%s), reading the recording included\n", atomRate, atomT.Round(time.Millisecond))
		fmt.Printf("  engine import, async acks        %9.0f msgs/s  (%s), reading the recording included\n", asyncRate, asyncT.Round(time.Millisecond))
		fmt.Printf("  ratio import/raw                 %9.2f atomic, %.2f async\n", atomRate/rawRate, asyncRate/rawRate)
	}
}
