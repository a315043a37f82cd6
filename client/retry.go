package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/partition"
)

// Options configure a client's deadlines and retries (NewWithOptions).
// The zero value of each field is its default.
type Options struct {
	// Timeout bounds each attempt of a read (default 2 s; the engine
	// answers a read in milliseconds, and one waiting for its
	// min_position within a second). A read lost on its way (the engine's
	// or the client's node went away) is sent again after it.
	Timeout time.Duration
	// VerifyTimeout bounds each attempt of a closure verification
	// (default 30 s: over a million artifacts one takes more than a
	// second).
	VerifyTimeout time.Duration
	// PublishTimeout bounds each attempt of a publish, the stream's
	// acknowledgement (default 2 s). A publish in flight when the stream's
	// leader is lost gets no answer: this is how long it waits before it is
	// sent again to the new leader.
	PublishTimeout time.Duration
	// RetryFor bounds how long an idempotent read, or a publish the
	// stream deduplicates, is retried after a timeout, a request nobody
	// answered (no engine, no stream leader), a reconnect, or an engine
	// whose projection is behind (default 30 s). Past it the error is
	// ErrUnavailable. Negative: no retry.
	RetryFor time.Duration
	// Backoff is the first wait between attempts (default 50 ms); it
	// doubles up to MaxBackoff (default 1 s).
	Backoff, MaxBackoff time.Duration
	// NoReadYourWrites turns off the min_position every read carries
	// (the stream position of the client's last acknowledged publish):
	// with it on, an engine whose projection has not reached that
	// position answers 503 projection.behind and the read is retried.
	NoReadYourWrites bool
	// JetStream configure the client's JetStream context (for example
	// jetstream.WithPublishAsyncMaxPending).
	JetStream []jetstream.JetStreamOpt
	// SigningKey, when set, is the participant's nkeys user key pair,
	// with its seed (signing.KeyPair of an "SU…" seed): every artifact
	// the client publishes carries its signature (the Parley-Key and
	// Parley-Signature headers, docs/VERIFY.md), which a charter that
	// binds the key to the participant's token checks. Nil: unsigned.
	SigningKey nkeys.KeyPair
}

// Defaults of Options.
const (
	DefaultTimeout        = 2 * time.Second
	DefaultVerifyTimeout  = 30 * time.Second
	DefaultPublishTimeout = 2 * time.Second
	DefaultRetryFor       = 30 * time.Second
	DefaultBackoff        = 50 * time.Millisecond
	DefaultMaxBackoff     = time.Second
)

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.VerifyTimeout <= 0 {
		o.VerifyTimeout = max(o.Timeout, DefaultVerifyTimeout)
	}
	if o.PublishTimeout <= 0 {
		o.PublishTimeout = DefaultPublishTimeout
	}
	if o.RetryFor == 0 {
		o.RetryFor = DefaultRetryFor
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	return o
}

// ErrUnavailable is matched (errors.Is) by the error of a request or a
// publish that got no usable answer within its retries: no engine
// answered, the stream had no leader, or the engine stayed behind.
var ErrUnavailable = errors.New("client: the engine is unavailable")

// UnavailableError is the error of a request given up after its retries:
// the operation, how many attempts were made over how long, and the last
// attempt's error.
type UnavailableError struct {
	Op       string
	Attempts int
	Elapsed  time.Duration
	Last     error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("client: %s: no answer after %d attempts over %s: %v", e.Op, e.Attempts, e.Elapsed.Round(time.Millisecond), e.Last)
}

// Is matches ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap returns the last attempt's error.
func (e *UnavailableError) Unwrap() error { return e.Last }

// ErrDenied is matched (errors.Is) by the error of a publish the NATS
// server refused for the connection's permissions (its -ERR Permissions
// Violation): it is not retried. On the embedded default a client without
// credentials may only read.
var ErrDenied = errors.New("client: the NATS server denies this publish")

// DeniedError is a publish refused for the connection's permissions.
type DeniedError struct {
	Subject string
	Server  error // the server's own words
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("client: the NATS server refused to let this connection publish on %s (%v): this connection's user may not publish there; on an engine's embedded default a client without credentials may only read (connect as the participant user of the engine's credentials.json: nats_participant_user, nats_participant_password)", e.Subject, e.Server)
}

// Is matches ErrDenied.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// Unwrap returns the server's error.
func (e *DeniedError) Unwrap() error { return e.Server }

// denied returns a *DeniedError when the server has reported a
// permissions violation for publishing on subject on this connection
// (nil otherwise). Under the server's partition mapping the violation
// names the mapped subject (partition.Subject), which the server checks.
func (c *Client) denied(subject string) error {
	err := c.nc.LastError()
	if err == nil || !errors.Is(err, nats.ErrPermissionViolation) {
		return nil
	}
	mapped, ok := partition.Subject(subject)
	if !strings.Contains(err.Error(), `Publish to "`+subject+`"`) && (!ok || !strings.Contains(err.Error(), `Publish to "`+mapped+`"`)) {
		return nil
	}
	return &DeniedError{Subject: subject, Server: err}
}

// retryableRead says whether a read that failed with err may be asked
// again: it was not answered (timeout, no responders, a reconnect), or
// the engine answered 503 (its projection is behind, or its stream read
// failed), but not that it halted.
func retryableRead(err error) bool {
	var se *ServiceError
	if errors.As(err, &se) {
		return se.Status == "503" && se.Code != api.CodeHalted
	}
	return unanswered(err)
}

// unanswered: the request got no answer.
func unanswered(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrDisconnected)
}

// retryablePublish says whether a publish that carries a Nats-Msg-Id may
// be sent again after err: the stream's dedupe window absorbs a copy that
// was stored after all. The stream had no leader (503), the answer was
// lost, or a first attempt under the same id is still in process.
func retryablePublish(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return ledger.IsStatusUnavailable(err) || ledger.IsDuplicateInProcess(err)
	}
	return unanswered(err)
}

// retry calls attempt, each call with its own deadline (timeout), until
// it succeeds, fails with an error retryable does not accept, ctx ends, or
// Options.RetryFor has passed (an *UnavailableError). An attempt under way
// when the connection reconnects is given up at once and sent again: its
// answer, if any, was lost with the old connection.
func (c *Client) retry(ctx context.Context, op string, timeout time.Duration, retryable func(error) bool, attempt func(ctx context.Context) error) error {
	start := time.Now()
	wait := c.opts.Backoff
	for n := 1; ; n++ {
		actx, cancel := context.WithTimeout(ctx, timeout)
		// Only an attempt that may be sent twice (one whose timeout is
		// retried) is given up at a reconnect.
		idempotent := retryable(context.DeadlineExceeded)
		stop := func() bool { return false }
		if idempotent {
			stop = c.onReconnect(cancel)
		}
		err := attempt(actx)
		reconnected := stop()
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("client: %s: %w", op, errors.Join(ctx.Err(), err))
		}
		if !reconnected && !retryable(err) {
			return err
		}
		if c.opts.RetryFor < 0 || time.Since(start)+wait > c.opts.RetryFor {
			return &UnavailableError{Op: op, Attempts: n, Elapsed: time.Since(start), Last: err}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("client: %s: %w", op, errors.Join(ctx.Err(), err))
		case <-t.C:
		}
		wait = min(2*wait, c.opts.MaxBackoff)
	}
}

// reconnectPoll is how often an attempt under way checks whether the
// connection has reconnected (not before the first poll: a quick answer
// costs nothing).
const reconnectPoll = 100 * time.Millisecond

// onReconnect calls cancel if the connection reconnects before the
// returned stop is called; stop says whether it did.
func (c *Client) onReconnect(cancel func()) (stop func() bool) {
	from := c.nc.Stats().Reconnects
	var (
		mu       sync.Mutex
		stopped  bool
		canceled bool
		t        *time.Timer
	)
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(reconnectPoll, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		if c.nc.Stats().Reconnects != from {
			canceled = true
			cancel()
			return
		}
		t.Reset(reconnectPoll)
	})
	return func() bool {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
		return canceled
	}
}

// Saw raises the stream position the client's reads carry as
// min_position to seq (when higher): the position of an acknowledged
// publish, which the client records itself, or one the caller learned
// elsewhere (another client's publish, a PubAck of an async publish).
//
// A position names its stream (ledger.Layout.Position): over several
// streams the client keeps the highest of each, and a read of a
// deliberation carries its stream's.
func (c *Client) Saw(seq uint64) {
	k := int(seq >> ledger.PositionBits)
	if k >= len(c.seen) {
		return
	}
	s := &c.seen[k]
	for {
		cur := s.Load()
		if seq <= cur || s.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// Seen returns the position of the client's last acknowledged publish
// (the highest), which its reads carry as min_position. Over several
// streams it is the highest position of the last stream the client has
// seen anything of; SeenFor is a deliberation's.
func (c *Client) Seen() uint64 {
	for k := len(c.seen) - 1; k >= 0; k-- {
		if p := c.seen[k].Load(); p > 0 {
			return p
		}
	}
	return 0
}

// SeenFor is the highest position the client has seen in the stream
// that holds deliberation id: what its reads of id carry as
// min_position. With the layout not yet known, or no id, it is Seen.
func (c *Client) SeenFor(id string) uint64 { return c.seenFor(id) }

func (c *Client) seenFor(id string) uint64 {
	l, ok := c.known()
	if !ok || id == "" || l.N() == 1 {
		if ok && l.N() == 1 {
			return c.seen[0].Load()
		}
		return c.Seen()
	}
	return c.seen[l.Index(id)].Load()
}

// CatchUp raises the position the client's reads carry to the stream's
// last sequence: the reads that follow see everything the stream held when
// CatchUp was called, whoever published it (a command that follows
// another's open, say), or answer projection.behind and are retried.
func (c *Client) CatchUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	l, st, err := c.record(ctx)
	if err != nil {
		return fmt.Errorf("client: the stream's last position: %w", err)
	}
	c.Saw(st.CachedInfo().State.LastSeq) // js.Stream has just read it
	for k := 1; k < l.N(); k++ {
		sk, err := c.js.Stream(ctx, l.StreamAt(k))
		if err != nil {
			return fmt.Errorf("client: the stream %s's last position: %w", l.StreamAt(k), err)
		}
		c.Saw(l.Position(k, sk.CachedInfo().State.LastSeq))
	}
	return nil
}
