package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/web"
)

// liveFeeds asks for sz.Feeds live feeds from each of sixteen loopback
// addresses, eight of one /24 and eight of other networks, holds every
// feed it gets and asks again a second after a refusal or an end. Near its
// end it asks for one feed as a signed-in reader from the attacker's own
// network, and one as a reader not signed in from a fresh network.
type liveFeeds struct {
	ID           string
	Most         int64
	Signed, Anon string
}

// check: the attacker got no more than the room of readers not signed in
// (web.MaxStreams - web.ReservedSignedIn), and a signed-in reader got a
// feed.
func (f *liveFeeds) check() string {
	if f.Most > web.MaxStreams-web.ReservedSignedIn || f.Signed != "200 OK" {
		return fmt.Sprintf("the attacker held %d feeds at once; a signed-in reader: %s", f.Most, f.Signed)
	}
	return ""
}

func init() { register(&liveFeeds{}) }

func (*liveFeeds) name() string { return "live-feeds" }

func (f *liveFeeds) setup(ctx context.Context, e *engine, _ sizes) error {
	nc, err := e.participant()
	if err != nil {
		return err
	}
	defer nc.Close()
	c, _ := client.New(nc, "orchestrator")
	f.ID, err = c.Open(ctx, client.Charter{Title: "watched by many"})
	return err
}

// counted counts the bytes a connection writes.
type counted struct {
	net.Conn
	sent *atomic.Int64
}

func (c counted) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.sent.Add(int64(n))
	return n, err
}

// from is an HTTP client whose connections come from host and count what
// they send.
func from(host string, sent *atomic.Int64) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(host)}}
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return counted{c, sent}, nil
	}}}
}

func (f *liveFeeds) run(ctx context.Context, e *engine, sz sizes, sent *atomic.Int64) (string, error) {
	url := "http://" + e.httpAddr + "/api/v1/deliberations/" + f.ID + "/events"
	var open, most, refused atomic.Int64
	var wg sync.WaitGroup
	hosts := []string{}
	for i := range 8 {
		hosts = append(hosts, fmt.Sprintf("127.0.0.%d", 2+i), fmt.Sprintf("127.0.%d.1", 1+i))
	}
	for _, host := range hosts {
		hc := from(host, sent)
		for range sz.Feeds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
					resp, err := hc.Do(req)
					if err == nil && resp.StatusCode == 200 {
						n := open.Add(1)
						for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
						}
						io.Copy(io.Discard, resp.Body)
						open.Add(-1)
					} else if err == nil {
						refused.Add(1)
					}
					if resp != nil {
						resp.Body.Close()
					}
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
				}
			}()
		}
	}
	// The probes, a little before the end.
	probe := func(host string, signedIn bool) string {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(pctx, "GET", url, nil)
		if signedIn {
			req.Header.Set("Authorization", "Bearer "+e.token)
		}
		resp, err := from(host, &atomic.Int64{}).Do(req)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		return resp.Status
	}
	var signed, anon string
	if dl, ok := ctx.Deadline(); ok {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(dl) * 4 / 5):
			signed, anon = probe("127.0.0.2", true), probe("127.0.250.1", false)
		}
	}
	wg.Wait()
	f.Most, f.Signed, f.Anon = most.Load(), signed, anon
	return fmt.Sprintf("%d asked at once from 16 addresses (8 of 127.0.0.0/24); at most %d served to them at once, %d refusals; a signed-in reader on the attacker's network: %s; a reader not signed in on a fresh network: %s",
		len(hosts)*sz.Feeds, most.Load(), refused.Load(), signed, anon), nil
}
