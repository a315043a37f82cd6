package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/wire"
)

// ReaderHeartbeat is how often the server tells an idle Reader that its
// consumer is alive. A Reader that hears nothing for two of them (its
// consumer gone with a restarted server, its messages lost with a
// connection) makes a new consumer from the position it reached.
const ReaderHeartbeat = time.Second

// ReaderSubjects are the subjects a Reader publishes on: the creation of
// its consumer (by name, with or without a filter subject) and its
// deletion, and the replies to the server's flow control. Nothing else: a
// Reader never pulls.
var ReaderSubjects = readerSubjects(wire.StreamName)

func readerSubjects(stream string) []string {
	return []string{
		"$JS.API.CONSUMER.CREATE." + stream + ".>",
		"$JS.API.CONSUMER.DELETE." + stream + ".*",
		"$JS.FC.>",
	}
}

// readerPending bounds what a Reader holds that Next has not returned:
// past either limit the library drops what arrives and, once Next has
// made room, starts a new consumer after the last message it kept. The
// bytes are four of the largest messages the server takes (4 MiB).
var readerPending = struct{ msgs, bytes int }{65536, 16 << 20}

// Reader reads the stream's messages on one subject filter, in order,
// each once, with an ordered push consumer: the server delivers to the
// Reader's own _INBOX. subject, with flow control and idle heartbeats.
// What it holds unread is bounded (65,536 messages, 16 MiB: a slow reader
// costs the server resending, not memory). When messages go missing (a
// lost connection, a restarted server, a consumer deleted, messages
// dropped past the bound) the Reader makes a new consumer from the
// position it reached.
//
// This is how participants read the stream: they may not pull. The reply
// subject of a pull request is where the server delivers the messages and
// the status it answers with, and the server checks that subject against
// nobody's permissions: a participant that may pull has the server
// publish, and the stream store, onto subjects it may not publish on (the
// principal's, the supervisor's, the importer's, the control subject). The
// server refuses a push consumer whose deliver subject the stream holds.
// docs/SECURITY.md, "Deliveries the server makes".
//
// A Reader is used by one goroutine; Stop may be called from another.
type Reader struct {
	js     nats.JetStreamContext
	layout Layout
	k      int    // the index of its stream in the layout
	stream string // its stream's name
	filter string

	// parts, over several streams, are a Reader of each, whose messages
	// come in on merged (readAll); such a Reader has no consumer of its
	// own.
	parts  []*Reader
	merged chan merged
	stop   chan struct{}

	nc      *nats.Conn
	mu      sync.Mutex
	sub     *nats.Subscription
	next    uint64 // the first stream position not read yet (0: from the first)
	stopped bool
}

// ErrDenied is returned by Read when the server refuses the connection
// the creation of a consumer of the stream: on the embedded default, a
// client without credentials asks the query service only, and reads the
// stream as a participant.
var ErrDenied = errors.New("the server refused this connection a consumer of the stream (on the embedded default a client without credentials may not read the stream: connect as the participant user, whose password is in the engine's credentials.json)")

// ErrReaderStopped is returned by Next after Stop.
var ErrReaderStopped = errors.New("ledger: the reader is stopped")

// Read returns a Reader of the stream's messages on filter ("" for every
// message) from stream position from (0 or 1: the first), with its
// consumer created: an error creating it (no stream, no permission, no
// answer within ctx or 5 s) is returned. It reads the unpartitioned
// layout's stream (Layout.Read for another).
func Read(ctx context.Context, nc *nats.Conn, filter string, from uint64) (*Reader, error) {
	return read(ctx, nc, Unpartitioned, 0, filter, from)
}

// read returns a Reader of the stream of index k of l, from position
// from (of that stream).
func read(ctx context.Context, nc *nats.Conn, l Layout, k int, filter string, from uint64) (*Reader, error) {
	js, err := nc.JetStream()
	if err != nil {
		return nil, err
	}
	r := &Reader{nc: nc, js: js, layout: l, k: k, stream: l.StreamAt(k), filter: filter, next: Sequence(from)}
	if err := r.subscribe(ctx); err != nil {
		return nil, fmt.Errorf("ledger: read %s: %w", r.what(), err)
	}
	return r, nil
}

func (r *Reader) what() string {
	if r.filter == "" {
		return "the stream " + r.stream
	}
	return r.stream + " " + r.filter
}

type merged struct {
	m   *nats.Msg
	err error
}

// readAll returns a Reader of every stream of l at once, from their
// first messages.
func readAll(ctx context.Context, nc *nats.Conn, l Layout, filter string) (*Reader, error) {
	r := &Reader{nc: nc, layout: l, filter: filter, stream: strings.Join(l.Streams(), ", "), merged: make(chan merged), stop: make(chan struct{})}
	for k := range l.N() {
		p, err := read(ctx, nc, l, k, filter, 0)
		if err != nil {
			for _, q := range r.parts {
				q.Stop()
			}
			return nil, err
		}
		r.parts = append(r.parts, p)
	}
	for _, p := range r.parts {
		go func() {
			for {
				m, err := p.Next(context.Background())
				select {
				case r.merged <- merged{m, err}:
				case <-r.stop:
					return
				}
				if err != nil {
					return
				}
			}
		}()
	}
	return r, nil
}

// Position is the position of a message Next returned: its stream
// sequence as a position of the layout (Layout.Position).
func (r *Reader) Position(m *nats.Msg) (uint64, error) {
	meta, err := m.Metadata()
	if err != nil {
		return 0, fmt.Errorf("ledger: a message read from %s has no metadata: %w", r.what(), err)
	}
	p, ok := r.layout.PositionOf(meta.Stream, meta.Sequence.Stream)
	if !ok {
		return 0, fmt.Errorf("ledger: a message read from %s came from the stream %s", r.what(), meta.Stream)
	}
	return p, nil
}

// subscribe creates the Reader's consumer from r.next, within ctx.
func (r *Reader) subscribe(ctx context.Context) error {
	r.mu.Lock()
	from := r.next
	r.mu.Unlock()
	start := nats.DeliverAll()
	if from > 1 {
		start = nats.StartSequence(from)
	}
	type created struct {
		sub *nats.Subscription
		err error
	}
	// SubscribeSync waits up to the JetStream context's 5 s for the
	// consumer; its own context option would also end the subscription
	// with ctx, so ctx is raced here instead.
	done := make(chan created, 1)
	go func() {
		sub, err := r.js.SubscribeSync(r.filter, nats.BindStream(r.stream), nats.OrderedConsumer(), start, nats.IdleHeartbeat(ReaderHeartbeat))
		done <- created{sub, err}
	}()
	// A refused creation gets no answer, only the server's asynchronous
	// permissions error on the connection: it is looked for meanwhile.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if denied(r.nc, r.stream) {
				go func() {
					if c := <-done; c.sub != nil {
						c.sub.Unsubscribe()
					}
				}()
				return ErrDenied
			}
			continue
		case c := <-done:
			return r.created(c.sub, c.err)
		case <-ctx.Done():
			go func() {
				if c := <-done; c.sub != nil {
					c.sub.Unsubscribe()
				}
			}()
			return ctx.Err()
		}
	}
}

// denied reports whether the server refused the connection a consumer of
// the stream.
func denied(nc *nats.Conn, stream string) bool {
	err := nc.LastError()
	return err != nil && strings.Contains(err.Error(), `Permissions Violation for Publish to "$JS.API.CONSUMER.CREATE.`+stream)
}

// created takes the subscription SubscribeSync made.
func (r *Reader) created(sub *nats.Subscription, err error) error {
	if err != nil {
		if denied(r.nc, r.stream) {
			return ErrDenied
		}
		return err
	}
	// The server's flow control does not bound the pending messages:
	// the library answers a stalled consumer's heartbeat at once.
	sub.SetPendingLimits(readerPending.msgs, readerPending.bytes)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		go sub.Unsubscribe()
		return ErrReaderStopped
	}
	r.sub = sub
	return nil
}

// Next returns the next message, waiting for it until ctx ends. Through a
// lost connection or a restarted server it waits for the messages to come
// again, from where it was. It fails when the connection is closed, after
// Stop, or when a new consumer is refused for good (the stream is gone).
func (r *Reader) Next(ctx context.Context) (*nats.Msg, error) {
	if r.parts != nil {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-r.stop:
			return nil, ErrReaderStopped
		case g := <-r.merged:
			return g.m, g.err
		}
	}
	wait := 50 * time.Millisecond
	var last error // why the last consumer could not be made
	for {
		r.mu.Lock()
		sub, stopped, next := r.sub, r.stopped, r.next
		r.mu.Unlock()
		if stopped {
			return nil, ErrReaderStopped
		}
		if sub == nil {
			err := r.subscribe(ctx)
			switch {
			case err == nil:
				wait = 50 * time.Millisecond
				continue
			case ctx.Err() != nil:
				return nil, fmt.Errorf("ledger: read %s: %w", r.what(), errors.Join(ctx.Err(), last))
			case !retryable(err):
				return nil, fmt.Errorf("ledger: read %s from %d: %w", r.what(), next, err)
			}
			last = err
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("ledger: read %s: %w", r.what(), errors.Join(ctx.Err(), last))
			case <-time.After(wait):
			}
			wait = min(2*wait, 2*time.Second)
			continue
		}
		m, err := sub.NextMsgWithContext(ctx)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, nats.ErrSlowConsumer):
			// Messages were dropped for want of room: the ordered
			// consumer sees the gap and starts again after the last one
			// delivered.
			continue
		case errors.Is(err, nats.ErrBadSubscription):
			// The library gave up on its consumer (it was refused a new
			// one after a gap): make one from here.
			r.mu.Lock()
			if r.sub == sub {
				r.sub = nil
			}
			r.mu.Unlock()
			continue
		default:
			return nil, fmt.Errorf("ledger: read %s: %w", r.what(), err)
		}
		meta, err := m.Metadata()
		if err != nil || meta.Stream != r.stream || meta.Sequence.Stream < next || !matches(r.filter, m.Subject) {
			// Not a message of this Reader's: anything published onto its
			// inbox (another's push consumer may deliver there), a message
			// already read, or one outside its filter.
			continue
		}
		r.mu.Lock()
		r.next = meta.Sequence.Stream + 1
		r.mu.Unlock()
		// The subject it was published on; a misplaced one keeps its
		// stored subject (Layout.Original).
		m.Subject, _ = r.layout.Original(m.Subject)
		return m, nil
	}
}

// Stop ends the Reader and deletes its consumer (without waiting for the
// server: a consumer nobody listens to goes by itself within seconds). A
// Next waiting in another goroutine returns ErrReaderStopped.
func (r *Reader) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	r.stopped = true
	if r.parts != nil {
		close(r.stop)
		for _, p := range r.parts {
			p.Stop()
		}
		return
	}
	if r.sub != nil {
		sub := r.sub
		go sub.Unsubscribe()
	}
}

// retryable reports whether making a consumer failed for a reason that
// passes: no answer (no server, no JetStream yet, a lost connection), or a
// cluster that is electing or restarting a peer.
func retryable(err error) bool {
	switch {
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, nats.ErrJetStreamNotEnabled), errors.Is(err, nats.ErrConnectionReconnecting):
		return true
	}
	return HasErrorCode(err, ErrCodeInsufficientResources, ErrCodeJetStreamNotAvailable)
}

// matches reports whether subject is one of filter's ("" matches every
// subject), with NATS wildcards: * one token, > the rest.
func matches(filter, subject string) bool {
	if filter == "" || filter == ">" {
		return true
	}
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, t := range f {
		switch {
		case t == ">":
			return len(s) > i
		case i >= len(s):
			return false
		case t != "*" && t != s[i]:
			return false
		}
	}
	return len(f) == len(s)
}
