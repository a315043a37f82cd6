package web

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-engine/parley/internal/httplimit"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/wire"
)

// An idle feed writes a heartbeat comment every Heartbeat, and ends when
// the client goes away (its place among MaxFeeds is given back).
func TestLiveFeedHeartbeat(t *testing.T) {
	r := runner.NewInMemory(1, projector.Options{})
	const id = "019ad3f0-0000-7000-8000-000000000001"
	if out := r.ApplyInMemory(projector.Msg{Seq: 1, Subject: wire.ControlSubject(id), Data: []byte(`{"op":"open","charter":{"title":"t"}}`)}); out.Control != "open" {
		t.Fatal("not opened")
	}
	e := New(r, nil)
	e.Poll, e.Heartbeat = 5*time.Millisecond, 20*time.Millisecond
	mux := http.NewServeMux()
	e.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/deliberations/"+id+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	var lines []string
	beats := 0
	for beats < 3 && sc.Scan() {
		lines = append(lines, sc.Text())
		if sc.Text() == ": heartbeat" {
			beats++
		}
	}
	if beats < 3 || !strings.Contains(strings.Join(lines, "\n"), "event: ready") {
		t.Fatalf("%d heartbeats in %q (%v)", beats, lines, sc.Err())
	}
	if n := e.FeedStats().Open; n != 1 {
		t.Fatalf("%d feeds open", n)
	}
	cancel()
	resp.Body.Close()
	for deadline := time.Now().Add(5 * time.Second); e.FeedStats().Open != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the feed did not end when its client went away")
		}
	}
}

// A feed open when the engine halts ends.
func TestLiveFeedHalt(t *testing.T) {
	r := runner.NewInMemory(1, projector.Options{})
	const id = "019ad3f0-0000-7000-8000-000000000002"
	r.ApplyInMemory(projector.Msg{Seq: 1, Subject: wire.ControlSubject(id), Data: []byte(`{"op":"open","charter":{"title":"t"}}`)})
	e := New(r, nil)
	e.Poll = 5 * time.Millisecond
	var halted atomic.Bool
	e.Halted = func() error {
		if halted.Load() {
			return errors.New("halted")
		}
		return nil
	}
	mux := http.NewServeMux()
	e.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/deliberations/"+id+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && sc.Text() != "event: ready" {
	}
	halted.Store(true)
	for sc.Scan() {
	}
	if ctx.Err() != nil {
		t.Fatal("the feed did not end when the engine halted")
	}
}

// A feed outlives the server's read and write timeouts: each write must be
// taken within the write timeout, not the whole feed (internal/httplimit).
func TestLiveFeedTimeouts(t *testing.T) {
	r := runner.NewInMemory(1, projector.Options{})
	const id = "019ad3f0-0000-7000-8000-000000000003"
	r.ApplyInMemory(projector.Msg{Seq: 1, Subject: wire.ControlSubject(id), Data: []byte(`{"op":"open","charter":{"title":"t"}}`)})
	e := New(r, nil)
	e.Poll, e.Heartbeat = 5*time.Millisecond, 10*time.Millisecond
	mux := http.NewServeMux()
	e.Register(mux)
	l := httplimit.Default
	l.Read, l.Write = 50*time.Millisecond, 50*time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := l.Server(mux, nil)
	go srv.Serve(ln)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+ln.Addr().String()+"/api/v1/deliberations/"+id+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	start := time.Now()
	beats := 0
	// 40 heartbeats, 10 ms apart: the feed lasts several times both
	// timeouts.
	for beats < 40 && sc.Scan() {
		if sc.Text() == ": heartbeat" {
			beats++
		}
	}
	if beats < 40 {
		t.Fatalf("the feed ended after %d heartbeats, %v (read and write timeouts %v): %v", beats, time.Since(start), l.Write, sc.Err())
	}
	if took := time.Since(start); took < 4*l.Write {
		t.Fatalf("40 heartbeats in %v: the feed did not outlast the timeouts", took)
	}
}
