//go:build unix

package service_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/health"
	"github.com/parley-engine/parley/metrics"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// childEnv makes the test binary an engine with a lowered descriptor
// limit (TestHostileHTTP_SlowBodiesLeaveNATS).
const childEnv = "PARLEY_TEST_ENGINE_FDS"

// One TCP client with no credentials, many sockets that each send a
// request's headers and one byte of a 100 KB body: in an engine whose
// process may open 512 descriptors (an engine of its own, as engine
// serve is), the sockets fill the HTTP connection budget and no more; a
// fresh NATS client connects and reads the stream, and a fresh HTTP client
// is served, while the budget is full (each new connection taking the
// place of one that has waited for its request longer than EvictAfter,
// shortened here); /healthz and /metrics say the
// bound is being hit. Without the budget the sockets took every
// descriptor, and the NATS listener failed with "too many open files".
func TestHostileHTTP_SlowBodiesLeaveNATS(t *testing.T) {
	if limit := os.Getenv(childEnv); limit != "" {
		runChildEngine(t, limit)
		return
	}
	const limit, sockets = 512, 700
	cmd := exec.Command(os.Args[0], "-test.run=^TestHostileHTTP_SlowBodiesLeaveNATS$")
	cmd.Env = append(os.Environ(), childEnv+"="+strconv.Itoa(limit), "PARLEY_TEST_DATA="+t.TempDir())
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	sc := bufio.NewScanner(stdout)
	var natsURL, httpAddr string
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "ENGINE" {
			natsURL, httpAddr = f[1], f[2]
			break
		}
	}
	if httpAddr == "" {
		t.Fatalf("the engine did not start: %v", sc.Err())
	}
	go io.Copy(io.Discard, stdout)

	// The attack: each socket's request is answered (401: no token) or
	// the socket closed to make room; either way the engine took it.
	// Sockets it never accepts (the kernel's queue, once the process is
	// out of descriptors) stay silent until the deadline.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range sockets {
		c, err := net.Dial("tcp", httpAddr)
		if err != nil {
			t.Fatalf("socket %d: %v", len(conns)+1, err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /api/v1/deliberations/x/bindings/y HTTP/1.1\r\nHost: %s\r\nContent-Length: 100000\r\n\r\nx", httpAddr)
	}
	// With a budget of a quarter of the limit (fdplan.Descriptors), all
	// but a budget's worth are closed to make room, about the earliest
	// first; the sockets it holds wait for their bodies.
	const budget = limit / 4
	deadline := time.Now().Add(15 * time.Second)
	ends := make(chan bool, sockets)
	for _, c := range conns {
		go func() {
			c.SetReadDeadline(deadline)
			_, err := io.ReadAll(c)
			ends <- err == nil || !isTimeout(err)
		}()
	}
	closed := 0
	for range sockets {
		if <-ends {
			if closed++; closed == sockets-budget {
				break
			}
		}
	}
	if closed != sockets-budget {
		t.Errorf("%d of %d slow-body sockets closed to make room, want %d", closed, sockets, sockets-budget)
	}

	// A fresh NATS client connects and reads the stream.
	nc, err := nats.Connect(natsURL, nats.Timeout(10*time.Second))
	if err != nil {
		t.Fatalf("a fresh NATS client while the HTTP budget is full: %v", err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.Stream(ctx, wire.StreamName); err != nil {
		t.Fatalf("a fresh NATS client reads the stream: %v", err)
	}
	// A fresh HTTP client is served, and /healthz says the bound is hit.
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + httpAddr + "/healthz")
	if err != nil {
		t.Fatalf("a fresh HTTP client while the budget is full: %v", err)
	}
	var h health.Health
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	var b metrics.Bound
	for _, x := range h.Bounds {
		if x.Name == "limit.http_connections" {
			b = x
		}
	}
	if resp.StatusCode != 200 || b.InUse != b.Limit || !b.Recent || !strings.Contains(strings.Join(h.BoundsHit, ","), "limit.http_connections") {
		t.Errorf("/healthz while the budget is full: %d, bound %+v, hit %v", resp.StatusCode, b, h.BoundsHit)
	}
	if b.Limit != budget || b.Hits < sockets-budget {
		t.Errorf("the budget: %+v, want a limit of %d and %d hits or more", b, budget, sockets-budget)
	}
	resp, err = hc.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "parley_http_connections_evicted_total ") || strings.Contains(string(body), "parley_http_connections_evicted_total 0\n") {
		t.Errorf("/metrics does not count the evictions:\n%s", grep(string(body), "parley_http_connections"))
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func grep(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// runChildEngine is the engine of TestHostileHTTP_SlowBodiesLeaveNATS: its
// descriptor limit lowered (soft and hard, so that the engine cannot raise
// it), it prints its addresses and runs until its standard input closes.
func runChildEngine(t *testing.T, limit string) {
	n, _ := strconv.ParseUint(limit, 10, 64)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
		t.Fatal(err)
	}
	s, err := service.Start(context.Background(), service.Config{DataDir: os.Getenv("PARLEY_TEST_DATA"), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0",
		HTTPEvictAfter: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fmt.Printf("ENGINE %s %s\n", s.NATSURL(), s.HTTPAddr())
	io.Copy(io.Discard, os.Stdin)
}
