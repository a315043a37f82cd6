package runner_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/wire"
)

// A consumer that dies ends Run with an error that says why, within a
// bounded time, snapshots on or off: Run does not wait for a context only
// its caller ends. The stream deleted: the ordered consumer would retry
// for ever in silence; the runner notices the stream is gone.
func TestRunner_StreamDeletedEndsRun(t *testing.T) {
	for _, snapshots := range []bool{true, false} {
		t.Run(map[bool]string{true: "snapshots", false: "no snapshots"}[snapshots], func(t *testing.T) {
			b := newBed(t)
			if !snapshots {
				b.snap = ""
			}
			r, cancel, done := b.runner(2)
			defer cancel()
			ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
			defer stop()
			b.open(delibA)
			last := b.claims(delibA, 3)
			if err := r.WaitFor(ctx, last); err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			if err := b.js.DeleteStream(ctx, wire.StreamName); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err == nil || !errors.Is(err, jetstream.ErrStreamNotFound) || !strings.Contains(err.Error(), "stream "+wire.StreamName+" is gone") {
					t.Fatalf("Run returned %v, want the stream gone", err)
				}
				t.Logf("after %v: %v", time.Since(t0).Round(time.Millisecond), err)
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return within 10 s of the stream's deletion")
			}
			if r.Position() != last {
				t.Errorf("position %d, want %d", r.Position(), last)
			}
			if snapshots {
				if _, err := os.Stat(b.snap + ".0-of-2"); err != nil {
					t.Errorf("no last snapshot: %v", err)
				}
			}
		})
	}
}

// The consumer's connection closed: Run ends with the consumer's error,
// with snapshots on (whose loop Run used to wait for until its context
// ended).
func TestRunner_ConnectionClosedEndsRun(t *testing.T) {
	b := newBed(t)
	r, cancel, done := b.runner(2)
	defer cancel()
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	b.open(delibA)
	if err := r.WaitFor(ctx, b.claims(delibA, 3)); err != nil {
		t.Fatal(err)
	}
	b.js.Conn().Close()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "consume ended") || !strings.Contains(err.Error(), "connection closed") {
			t.Fatalf("Run returned %v, want the consumer's end and why", err)
		}
		t.Log(err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10 s of the connection's close")
	}
}
