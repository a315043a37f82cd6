package main

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// flood publishes next(0), next(1), … to the engine's stream as fast as
// the server takes them (at most pending unacknowledged), adding each
// message's bytes to sent, until ctx ends; then it waits up to 10 s for
// the last acknowledgements. It returns the messages sent. A message the
// client holds back (too many stalled) is sent again once they are taken.
// An attacker without credentials, whose publishes the server refuses
// (and never acknowledges), sends them as plain NATS messages as fast as
// its connection takes them.
func flood(ctx context.Context, e *engine, pending int, sent *atomic.Int64, next func(i int) (subject string, data []byte)) (int, error) {
	nc, err := e.attacker(nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	if !e.insider {
		n := 0
		for ctx.Err() == nil {
			subject, data := next(n)
			if err := nc.Publish(subject, data); err != nil {
				return n, err
			}
			sent.Add(int64(len(subject) + len(data)))
			n++
		}
		nc.Flush()
		return n, nil
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(pending))
	if err != nil {
		return 0, err
	}
	n := 0
	for ctx.Err() == nil {
		subject, data := next(n)
		for ctx.Err() == nil {
			_, err := js.PublishAsync(subject, data)
			if err == nil {
				sent.Add(int64(len(subject) + len(data)))
				n++
				break
			}
			if ctx.Err() != nil {
				break
			}
			if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				return n, err
			}
			// The server takes them slower than they are sent: wait.
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
			}
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
	}
	return n, nil
}
