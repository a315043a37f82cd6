package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/jstest"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// bare starts a JetStream server with no engine behind it (and no
// stream): what answers the query API is the test's.
func bare(t *testing.T) (*server.Server, *nats.Conn) {
	t.Helper()
	return jstest.Start(t)
}

func fast() client.Options {
	return client.Options{Timeout: 100 * time.Millisecond, RetryFor: 2 * time.Second, Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
}

const delib = "0190f5c2-0000-7000-8000-000000000001"

// A reply lost on its way (the engine's answer dropped in a reconnect)
// is asked again once the attempt's deadline passes.
func TestClient_StateRetriesALostReply(t *testing.T) {
	_, nc := bare(t)
	var n atomic.Int32
	sub, err := nc.Subscribe(wire.MicroPrefix+".deliberation", func(m *nats.Msg) {
		if n.Add(1) == 1 {
			return // lost
		}
		m.Respond([]byte(`{"id":"` + delib + `","status":"open","position":7}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	c, _ := client.NewWithOptions(nc, "alice", fast())
	v, err := c.State(context.Background(), delib)
	if err != nil {
		t.Fatal(err)
	}
	if v.Position != 7 || n.Load() != 2 {
		t.Fatalf("state %+v after %d requests, want position 7 after 2", v, n.Load())
	}
}

// With no engine at all (no responders) or one that never answers, a read
// ends with ErrUnavailable after its retries, never a hang; an error
// answer that is not retryable ends it at once.
func TestClient_ReadGivesUp(t *testing.T) {
	_, nc := bare(t)
	// RetryFor is many attempts long, so that a loaded machine (timers
	// late by hundreds of milliseconds under -race) still sees several.
	c, _ := client.NewWithOptions(nc, "alice", client.Options{Timeout: 50 * time.Millisecond, RetryFor: 1500 * time.Millisecond, Backoff: 10 * time.Millisecond})

	_, err := c.State(context.Background(), delib)
	var ue *client.UnavailableError
	if !errors.Is(err, client.ErrUnavailable) || !errors.As(err, &ue) || ue.Attempts < 2 || !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("no responders: %v, want ErrUnavailable after several attempts", err)
	}

	var silent atomic.Int32
	sub, _ := nc.Subscribe(wire.MicroPrefix+".artifact", func(*nats.Msg) { silent.Add(1) })
	defer sub.Unsubscribe()
	_, _, err = c.Artifact(context.Background(), delib, "sha256:00")
	if !errors.Is(err, client.ErrUnavailable) || silent.Load() < 2 {
		t.Fatalf("silent engine: %v after %d requests, want ErrUnavailable after several", err, silent.Load())
	}

	var asked atomic.Int32
	sub2, _ := nc.Subscribe(wire.MicroPrefix+".closure", func(m *nats.Msg) {
		asked.Add(1)
		r := nats.NewMsg(m.Reply)
		r.Header.Set("Nats-Service-Error-Code", "400")
		r.Header.Set("Nats-Service-Error", "bad")
		r.Data = []byte(`{"code":"bad_request","error":"bad"}`)
		m.RespondMsg(r)
	})
	defer sub2.Unsubscribe()
	_, err = c.Closure(context.Background(), delib, "x", 0)
	var se *client.ServiceError
	if !errors.As(err, &se) || se.Code != "bad_request" || errors.Is(err, client.ErrUnavailable) || asked.Load() != 1 {
		t.Fatalf("400: %v after %d requests, want the ServiceError after one", err, asked.Load())
	}

	// The caller's context still ends it sooner.
	slow, _ := client.NewWithOptions(nc, "alice", client.Options{Timeout: 50 * time.Millisecond, RetryFor: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := slow.State(ctx, delib); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("ctx: %v, want the caller's deadline", err)
	}
}

// Reads carry the position of the client's last acknowledged publish, and
// an engine that answers projection.behind is asked again.
func TestClient_ReadYourWrites(t *testing.T) {
	_, nc := bare(t)
	js, _ := jetstream.New(nc)
	if _, err := ledger.Ensure(context.Background(), js, 1); err != nil {
		t.Fatal(err)
	}
	c, _ := client.NewWithOptions(nc, "alice", fast())
	_, ack, err := c.Publish(context.Background(), delib, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "s"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Seen() != ack.Sequence {
		t.Fatalf("seen %d, want %d", c.Seen(), ack.Sequence)
	}
	var mu sync.Mutex
	var mins []uint64
	sub, _ := nc.Subscribe(wire.MicroPrefix+".deliberation", func(m *nats.Msg) {
		var req struct {
			MinPosition uint64 `json:"min_position"`
		}
		json.Unmarshal(m.Data, &req)
		mu.Lock()
		mins = append(mins, req.MinPosition)
		n := len(mins)
		mu.Unlock()
		if n <= 2 {
			r := nats.NewMsg(m.Reply)
			r.Header.Set("Nats-Service-Error-Code", "503")
			r.Header.Set("Nats-Service-Error", "behind")
			r.Data = []byte(`{"code":"projection.behind","error":"behind","projected":0}`)
			m.RespondMsg(r)
			return
		}
		m.Respond([]byte(`{"id":"` + delib + `","position":1}`))
	})
	defer sub.Unsubscribe()
	if _, err := c.State(context.Background(), delib); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(mins) != 3 {
		t.Fatalf("%d requests, want 3 (two behind answers, then the state)", len(mins))
	}
	for _, m := range mins {
		if m != ack.Sequence {
			t.Fatalf("min_position %v, want %d on each", mins, ack.Sequence)
		}
	}
	off, _ := client.NewWithOptions(nc, "bob", client.Options{NoReadYourWrites: true})
	mins = nil
	mu.Unlock()
	_, _, err = off.Publish(context.Background(), delib, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "t"}})
	if err == nil {
		_, err = off.State(context.Background(), delib)
	}
	mu.Lock()
	if err != nil || len(mins) == 0 {
		t.Fatalf("NoReadYourWrites: %v after %d requests", err, len(mins))
	}
	for _, m := range mins {
		if m != 0 {
			t.Fatalf("NoReadYourWrites: min_position %v, want none", mins)
		}
	}
}

// A publish the stream deduplicates is retried while no stream answers
// (here: the stream is created while the client waits, as a new leader is
// elected during an election), and stored once.
func TestClient_PublishRetriesUntilTheStreamAnswers(t *testing.T) {
	_, nc := bare(t)
	js, _ := jetstream.New(nc)
	c, _ := client.NewWithOptions(nc, "alice", fast())
	go func() {
		time.Sleep(300 * time.Millisecond) // the stream appears while the client retries: the subject
		ledger.Ensure(context.Background(), js, 1)
	}()
	_, ack, err := c.Publish(context.Background(), delib, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "s"}})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := js.Stream(context.Background(), wire.StreamName)
	info, _ := st.Info(context.Background())
	if ack.Sequence != 1 || info.State.Msgs != 1 {
		t.Fatalf("ack %d, stream holds %d, want the one message once", ack.Sequence, info.State.Msgs)
	}

	// With no stream and no time to wait for one, the error says so.
	_, nc2 := bare(t)
	c2, _ := client.NewWithOptions(nc2, "alice", client.Options{Timeout: 50 * time.Millisecond, RetryFor: 200 * time.Millisecond})
	if _, _, err := c2.Publish(context.Background(), delib, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "s"}}); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("no stream: %v, want ErrUnavailable", err)
	}
}

func engine(t *testing.T) (*service.Service, *nats.Conn) {
	t.Helper()
	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return s, nc
}

// Watch leaves no goroutine behind once it returns, however it ends.
func TestClient_WatchLeavesNoGoroutine(t *testing.T) {
	_, nc := engine(t)
	c, _ := client.New(nc, "alice")
	ctx := context.Background()
	id, err := c.Open(ctx, client.Charter{Title: "watch"})
	if err != nil {
		t.Fatal(err)
	}
	once := func() {
		if err := c.Watch(ctx, id, func(api.View) bool { return false }); err != nil {
			t.Fatal(err)
		}
	}
	once() // the connection's own goroutines start on first use
	before := settled(-1)
	const n = 50
	for range n {
		once()
	}
	after := settled(before)
	if after > before+5 {
		t.Fatalf("%d goroutines after %d watches, %d before: Watch leaks", after, n, before)
	}
}

// settled returns the count of this process's goroutines that are not
// the in-process NATS server's (whose ephemeral consumers outlive a watch
// by their inactive threshold) once it has stopped falling, or has reached
// want.
func settled(want int) int {
	n := clientGoroutines()
	for i := 0; i < 100 && n != want; i++ {
		time.Sleep(20 * time.Millisecond)
		m := clientGoroutines()
		if m == n && want < 0 {
			return n
		}
		n = m
	}
	return n
}

func clientGoroutines() int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.HasPrefix(g, "goroutine ") && !strings.Contains(g, "nats-server/v2/server") {
			n++
		}
	}
	return n
}

// A request under way when the connection reconnects (its server
// restarted) is sent again at once, not after its attempt's deadline: its
// answer was lost with the old connection.
func TestClient_RetriesAtAReconnect(t *testing.T) {
	port := freePort(t)
	dir := t.TempDir()
	start := func() (*server.Server, error) {
		return embedded.Start(embedded.Config{Dir: dir, Host: "127.0.0.1", Port: port})
	}
	s, err := start()
	if err != nil {
		t.Fatal(err)
	}
	url := s.ClientURL()
	opts := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(20 * time.Millisecond)}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	engine, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	var n atomic.Int32
	first := make(chan struct{})
	if _, err := engine.Subscribe(wire.MicroPrefix+".deliberation", func(m *nats.Msg) {
		if n.Add(1) == 1 {
			close(first) // this answer is lost: the server goes down
			return
		}
		m.Respond([]byte(`{"id":"` + delib + `","position":3}`))
	}); err != nil {
		t.Fatal(err)
	}
	engine.Flush()
	restarted := make(chan *server.Server, 1)
	go func() {
		<-first
		embedded.Stop(s)
		s2, err := start()
		if err != nil {
			t.Error(err)
		}
		restarted <- s2
	}()
	// An attempt's deadline far longer than the test's: only the
	// reconnect can end the first attempt in time.
	c, _ := client.NewWithOptions(nc, "alice", client.Options{Timeout: time.Minute, RetryFor: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v, err := c.State(ctx, delib)
	if err != nil || v.Position != 3 {
		t.Fatalf("state: %+v %v after %d requests", v, err, n.Load())
	}
	if s2 := <-restarted; s2 != nil {
		embedded.Stop(s2)
	}
}

func freePort(t *testing.T) int { return jstest.FreePort(t) }

// An engine that answers projection.behind while its projection moves on
// is waited for past the retries' time; one that stays at one position
// is given up after it; WaitOutcome waits for behind as for unprojected,
// until its context ends.
func TestClient_WaitPositionWaitsForAnEngineCatchingUp(t *testing.T) {
	_, nc := bare(t)
	var n atomic.Int32
	stuck := atomic.Bool{}
	behind := func(m *nats.Msg, projected int32) {
		r := nats.NewMsg(m.Reply)
		r.Header.Set("Nats-Service-Error-Code", "503")
		r.Header.Set("Nats-Service-Error", "behind")
		r.Data = []byte(`{"code":"projection.behind","error":"behind","projected":` + strconv.Itoa(int(projected)) + `}`)
		m.RespondMsg(r)
	}
	sub, _ := nc.Subscribe(wire.MicroPrefix+".deliberation", func(m *nats.Msg) {
		k := n.Add(1)
		switch {
		case stuck.Load():
			behind(m, 5)
		case k < 40:
			behind(m, k) // catching up, one position an answer
		default:
			m.Respond([]byte(`{"id":"` + delib + `","position":50}`))
		}
	})
	defer sub.Unsubscribe()
	opts := client.Options{Timeout: 100 * time.Millisecond, RetryFor: 100 * time.Millisecond, Backoff: 5 * time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	c, _ := client.NewWithOptions(nc, "alice", opts)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v, err := c.WaitPosition(ctx, delib, 50)
	if err != nil || v.Position != 50 {
		t.Fatalf("catching up: %+v %v after %d requests", v, err, n.Load())
	}
	stuck.Store(true)
	if _, err := c.WaitPosition(ctx, delib, 50); !errors.Is(err, client.ErrUnavailable) || ctx.Err() != nil {
		t.Fatalf("stuck: %v, want ErrUnavailable", err)
	}

	var asked atomic.Int32
	sub2, _ := nc.Subscribe(wire.MicroPrefix+".outcome", func(m *nats.Msg) { asked.Add(1); behind(m, 1) })
	defer sub2.Unsubscribe()
	octx, ocancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer ocancel()
	if _, err := c.WaitOutcome(octx, delib, 50, ""); !errors.Is(err, context.DeadlineExceeded) || asked.Load() < 2 {
		t.Fatalf("WaitOutcome: %v after %d requests, want the context's end after several", err, asked.Load())
	}
}

// A client has at most DefaultAsyncMaxPending asynchronous publishes in
// flight unless told otherwise: past it, PublishArtifactAsync waits for
// acknowledgements (here, a subscriber that never answers stands in for a
// stream that is slow to acknowledge). JetStream's own default (4,000)
// would let a fleet overflow the server's stream ingest queue.
func TestClient_AsyncInFlightBounded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []jetstream.JetStreamOpt
		limit int
	}{
		{"default", nil, client.DefaultAsyncMaxPending},
		{"the caller's", []jetstream.JetStreamOpt{jetstream.WithPublishAsyncMaxPending(40)}, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, nc := bare(t)
			// Acknowledges nothing until released, then everything.
			release := make(chan struct{})
			var once sync.Once
			defer once.Do(func() { close(release) })
			sink, err := nc.Subscribe(wire.ArtifactSubject(delib, ">"), func(m *nats.Msg) {
				<-release
				m.Respond([]byte(`{"stream":"` + wire.StreamName + `","seq":1}`))
			})
			if err != nil {
				t.Fatal(err)
			}
			defer sink.Unsubscribe()
			c, err := client.New(nc, "alice", tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.limit {
				a := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "claim " + strconv.Itoa(i)}})
				if _, err := c.PublishArtifactAsync(delib, a); err != nil {
					t.Fatalf("publish %d of %d: %v", i+1, tc.limit, err)
				}
			}
			over := make(chan error, 1)
			go func() {
				a := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "one too many"}})
				_, err := c.PublishArtifactAsync(delib, a)
				over <- err
			}()
			select {
			case err := <-over:
				t.Fatalf("publish %d returned at once (%v): more than %d in flight", tc.limit+1, err, tc.limit)
			case <-time.After(300 * time.Millisecond):
			}
			once.Do(func() { close(release) })
			if err := <-over; err != nil {
				t.Fatalf("publish %d once the others were acknowledged: %v", tc.limit+1, err)
			}
		})
	}
}

// CatchUp: the reads that follow carry the stream's last position, that of
// messages another client published.
func TestClient_CatchUp(t *testing.T) {
	_, nc := bare(t)
	js, _ := jetstream.New(nc)
	if _, err := ledger.Ensure(context.Background(), js, 1); err != nil {
		t.Fatal(err)
	}
	other, _ := client.NewWithOptions(nc, "bob", fast())
	var last uint64
	for i := range 3 {
		_, ack, err := other.Publish(context.Background(), delib, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "s" + strconv.Itoa(i)}})
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	mins := make(chan uint64, 4)
	sub, _ := nc.Subscribe(wire.MicroPrefix+".deliberation", func(m *nats.Msg) {
		var req struct {
			MinPosition uint64 `json:"min_position"`
		}
		json.Unmarshal(m.Data, &req)
		mins <- req.MinPosition
		m.Respond([]byte(`{"id":"` + delib + `"}`))
	})
	defer sub.Unsubscribe()
	c, _ := client.NewWithOptions(nc, "alice", fast())
	c.State(context.Background(), delib)
	if got := <-mins; got != 0 {
		t.Fatalf("before CatchUp the read carried min_position %d", got)
	}
	if err := c.CatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.State(context.Background(), delib)
	if got := <-mins; got != last || c.Seen() != last {
		t.Fatalf("after CatchUp: min_position %d, seen %d, want %d", got, c.Seen(), last)
	}
}

// Paged reads carry the client's last acknowledged publish as
// min_position, as every other read does: an engine that has not reached
// it waits or answers projection.behind, and the page is asked again,
// instead of "deliberation not found" from an engine still catching up.
func TestClient_PagesReadYourWrites(t *testing.T) {
	_, nc := bare(t)
	js, _ := jetstream.New(nc)
	if _, err := ledger.Ensure(context.Background(), js, 1); err != nil {
		t.Fatal(err)
	}
	c, _ := client.NewWithOptions(nc, "alice", fast())
	_, ack, err := c.Publish(context.Background(), delib, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "s"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, endpoint := range []string{"artifacts", "rejections", "deliberations"} {
		t.Run(endpoint, func(t *testing.T) {
			var mu sync.Mutex
			var mins []uint64
			sub, _ := nc.Subscribe(wire.MicroPrefix+"."+endpoint, func(m *nats.Msg) {
				var req struct {
					MinPosition uint64 `json:"min_position"`
				}
				json.Unmarshal(m.Data, &req)
				mu.Lock()
				mins = append(mins, req.MinPosition)
				n := len(mins)
				mu.Unlock()
				if n == 1 {
					r := nats.NewMsg(m.Reply)
					r.Header.Set("Nats-Service-Error-Code", "503")
					r.Header.Set("Nats-Service-Error", "behind")
					r.Data = []byte(`{"code":"projection.behind","error":"behind","projected":0}`)
					m.RespondMsg(r)
					return
				}
				if endpoint == "rejections" {
					m.Respond([]byte(`{"rejections":[],"total":0}`))
					return
				}
				m.Respond([]byte(`[]`))
			})
			defer sub.Unsubscribe()
			var err error
			switch endpoint {
			case "artifacts":
				_, _, err = c.ArtifactPage(context.Background(), delib, client.ListOptions{}, "")
			case "rejections":
				_, err = c.RejectionPage(context.Background(), delib, client.ListOptions{}, "")
			default:
				_, _, err = c.DeliberationPage(context.Background(), client.ListOptions{}, "")
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil || len(mins) != 2 || mins[0] != ack.Sequence || mins[1] != ack.Sequence {
				t.Fatalf("err %v, min_position on each request %v, want %d twice (behind, then the page)", err, mins, ack.Sequence)
			}
		})
	}
}
