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

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/wire"
)

// closureReads reads, with sz.Readers readers not signed in, the closure
// of a decision over a deliberation of sz.DAG artifacts, each read at a
// position not asked before (between the decision's and the
// deliberation's last, a tenth of the DAG later), back to back.
type closureReads struct {
	ID       string
	Decision canon.Digest
	At, Last uint64 // the decision's position, the deliberation's last
}

func init() { register(&closureReads{}) }

func (*closureReads) name() string { return "closure-reads" }

// setup publishes the deliberation: layers of claims, each supporting two
// of the layer below, one in a hundred a blocking objection to one below,
// a provisional decision over the top layer disposing of every objection
// (so that its verification walks the whole DAG, and the deliberation
// goes on), then a tenth as many claims again, each a position to ask at.
func (c *closureReads) setup(ctx context.Context, e *engine, sz sizes) error {
	nc, err := e.participant()
	if err != nil {
		return err
	}
	defer nc.Close()
	cl, _ := client.New(nc, "builder")
	if c.ID, err = cl.Open(ctx, client.Charter{Title: "a large DAG"}); err != nil {
		return err
	}
	js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	subject := wire.ArtifactSubject(c.ID, "builder")
	publish := func(d events.Draft) (*events.Artifact, error) {
		a := events.MustSeal(d)
		_, err := js.PublishAsync(subject, a.Canonical, jetstream.WithStallWait(time.Minute))
		return a, err
	}
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
		a, err := publish(d)
		if err != nil {
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
		Outcome: "adopt", Status: events.Provisional, ObjectionDispositions: disp, UnresolvedIssues: []events.Issue{}}})
	ack, err := cl.PublishArtifact(ctx, c.ID, dec)
	if err != nil {
		return err
	}
	c.Decision, c.At = dec.ID, ack.Sequence
	for i := range max(1, sz.DAG/10) {
		if _, err := publish(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprintf("later %d", i)},
			References: []events.Reference{{Target: top[i%len(top)].Target, Relation: events.Supports}}}); err != nil {
			return err
		}
	}
	<-js.PublishAsyncComplete()
	_, ack, err = cl.Publish(ctx, c.ID, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "the last"}})
	if err != nil {
		return err
	}
	last := ack.Sequence
	v, err := cl.WaitPosition(ctx, c.ID, last)
	if err != nil {
		return err
	}
	if v.Artifacts < sz.DAG+sz.DAG/10 || v.Rejections > 0 {
		return fmt.Errorf("the large deliberation: %s, %d artifacts, %d rejections", v.Status, v.Artifacts, v.Rejections)
	}
	c.Last = last
	return nil
}

func (c *closureReads) run(ctx context.Context, e *engine, sz sizes, sent *atomic.Int64) (string, error) {
	var ok, refused, other atomic.Int64
	var next atomic.Uint64
	next.Store(c.At)
	span := c.Last - c.At
	base := "http://" + e.httpAddr + "/api/v1/deliberations/" + c.ID + "/closure/" + c.Decision.String() + "?at="
	var wg sync.WaitGroup
	for r := range sz.Readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := from("127.0.0.2", sent)
			rng := rand.New(rand.NewPCG(uint64(r), 3))
			for ctx.Err() == nil {
				// A position not asked before, between the decision's and
				// the deliberation's last (then round again, each a little
				// off the last round's).
				n := next.Add(1+uint64(rng.IntN(3))) - c.At
				at := c.At + n%span
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
	return fmt.Sprintf("a decision over %d artifacts, read at positions over the %d after it; %d readers: %d answered, %d refused 429, %d other", sz.DAG, span, sz.Readers, ok.Load(), refused.Load(), other.Load()), nil
}
