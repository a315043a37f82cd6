package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/client"
)

// metricLabels sends sz.LabelRate messages a second, each with names a
// label could be made of: junk artifacts under random participant tokens
// into an open deliberation, into deliberations never opened, control
// messages of random deliberations, advisories of random kinds (which the
// embedded default refuses), and HTTP requests to random paths with random
// methods and queries. It reports the series /metrics holds before and
// after.
type metricLabels struct {
	ID                  string
	Msgs, Before, After int
}

// check: the flood's names add no series (a few for the rejection codes
// its junk is refused with, from the engine's fixed set).
func (m *metricLabels) check() string {
	if m.Msgs < 100 || m.After-m.Before > 32 {
		return fmt.Sprintf("%d hostile messages; /metrics series %d before, %d after", m.Msgs, m.Before, m.After)
	}
	return ""
}

func init() { register(&metricLabels{}) }

func (*metricLabels) name() string { return "metric-labels" }

func (m *metricLabels) setup(ctx context.Context, e *engine, _ sizes) error {
	nc, err := e.participant()
	if err != nil {
		return err
	}
	defer nc.Close()
	c, _ := client.New(nc, "orchestrator")
	m.ID, err = c.Open(ctx, client.Charter{Title: "open to junk"})
	return err
}

// series counts the samples /metrics holds.
func series(e *engine) (int, error) {
	resp, err := http.Get("http://" + e.httpAddr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); l != "" && !strings.HasPrefix(l, "#") {
			n++
		}
	}
	return n, sc.Err()
}

func token(rng *rand.Rand) string {
	const a = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 4+rng.IntN(20))
	for i := range b {
		b[i] = a[rng.IntN(len(a))]
	}
	return string(b)
}

func (m *metricLabels) run(ctx context.Context, e *engine, sz sizes, sent *atomic.Int64) (string, error) {
	before, err := series(e)
	if err != nil {
		return "", err
	}
	nc, err := e.attacker(nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		return "", err
	}
	defer nc.Close()
	hc := from("127.0.0.2", sent)
	rng := rand.New(rand.NewPCG(1, 2))
	junk := make([]byte, 2048)
	for i := range junk {
		junk[i] = byte(' ' + rng.IntN(90))
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	per := max(1, sz.LabelRate/100)
	msgs, reqs := 0, 0
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		for range per {
			body := junk[:64+rng.IntN(len(junk)-64)]
			var subj string
			switch k := rng.IntN(10); {
			case k < 4:
				subj = "parley." + m.ID + ".art." + token(rng)
			case k < 6:
				subj = "parley." + uuid.NewString() + ".art." + token(rng)
			case k < 7:
				subj = "parley." + token(rng) + ".ctl"
			case k < 8:
				subj = "$JS.EVENT.ADVISORY.STREAM." + strings.ToUpper(token(rng)) + ".PARLEY"
			default:
				methods := []string{"GET", "HEAD", "OPTIONS", "DELETE", strings.ToUpper(token(rng))}
				path := fmt.Sprintf("/api/v1/%s/%s?%s=%s", token(rng), token(rng), token(rng), token(rng))
				if rng.IntN(2) == 0 {
					path = "/api/v1/deliberations/" + m.ID + "/" + token(rng)
				}
				req, _ := http.NewRequestWithContext(ctx, methods[rng.IntN(len(methods))], "http://"+e.httpAddr+path, nil)
				req.Header.Set("X-"+token(rng), token(rng))
				if resp, err := hc.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				reqs++
				continue
			}
			if nc.Publish(subj, body) == nil {
				sent.Add(int64(len(subj) + len(body)))
				msgs++
			}
		}
	}
	nc.Flush()
	after, err := series(e)
	if err != nil {
		return "", err
	}
	m.Msgs, m.Before, m.After = msgs, before, after
	return fmt.Sprintf("%d messages and %d HTTP requests of random names; /metrics series %d before, %d after", msgs, reqs, before, after), nil
}

func (*metricLabels) writes() {}
