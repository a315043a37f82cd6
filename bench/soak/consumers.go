package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/wire"
)

// consumers is a client without credentials creating push consumers of
// the stream as fast as it can (readers may: they read the stream with
// ordered push consumers), from eight connections, each consumer
// delivering the whole stream to an inbox the client listens on and
// throws away what arrives, so that every consumer stays wanted. The
// engine deletes the consumers past its bound (health.DefaultMaxConsumers); the
// check: the stream never held more than the bound and a few more (the
// ones created in the moment before the engine saw them), and a fresh
// reader still reads.
type consumers struct {
	Insider          bool
	Bound            int // the engine's bound on consumers
	Created, Refused int64
	Most             int    // the stream's consumers, most seen
	After            int    // the stream's consumers once the engine swept, after the attack
	Reader           string // a fresh reader's first message: "" when read
}

func init() { register(&consumers{}) }

func (*consumers) name() string { return "consumers" }

// setup publishes a deliberation of 5,000 claims for each consumer to
// deliver.
func (c *consumers) setup(ctx context.Context, e *engine, _ sizes) error {
	nc, err := e.participant()
	if err != nil {
		return err
	}
	defer nc.Close()
	cl, _ := client.New(nc, "builder")
	id, err := cl.Open(ctx, client.Charter{Title: "read by many"})
	if err != nil {
		return err
	}
	js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	for i := range 5000 {
		a := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprintf("claim %d", i)}})
		if _, err := js.PublishAsync(wire.ArtifactSubject(id, "builder"), a.Canonical, jetstream.WithStallWait(time.Minute)); err != nil {
			return err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (*consumers) credentialed() {}

func (c *consumers) check() string {
	switch {
	case !c.Insider && c.Created > 0:
		return fmt.Sprintf("a client without credentials created %d consumers", c.Created)
	case !c.Insider:
		return ""
	case c.Created == 0:
		return "created no consumer"
	case c.After > c.Bound+1:
		return fmt.Sprintf("after the attack the stream still held %d consumers (bound %d and the engine's own)", c.After, c.Bound)
	}
	return ""
}

func (c *consumers) run(ctx context.Context, e *engine, sz sizes, sent *atomic.Int64) (string, error) {
	c.Insider, c.Bound = e.insider, sz.consumerBound()
	var created, refused atomic.Int64
	var most atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		nc, err := e.attacker(nats.MaxReconnects(-1), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			return "", err
		}
		defer nc.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				name := nuid.Next()
				inbox := "_INBOX." + nuid.Next()
				sub, err := nc.Subscribe(inbox, func(*nats.Msg) {})
				if err != nil {
					return
				}
				sub.SetPendingLimits(-1, -1)
				req, _ := json.Marshal(map[string]any{"stream_name": wire.StreamName, "config": map[string]any{
					"name": name, "deliver_subject": inbox, "deliver_policy": "all", "ack_policy": "none",
					"inactive_threshold": int64(time.Hour), "mem_storage": true,
				}})
				subject := "$JS.API.CONSUMER.CREATE." + wire.StreamName + "." + name
				sent.Add(int64(len(req) + len(subject)))
				rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				m, err := nc.RequestWithContext(rctx, subject, req)
				cancel()
				if err != nil {
					refused.Add(1)
					sub.Unsubscribe()
					if ctx.Err() == nil {
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				var resp struct {
					Error *struct{ Description string } `json:"error"`
				}
				if json.Unmarshal(m.Data, &resp) == nil && resp.Error == nil {
					created.Add(1)
				} else {
					refused.Add(1)
					sub.Unsubscribe()
				}
			}
		}()
	}
	// The stream's consumers, as the operator sees them.
	wg.Add(1)
	go func() {
		defer wg.Done()
		nc, err := e.participant()
		if err != nil {
			return
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		for ctx.Err() == nil {
			if s, err := js.Stream(ctx, wire.StreamName); err == nil {
				if n := int64(s.CachedInfo().State.Consumers); n > most.Load() {
					most.Store(n)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	// A fresh reader (a participant), near the end.
	if dl, ok := ctx.Deadline(); ok {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(dl) * 4 / 5):
			if err := freshReader(e); err != nil {
				c.Reader = err.Error()
			}
		}
	}
	wg.Wait()
	c.Created, c.Refused, c.Most = created.Load(), refused.Load(), int(most.Load())
	// Under the flood the engine's deletions come no faster than the
	// creations (the server is busy delivering); once it ends, the
	// engine's sweep (every 30 s at most) brings the stream back within
	// the bound, the attacker's connections still open.
	c.After = c.sweptTo(e)
	reader := "read"
	if c.Reader != "" {
		reader = c.Reader
	}
	return fmt.Sprintf("%d consumers created, %d refused or unanswered; the stream held at most %d at once, %d once the engine swept after the attack (bound %d); a fresh participant's reader: %s",
		c.Created, c.Refused, c.Most, c.After, c.Bound, reader), nil
}

// sweptTo waits up to 45 s for the stream to hold the bound's consumers
// and the engine's own, and returns how many it holds then.
func (c *consumers) sweptTo(e *engine) int {
	nc, err := e.participant()
	if err != nil {
		return -1
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	n := -1
	for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := js.Stream(ctx, wire.StreamName)
		cancel()
		if err != nil {
			continue
		}
		if n = s.CachedInfo().State.Consumers; n <= c.Bound+1 {
			break
		}
	}
	return n
}

// freshReader reads the first message of the stream as a participant's
// reader does (ledger.Reader: an ordered push consumer).
func freshReader(e *engine) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := e.participant()
	if err != nil {
		return err
	}
	defer nc.Close()
	rd, err := ledger.Read(ctx, nc, wire.SubjectPrefix+">", 0)
	if err != nil {
		return err
	}
	defer rd.Stop()
	_, err = rd.Next(ctx)
	return err
}
