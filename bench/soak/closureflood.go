package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
)

// closureReads reads, with sz.Readers readers not signed in, the closure
// of the final decision of a deliberation of sz.DAG artifacts, each read
// at a position not asked before (from the decision's to the stream's
// last), back to back.
type closureReads struct {
	ID       string
	Decision canon.Digest
	At       uint64 // the decision's position
}

func init() { register(&closureReads{}) }

func (*closureReads) name() string { return "closure-reads" }

// setup publishes the deliberation: layers of claims, each supporting two
// of the layer below, one in a hundred a blocking objection to one below,
// and a final decision over the top layer disposing of every objection, so
// that its verification walks the whole DAG; it waits for the supervisor
// to complete it.
func (c *closureReads) setup(ctx context.Context, e *engine, sz sizes) error {
	nc, err := nats.Connect(e.natsURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	cl, _ := client.New(nc, "builder")
	if c.ID, err = cl.Open(ctx, client.Charter{Title: "a large DAG"}); err != nil {
		return err
	}
	js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	subject := projector.ArtifactSubject(c.ID, "builder")
	width := min(1000, max(10, sz.DAG/90))
	below := make([]canon.Digest, width)
	var disp []events.Disposition
	var top []events.Reference
	for i := range sz.DAG {
		j := i % width
		var d events.Draft
		switch {
		case i < width:
			d = events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprintf("root %d", i)}}
		case j == width/2 && (i/width)%3 == 0:
			d = events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: fmt.Sprintf("objection %d", i), Blocking: true},
				References: []events.Reference{{Target: below[j], Relation: events.ObjectsTo}}}
		default:
			d = events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprintf("claim %d", i)},
				References: []events.Reference{{Target: below[j], Relation: events.Supports}, {Target: below[(j+1)%width], Relation: events.Supports}}}
		}
		a := events.MustSeal(d)
		if _, err := js.PublishAsync(subject, a.Canonical, jetstream.WithStallWait(time.Minute)); err != nil {
			return err
		}
		if a.Type == events.TypeObjection {
			disp = append(disp, events.Disposition{Objection: a.ID, Disposition: events.Overruled, Rationale: "measured again"})
		} else {
			below[j] = a.ID
		}
		if i >= sz.DAG-width && a.Type == events.TypeClaim {
			top = append(top, events.Reference{Target: a.ID, Relation: events.Decides})
		}
	}
	<-js.PublishAsyncComplete()
	dec := events.MustSeal(events.Draft{Type: events.TypeDecision, References: top, Payload: events.Decision{
		Outcome: "adopt", Status: events.Final, ObjectionDispositions: disp, UnresolvedIssues: []events.Issue{}}})
	ack, err := cl.PublishArtifact(ctx, c.ID, dec)
	if err != nil {
		return err
	}
	c.Decision, c.At = dec.ID, ack.Sequence
	for {
		v, err := cl.WaitPosition(ctx, c.ID, ack.Sequence)
		if err != nil {
			return err
		}
		if v.Status == projector.StatusCompleted {
			return nil
		}
		if v.Status.Terminal() || v.Rejections > 0 {
			return fmt.Errorf("the large deliberation: %s, %d artifacts, %d rejections", v.Status, v.Artifacts, v.Rejections)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *closureReads) run(ctx context.Context, e *engine, sz sizes, sent *atomic.Int64) (string, error) {
	var ok, refused, other atomic.Int64
	var next atomic.Uint64
	next.Store(c.At)
	base := "http://" + e.httpAddr + "/api/v1/deliberations/" + c.ID + "/closure/" + c.Decision.String() + "?at="
	var wg sync.WaitGroup
	for r := range sz.Readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := from("127.0.0.2", sent)
			rng := rand.New(rand.NewPCG(uint64(r), 3))
			for ctx.Err() == nil {
				// A position not asked before, most of them at or before
				// the stream's end, which the honest relays move on.
				at := next.Add(1 + uint64(rng.IntN(3)))
				req, _ := http.NewRequestWithContext(ctx, "GET", base+strconv.FormatUint(at, 10), nil)
				resp, err := hc.Do(req)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					ok.Add(1)
				case http.StatusTooManyRequests:
					refused.Add(1)
				default:
					other.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return fmt.Sprintf("a decision over %d artifacts; %d readers: %d verified, %d refused 429, %d other", sz.DAG, sz.Readers, ok.Load(), refused.Load(), other.Load()), nil
}
