package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Options configure a client's deadlines and retries (NewWithOptions).
// The zero value of each field is its default.
type Options struct {
	// Timeout bounds each attempt of a request or a publish (default 5 s).
	Timeout time.Duration
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
}

// Defaults of Options.
const (
	DefaultTimeout    = 5 * time.Second
	DefaultRetryFor   = 30 * time.Second
	DefaultBackoff    = 50 * time.Millisecond
	DefaultMaxBackoff = time.Second
)

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
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

// CodeBehind is the stable code of the engine's answer to a read whose
// min_position its projection has not reached (status 503): retry.
const CodeBehind = "projection.behind"

// retryableRead says whether a read that failed with err may be asked
// again: it was not answered (timeout, no responders, a reconnect), or
// the engine answered 503 (its projection is behind, or its stream read
// failed).
func retryableRead(err error) bool {
	var se *ServiceError
	if errors.As(err, &se) {
		return se.Status == "503"
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
// lost, or a first attempt under the same id is still in process (10158).
func retryablePublish(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code == 503 || apiErr.ErrorCode == 10158
	}
	return unanswered(err)
}

// retry calls attempt, each call with its own deadline (Options.Timeout),
// until it succeeds, fails with an error retryable does not accept, ctx
// ends, or Options.RetryFor has passed (an *UnavailableError).
func (c *Client) retry(ctx context.Context, op string, retryable func(error) bool, attempt func(ctx context.Context) error) error {
	start := time.Now()
	wait := c.opts.Backoff
	for n := 1; ; n++ {
		actx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
		err := attempt(actx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("client: %s: %w", op, errors.Join(ctx.Err(), err))
		}
		if !retryable(err) {
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

// Saw raises the stream position the client's reads carry as
// min_position to seq (when higher): the position of an acknowledged
// publish, which the client records itself, or one the caller learned
// elsewhere (another client's publish, a PubAck of an async publish).
func (c *Client) Saw(seq uint64) {
	for {
		cur := c.seen.Load()
		if seq <= cur || c.seen.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// Seen returns the stream position of the client's last acknowledged
// publish (the highest), which its reads carry as min_position.
func (c *Client) Seen() uint64 { return c.seen.Load() }
