package httplimit

import (
	"container/list"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Budget is a listener that holds at most Max connections open at once,
// whatever clients do, so that HTTP never takes the descriptors the rest
// of the process needs.
//
// A connection is either in a request's handler (busy), or waiting: for
// its first request, for the rest of a request being read, for its body to
// be drained after the answer, or kept alive between requests. When the
// budget is full, Accept takes no new connection (they wait in the
// system's queue, costing the process nothing) until one closes or one
// has waited EvictAfter; then the new connection takes the place of the
// one that has waited longest, which is closed (evicted). A client that
// holds sockets by sending requests slowly holds them for EvictAfter, not
// for the read timeout, and loses them to the next clients, at most a
// budget every EvictAfter (which bounds what its churn costs). When the
// full budget has nothing to evict for ShedAfter, the next connection is
// answered 503 with Retry-After and closed (shed). A busy connection is
// never closed for the budget: handlers bound themselves (a live feed's
// cap, the read budget, the write timeout).
type Budget struct {
	net.Listener
	max int
	// EvictAfter is how long a connection may wait for a request before a
	// full budget may give its place to a new one; ShedAfter how long a
	// full budget with nothing to evict waits before it sheds. NewBudget
	// sets DefaultEvictAfter and DefaultShedAfter; set them before serving.
	EvictAfter, ShedAfter time.Duration

	mu      sync.Mutex
	open    int
	waiting list.List     // of *conn, the longest waiting first
	freed   chan struct{} // closed (and replaced) when a connection closes
	closed  chan struct{}
	once    sync.Once

	accepted, evicted, shed atomic.Uint64
	lastHit                 atomic.Int64 // unix nanoseconds of the last eviction or shedding
	refusing                chan struct{}
}

// The defaults of a budget: a client sends its request within
// milliseconds of connecting or of its previous answer; one that has not
// in 10 s (the header timeout) is slow or idle.
const (
	DefaultEvictAfter = 10 * time.Second
	DefaultShedAfter  = time.Second
)

// maxRefusing bounds the connections being answered 503 at once (each
// holds a descriptor for at most refuseTime); past it a connection to shed
// is closed without an answer.
const (
	maxRefusing = 16
	refuseTime  = time.Second
)

// NewBudget returns ln with a budget of n connections (at least 1).
func NewBudget(ln net.Listener, n int) *Budget {
	return &Budget{Listener: ln, max: max(n, 1), EvictAfter: DefaultEvictAfter, ShedAfter: DefaultShedAfter,
		freed: make(chan struct{}), closed: make(chan struct{}), refusing: make(chan struct{}, maxRefusing)}
}

// Close closes the listener; an Accept waiting for room returns.
func (b *Budget) Close() error {
	b.once.Do(func() { close(b.closed) })
	return b.Listener.Close()
}

// BudgetStats are a budget's counts.
type BudgetStats struct {
	Max, Open int
	// Accepted, Evicted and Shed count connections since the start:
	// admitted, closed to make room, answered 503.
	Accepted, Evicted, Shed uint64
	// LastHit is when the budget last evicted or shed (zero: never).
	LastHit time.Time
}

// Stats returns the budget's counts.
func (b *Budget) Stats() BudgetStats {
	b.mu.Lock()
	st := BudgetStats{Max: b.max, Open: b.open}
	b.mu.Unlock()
	st.Accepted, st.Evicted, st.Shed = b.accepted.Load(), b.evicted.Load(), b.shed.Load()
	if t := b.lastHit.Load(); t != 0 {
		st.LastHit = time.Unix(0, t)
	}
	return st
}

// roomLocked says whether a new connection can be taken now (a free
// place, or one to evict), and otherwise how long until the longest
// waiting may be evicted (0: none is waiting).
func (b *Budget) roomLocked(now time.Time) (bool, time.Duration) {
	if b.open < b.max {
		return true, 0
	}
	front := b.waiting.Front()
	if front == nil {
		return false, 0
	}
	if d := front.Value.(*conn).since.Add(b.EvictAfter).Sub(now); d > 0 {
		return false, d
	}
	return true, 0
}

// Accept returns the next connection within the budget.
func (b *Budget) Accept() (net.Conn, error) {
	waited := time.Duration(0)
	for {
		// Wait for room before taking a connection from the system's
		// queue.
		b.mu.Lock()
		room, until := b.roomLocked(time.Now())
		freed := b.freed
		b.mu.Unlock()
		if !room && waited < b.ShedAfter {
			wait := b.ShedAfter - waited
			if until > 0 {
				wait = min(wait, until)
			}
			t0 := time.Now()
			t := time.NewTimer(wait)
			select {
			case <-b.closed:
				t.Stop()
				return nil, net.ErrClosed
			case <-freed:
			case <-t.C:
			}
			t.Stop()
			waited += time.Since(t0)
			continue
		}
		nc, err := b.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &conn{Conn: nc, b: b}
		now := time.Now()
		b.mu.Lock()
		room, _ = b.roomLocked(now)
		switch {
		case room && b.open < b.max:
			b.open++
			c.since, c.el = now, b.waiting.PushBack(c)
			b.mu.Unlock()
			b.accepted.Add(1)
			return c, nil
		case room:
			// The longest waiting gives its place to the new one.
			front := b.waiting.Front()
			victim := front.Value.(*conn)
			b.waiting.Remove(front)
			victim.el, victim.released = nil, true
			c.since, c.el = now, b.waiting.PushBack(c)
			b.mu.Unlock()
			victim.Conn.Close()
			b.evicted.Add(1)
			b.accepted.Add(1)
			b.lastHit.Store(now.UnixNano())
			return c, nil
		}
		b.mu.Unlock()
		waited = 0
		b.shed.Add(1)
		b.lastHit.Store(now.UnixNano())
		select {
		case b.refusing <- struct{}{}:
			go func() {
				defer func() { <-b.refusing }()
				refuse(nc)
			}()
		default:
			nc.Close()
		}
	}
}

// CodeConnections is the code of the answer to a connection the budget
// cannot take (503, Retry-After: 1).
const CodeConnections = "limit.http_connections"

// busyResponse is that answer.
var busyResponse = func() string {
	body := `{"code":"` + CodeConnections + `","error":"the HTTP connection budget is full and every connection is busy: try again later"}` + "\n"
	return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body
}()

// refuse answers 503 and closes: the write, then the end of the sending
// side, then what the client sent is read and dropped (a socket closed
// with unread input is reset, and the client could lose the answer).
func refuse(nc net.Conn) {
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(refuseTime))
	if _, err := io.WriteString(nc, busyResponse); err != nil {
		return
	}
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(nc, 64<<10))
}

// conn is a connection of a budget.
type conn struct {
	net.Conn
	b *Budget
	// Guarded by b.mu: el is its place among the waiting (nil while busy
	// or once released), busy its handlers running, released whether its
	// place was given back (or to another).
	el       *list.Element
	since    time.Time // when it began to wait
	busy     int
	released bool
}

func (c *conn) Close() error {
	b := c.b
	b.mu.Lock()
	if !c.released {
		c.released = true
		b.open--
		if c.el != nil {
			b.waiting.Remove(c.el)
			c.el = nil
		}
		close(b.freed) // an Accept waiting for room takes it
		b.freed = make(chan struct{})
	}
	b.mu.Unlock()
	return c.Conn.Close()
}

type connKey struct{}

func (b *Budget) connContext(ctx context.Context, nc net.Conn) context.Context {
	if c, ok := nc.(*conn); ok && c.b == b {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

// enter marks the connection busy; leave, waiting again (at the back).
func (c *conn) enter() {
	c.b.mu.Lock()
	c.busy++
	if c.el != nil {
		c.b.waiting.Remove(c.el)
		c.el = nil
	}
	c.b.mu.Unlock()
}

func (c *conn) leave() {
	c.b.mu.Lock()
	if c.busy--; c.busy == 0 && !c.released {
		c.since, c.el = time.Now(), c.b.waiting.PushBack(c)
	}
	c.b.mu.Unlock()
}

// track marks a request's connection busy while h runs.
func (b *Budget) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*conn); ok {
			c.enter()
			defer c.leave()
		}
		h.ServeHTTP(w, r)
	})
}
