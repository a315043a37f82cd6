package httplimit_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/internal/httplimit"
)

// serve runs a real server with a budget of n connections on loopback;
// done receives once per request after its handler (and the budget's
// bookkeeping) has finished.
func serve(t *testing.T, l httplimit.Limits, n int, h http.Handler) (*httplimit.Budget, string, chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := httplimit.NewBudget(ln, n)
	b.EvictAfter, b.ShedAfter = 20*time.Millisecond, 20*time.Millisecond
	srv := l.Server(h, b)
	done := make(chan string, 1024)
	inner := srv.Handler
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(w, r)
		done <- r.URL.Path
	})
	go srv.Serve(b)
	t.Cleanup(func() { srv.Close() })
	return b, ln.Addr().String(), done
}

// slowBody opens a connection that sends a request's headers and one
// byte of its 100 KB body, and no more.
func slowBody(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 100000\r\n\r\nx", path, addr)
	return c
}

// TestBudget_SlowBodies: sockets that send headers and one byte of a body
// fill the budget and no more; past it, each new one waits until the one
// that waited longest has waited EvictAfter, and takes its place (it is
// closed); a fresh client is served so; when every connection is in a
// handler, a fresh one is answered 503 with Retry-After after ShedAfter.
func TestBudget_SlowBodies(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{}, 16)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			entered <- struct{}{}
			<-release
		}
		w.WriteHeader(http.StatusUnauthorized) // the body is never read
	})
	const n = 4
	b, addr, done := serve(t, httplimit.Default, n, h)
	// One after the other, each once the previous one's handler has
	// answered (without reading the body, which the server then waits
	// for): past n, each takes the place of the earliest.
	var slow []net.Conn
	for range 3 * n {
		slow = append(slow, slowBody(t, addr, "/slow"))
		<-done
	}
	st := b.Stats()
	if st.Open != n || st.Evicted != 2*n || st.Shed != 0 {
		t.Fatalf("after %d slow bodies: %+v, want %d open and %d evicted", 3*n, st, n, 2*n)
	}
	// The earliest were closed: their read ends.
	slow[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(slow[0]); err != nil && !isReset(err) {
		t.Errorf("the first slow body's connection: %v, want it closed", err)
	}
	resp, err := http.Get("http://" + addr + "/fresh")
	if err != nil {
		t.Fatalf("a fresh client while the budget is full: %v", err)
	}
	resp.Body.Close()
	<-done
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a fresh client: %d", resp.StatusCode)
	}
	if st := b.Stats(); st.Open != n || st.Evicted != 2*n+1 {
		t.Errorf("after a fresh client: %+v", st)
	}

	// Every place busy in a handler: the next is shed.
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	for range n {
		<-entered
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /probe HTTP/1.1\r\nHost: x\r\n\r\n")
	r, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	if r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"code":"limit.http_connections"`) {
		t.Errorf("a connection past a budget of busy ones: %d %v %s", r.StatusCode, r.Header, body)
	}
	if st := b.Stats(); st.Shed != 1 || st.LastHit.IsZero() {
		t.Errorf("after shedding: %+v", st)
	}
	close(release)
}

func isReset(err error) bool {
	return strings.Contains(err.Error(), "reset by peer")
}

// TestServer_Stream: a response lasts past the write timeout as long as
// each write is taken within it, and a request body past the limit is
// refused.
func TestServer_Stream(t *testing.T) {
	l := httplimit.Default
	l.Write = 100 * time.Millisecond
	l.MaxBodyBytes = 1000
	tick := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if _, err := io.ReadAll(r.Body); err != nil {
				http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			}
			return
		}
		rc := http.NewResponseController(w)
		w.WriteHeader(http.StatusOK)
		rc.Flush()
		for i := range 10 {
			<-tick
			fmt.Fprintf(w, "part %d\n", i)
			if err := rc.Flush(); err != nil {
				return
			}
		}
	})
	_, addr, _ := serve(t, l, 16, h)
	resp, err := http.Get("http://" + addr + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	start := time.Now()
	for i := range 10 {
		// The parts come slower than the write timeout, in all 10 times
		// it: each is sent once the previous one has been read.
		time.AfterFunc(l.Write/2, func() { tick <- struct{}{} })
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("part %d\n", i) {
			t.Fatalf("part %d after %v: %q %v", i, time.Since(start), line, err)
		}
	}
	big := strings.NewReader(strings.Repeat("x", 2000))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/body", big)
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a body past the limit: %d", resp2.StatusCode)
	}
}

// TestBudget_YoungNotEvicted: a full budget of connections that have not
// yet waited EvictAfter evicts none of them; the next connection is shed
// after ShedAfter.
func TestBudget_YoungNotEvicted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := httplimit.NewBudget(ln, 2)
	b.EvictAfter, b.ShedAfter = time.Hour, 10*time.Millisecond
	done := make(chan struct{}, 8)
	srv := httplimit.Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}), b)
	inner := srv.Handler
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { inner.ServeHTTP(w, r); done <- struct{}{} })
	go srv.Serve(b)
	defer srv.Close()
	addr := ln.Addr().String()
	a, c := slowBody(t, addr, "/"), slowBody(t, addr, "/")
	<-done
	<-done
	resp, err := http.Get("http://" + addr + "/fresh")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a connection past a budget of young ones: %d", resp.StatusCode)
	}
	if st := b.Stats(); st.Evicted != 0 || st.Shed != 1 || st.Open != 2 {
		t.Errorf("%+v", st)
	}
	for _, x := range []net.Conn{a, c} {
		x.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := x.Read(make([]byte, 1)); err == nil || !isTimeout(err) {
			t.Errorf("a young connection was closed: %v", err)
		}
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
