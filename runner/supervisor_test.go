package runner_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

// levels is a slog handler that keeps the records at WARN and above.
type levels struct {
	mu   sync.Mutex
	high []string
	all  int
}

func (l *levels) Enabled(context.Context, slog.Level) bool { return true }
func (l *levels) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all++
	if r.Level >= slog.LevelWarn {
		s := r.Level.String() + " " + r.Message
		r.Attrs(func(a slog.Attr) bool { s += " " + a.String(); return true })
		l.high = append(l.high, s)
	}
	return nil
}
func (l *levels) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *levels) WithGroup(string) slog.Handler      { return l }

// second is another engine's runner on the same stream (its own
// snapshots).
func (b *bed) second() (*runner.Runner, context.CancelFunc, chan error) {
	b.t.Helper()
	r, err := runner.New(context.Background(), b.js, b.stream, runner.Config{SnapshotPath: filepath.Join(b.t.TempDir(), "other.snapshot"),
		Projector: projector.Options{Rules: termination.Rules{}}})
	if err != nil {
		b.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return r, cancel, done
}

// Two engines' supervisors judge the same deliberation: one publishes,
// the other's publish is refused by the expected-sequence guard and is
// ErrSuperseded, not a fault.
func TestSupervisor_LostRaceIsSuperseded(t *testing.T) {
	b := newBed(t)
	r1, c1, d1 := b.runner(4)
	defer func() { c1(); <-d1 }()
	r2, c2, d2 := b.second()
	defer func() { c2(); <-d2 }()
	b.open(delibA)
	last := b.publish(wire.ControlSubject(delibA), []byte(`{"op":"cancel","reason":"r"}`))
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	for _, r := range []*runner.Runner{r1, r2} {
		if err := r.WaitFor(ctx, last); err != nil {
			t.Fatal(err)
		}
	}
	s1, s2 := runner.NewSupervisor(r1, b.js, nil), runner.NewSupervisor(r2, b.js, nil)
	now := time.Now()
	j1, j2 := s1.Judge(now), s2.Judge(now)
	if len(j1) != 1 || len(j2) != 1 {
		t.Fatalf("jobs %d and %d, want one each", len(j1), len(j2))
	}
	if n, err := s1.Publish(ctx, j1[0]); n != 1 || err != nil {
		t.Fatalf("first: %d %v", n, err)
	}
	if n, err := s2.Publish(ctx, j2[0]); n != 0 || !errors.Is(err, runner.ErrSuperseded) {
		t.Fatalf("second: %d %v, want ErrSuperseded", n, err)
	}
}

// Two engines on one stream, each with its supervisor stepping (as Run
// does, every 5 ms): every cancelled deliberation gets exactly one
// TERMINATION, and neither logs
// a warning or an error for the races they lose.
func TestSupervisor_TwoEnginesNeverFight(t *testing.T) {
	b := newBed(t)
	r1, c1, d1 := b.runner(4)
	defer func() { c1(); <-d1 }()
	r2, c2, d2 := b.second()
	defer func() { c2(); <-d2 }()
	const n = 20
	var ids []string
	for i := range n {
		id := fmt.Sprintf("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f%04x", i)
		ids = append(ids, id)
		b.open(id)
		b.claims(id, 2)
	}
	logs := []*levels{{}, {}}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// steps counts each supervisor's finished steps: Run's loop, counted.
	var steps [2]atomic.Int64
	for i, r := range []*runner.Runner{r1, r2} {
		s := runner.NewSupervisor(r, b.js, slog.New(logs[i]))
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					s.Step(ctx)
					steps[i].Add(1)
				}
			}
		}()
	}
	for _, id := range ids {
		b.publish(wire.ControlSubject(id), []byte(`{"op":"cancel","reason":"r"}`))
	}
	done := func() int {
		n := 0
		for _, id := range ids {
			r2.ReadDeliberation(id, func(d *projector.Deliberation) {
				if d.Recorded(events.Cancelled) {
					n++
				}
			})
		}
		return n
	}
	if !eventually.Within(20*time.Second, func() bool { return done() == n }) {
		t.Fatalf("%d of %d deliberations have their TERMINATION", done(), n)
	}
	// A late second emission would come from a step that was under way
	// when the last TERMINATION was seen: once each supervisor has
	// finished two more steps, that step has finished too, its publish
	// (if any) is in the stream, and the next saw every TERMINATION.
	at := [2]int64{steps[0].Load(), steps[1].Load()}
	eventually.True(t, 20*time.Second, "two more steps of each supervisor", func() bool {
		return steps[0].Load() >= at[0]+2 && steps[1].Load() >= at[1]+2
	})
	stop()
	wg.Wait()

	cons, err := b.js.OrderedConsumer(context.Background(), wire.StreamName, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"parley.*.art." + wire.SupervisorToken}})
	if err != nil {
		t.Fatal(err)
	}
	terms := map[string]int{}
	for {
		batch, err := cons.FetchNoWait(100)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			a, err := events.Validate(m.Data())
			if err != nil {
				t.Fatal(err)
			}
			if a.Type != events.TypeTermination {
				t.Errorf("the supervisors published a %s", a.Type)
			}
			terms[m.Subject()]++
		}
		if got == 0 {
			break
		}
	}
	for _, id := range ids {
		if k := terms[wire.ArtifactSubject(id, wire.SupervisorToken)]; k != 1 {
			t.Errorf("%s: %d TERMINATIONs, want 1", id, k)
		}
	}
	for i, l := range logs {
		for _, h := range l.high {
			t.Errorf("engine %d logged %s", i+1, h)
		}
	}
}

// The supervisor judges time by the runner's clock (Config.Clock): a
// deliberation is judged once it has been quiet for Settle by that clock,
// which the test moves without sleeping.
func TestSupervisor_SettleByTheRunnersClock(t *testing.T) {
	b := newBed(t)
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	r, err := runner.New(context.Background(), b.js, b.stream, runner.Config{Shards: 2, Clock: clock,
		Projector: projector.Options{Rules: termination.Rules{}}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() { cancel(); <-done }()
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	b.open(delibA)
	if err := r.WaitFor(ctx, b.publish(wire.ControlSubject(delibA), []byte(`{"op":"cancel","reason":"r"}`))); err != nil {
		t.Fatal(err)
	}
	s := runner.NewSupervisor(r, b.js, nil)
	s.Settle, s.MaxWait = time.Hour, 2*time.Hour
	for range 3 {
		if n := s.Step(ctx); n != 0 {
			t.Fatalf("published %d before the deliberation settled by the runner's clock", n)
		}
	}
	now.Add(int64(time.Hour))
	if n := s.Step(ctx); n != 1 {
		t.Fatalf("published %d once settled by the runner's clock, want its TERMINATION", n)
	}
}

// fence is a runner.Fence: it holds the deliberations in holds, and its
// renewal fails with fail (a lease lost since it was last looked at).
type fence struct {
	holds  map[string]bool
	fail   error
	renews atomic.Int64
}

func (f *fence) Holds(d string) bool { return f.holds[d] }
func (f *fence) Renew(context.Context, string) (string, error) {
	f.renews.Add(1)
	if f.fail != nil {
		return "", f.fail
	}
	return "partition.0001@7", nil
}

// With a fence, the supervisor judges only the deliberations it holds,
// renews the lease before each write (nothing written when the renewal
// fails: ErrNotOwner), and stamps what it writes with the lease.
func TestSupervisor_Fence(t *testing.T) {
	b := newBed(t)
	r, c, d := b.runner(4)
	defer func() { c(); <-d }()
	const other = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f9999"
	b.open(delibA)
	b.open(other)
	b.publish(wire.ControlSubject(delibA), []byte(`{"op":"cancel","reason":"r"}`))
	last := b.publish(wire.ControlSubject(other), []byte(`{"op":"cancel","reason":"r"}`))
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if err := r.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	s := runner.NewSupervisor(r, b.js, nil)
	f := &fence{holds: map[string]bool{delibA: true}, fail: errors.New("lease lost")}
	s.Fence = f
	jobs := s.Judge(time.Now())
	if len(jobs) != 1 || jobs[0].Deliberation != delibA {
		t.Fatalf("jobs %+v, want one, for %s only", jobs, delibA)
	}
	if n, err := s.Publish(ctx, jobs[0]); n != 0 || !errors.Is(err, runner.ErrNotOwner) || f.renews.Load() != 1 {
		t.Fatalf("a lost lease: published %d, %v, %d renewals; want nothing, ErrNotOwner, one", n, err, f.renews.Load())
	}
	f.fail = nil
	if n, err := s.Publish(ctx, jobs[0]); n != 1 || err != nil {
		t.Fatalf("the lease held: published %d, %v", n, err)
	}
	m, err := b.stream.GetLastMsgForSubject(ctx, wire.ArtifactSubject(delibA, wire.SupervisorToken))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Get("Parley-Lease"); got != "partition.0001@7" {
		t.Errorf("the TERMINATION's lease header %q", got)
	}
}
