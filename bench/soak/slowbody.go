package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// slowBodies holds sz.Sockets sockets open on the engine's HTTP address,
// each sending a request's headers and one byte of its 100 KB body and
// nothing more; a socket the engine closes is opened again a second
// later. The sockets come from eight loopback addresses (one client holds
// many addresses of its network) and are reset when they end, so that the
// churn leaves no TIME_WAIT behind to run the machine out of ports.
type slowBodies struct{}

func init() { register(&slowBodies{}) }

func (*slowBodies) name() string                                { return "slow-bodies" }
func (*slowBodies) setup(context.Context, *engine, sizes) error { return nil }

func (*slowBodies) run(ctx context.Context, e *engine, sz sizes, sent *atomic.Int64) (string, error) {
	var dials, ended, failed atomic.Int64
	var wg sync.WaitGroup
	for i := range sz.Sockets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%8))}}
			// Spread the first connections over the first second.
			wait := time.Duration(i) * time.Second / time.Duration(sz.Sockets)
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
				wait = time.Second
				c, err := d.DialContext(ctx, "tcp", e.httpAddr)
				if err != nil {
					failed.Add(1)
					continue
				}
				dials.Add(1)
				n, _ := fmt.Fprintf(c, "POST /api/v1/deliberations/x/bindings/y HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", e.httpAddr)
				sent.Add(int64(n))
				stop := context.AfterFunc(ctx, func() { c.Close() })
				io.Copy(io.Discard, c) // until the engine closes it
				stop()
				if tc, ok := c.(*net.TCPConn); ok {
					tc.SetLinger(0)
				}
				c.Close()
				if ctx.Err() == nil {
					ended.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return fmt.Sprintf("%d sockets at once; %d connections opened, %d closed by the engine, %d dials failed", sz.Sockets, dials.Load(), ended.Load(), failed.Load()), nil
}
