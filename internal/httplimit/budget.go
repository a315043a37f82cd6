package httplimit

import (
	"container/list"
	"context"
	"io"
	"net"
	"net/http"
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
// budget is full, a new connection takes the place of the one that has
// waited longest, which is closed (evicted): a client that holds sockets
// by sending a request slowly loses them to the next client, and a fresh
// client is served at once. When every connection is busy, the new one is
// answered 503 with Retry-After and closed (shed). A busy connection is
// never closed for the budget: handlers bound themselves (a live feed's
// cap, the read budget, the write timeout).
type Budget struct {
	net.Listener
	max int

	mu      sync.Mutex
	open    int
	waiting list.List // of *conn, the longest waiting first

	accepted, evicted, shed atomic.Uint64
	lastHit                 atomic.Int64 // unix nanoseconds of the last eviction or shedding
	refusing                chan struct{}
}

// maxRefusing bounds the connections being answered 503 at once (each
// holds a descriptor for at most refuseTime); past it a connection to shed
// is closed without an answer.
const (
	maxRefusing = 16
	refuseTime  = time.Second
)

// NewBudget returns ln with a budget of max connections (at least 1).
func NewBudget(ln net.Listener, n int) *Budget {
	return &Budget{Listener: ln, max: max(n, 1), refusing: make(chan struct{}, maxRefusing)}
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

// Accept returns the next connection within the budget.
func (b *Budget) Accept() (net.Conn, error) {
	for {
		nc, err := b.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &conn{Conn: nc, b: b}
		b.mu.Lock()
		if b.open < b.max {
			b.open++
			c.el = b.waiting.PushBack(c)
			b.mu.Unlock()
			b.accepted.Add(1)
			return c, nil
		}
		if front := b.waiting.Front(); front != nil {
			// The longest waiting gives its place to the new one.
			victim := front.Value.(*conn)
			b.waiting.Remove(front)
			victim.el, victim.released = nil, true
			c.el = b.waiting.PushBack(c)
			b.mu.Unlock()
			victim.Conn.Close()
			b.evicted.Add(1)
			b.accepted.Add(1)
			b.lastHit.Store(time.Now().UnixNano())
			return c, nil
		}
		b.mu.Unlock()
		b.shed.Add(1)
		b.lastHit.Store(time.Now().UnixNano())
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

// busyResponse is the answer to a connection the budget cannot take.
const busyResponse = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: 103\r\n\r\n" +
	`{"code":"limit.http_connections","error":"the engine's HTTP connection budget is full: try again later"}` + "\n"

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
		c.el = c.b.waiting.PushBack(c)
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
