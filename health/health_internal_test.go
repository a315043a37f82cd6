package health

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/internal/jstest"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/metrics"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/wire"
)

// The engine's writes by result: an expected lost race is no problem; a
// refusal is one until a later write is stored; a timeout counts as
// unavailable.
func TestStreamWatch_Wrote(t *testing.T) {
	w := &Watch{m: metrics.New(), log: slog.New(slog.DiscardHandler), problems: map[string]*HealthProblem{}}
	has := func() bool { _, ok := w.problems[ProblemWriteRefused]; return ok }
	w.Wrote(nil)
	w.Wrote(&jetstream.APIError{ErrorCode: 10071, Description: "wrong last sequence: 7"})
	w.Wrote(&jetstream.APIError{ErrorCode: 10158, Description: "duplicate message id is in process"})
	if has() {
		t.Fatal("an expected race is a problem")
	}
	w.Wrote(&jetstream.APIError{ErrorCode: 10023, Description: "insufficient resources"})
	if !has() {
		t.Fatal("a refusal for storage is no problem")
	}
	w.Wrote(context.DeadlineExceeded)
	if !has() {
		t.Fatal("a timeout cleared the refusal")
	}
	w.Wrote(&jetstream.APIError{ErrorCode: 10071})
	if has() {
		t.Fatal("a write the server judged did not clear the refusal")
	}
	w.Wrote(errors.Join(&jetstream.APIError{ErrorCode: 10077, Description: "store failed"}))
	want := WriteStats{Stored: 1, Superseded: 3, Refused: 2, Storage: 1, Unavailable: 1, LastRefused: "nats: API error: code=0 err_code=10077 description=store failed"}
	if w.writes != want {
		t.Errorf("writes %+v\nwant   %+v", w.writes, want)
	}
	if w.halted {
		t.Error("a refused write halted the engine")
	}
}

// A projection that stands still behind the stream (a consumer that
// stopped delivering) is a health problem after stallAfter; it clears once
// the projection moves.
func TestStreamWatch_ProjectionStalled(t *testing.T) {
	_, nc := jstest.Start(t)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	st, err := ledger.Ensure(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(ctx, js, st, runner.Config{}) // not running: its position stays 0
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, wire.ControlSubject(uuid.NewString()), []byte(`{"op":"open","charter":{"title":"t"}}`)); err != nil {
		t.Fatal(err)
	}
	w := &Watch{js: js, stream: st, r: r, m: metrics.New(), log: slog.New(slog.DiscardHandler), problems: map[string]*HealthProblem{},
		stallAfter: 200 * time.Millisecond, halt: func(string) {}}
	has := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		_, ok := w.problems[ProblemProjectionStalled]
		return ok
	}
	w.check(ctx, "check")
	if has() {
		t.Fatal("stalled at the first check")
	}
	time.Sleep(300 * time.Millisecond) // the projection stands behind for longer than stallAfter: the subject
	w.check(ctx, "check")
	if !has() {
		t.Fatal("the projection stood behind the stream for 300 ms and the health report says nothing")
	}
	if w.halted {
		t.Fatal("a stall halted the engine")
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() { cancel(); <-done }()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := r.WaitFor(wctx, 1); err != nil {
		t.Fatal(err)
	}
	w.check(ctx, "check")
	if has() {
		t.Fatal("the projection caught up and the stall is still reported")
	}
}

// Advisories of kinds the server does not publish (anyone who may publish
// on $JS.EVENT.ADVISORY.STREAM.*.PARLEY can send them) add no label value:
// they are counted as "other"; the server's kinds keep theirs.
func TestStreamWatch_AdvisoryKindsBounded(t *testing.T) {
	m := metrics.New()
	w := &Watch{m: m, name: wire.StreamName, log: slog.New(slog.DiscardHandler), problems: map[string]*HealthProblem{}, kick: make(chan string, 1)}
	for i := range 500 {
		w.onAdvisory(&nats.Msg{Subject: "$JS.EVENT.ADVISORY.STREAM.K" + strconv.Itoa(i) + "." + wire.StreamName})
	}
	w.onAdvisory(&nats.Msg{Subject: "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED." + wire.StreamName})
	w.onAdvisory(&nats.Msg{Subject: "$JS.EVENT.ADVISORY.API", Data: []byte(`{"subject":"$JS.API.STREAM.PURGE.PARLEY"}`)})
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "parley_stream_advisories_total" {
			for _, m := range mf.GetMetric() {
				got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{"other": 500, "LEADER_ELECTED": 1, "API.PURGE": 1}
	if len(got) != len(want) || got["other"] != 500 || got["LEADER_ELECTED"] != 1 || got["API.PURGE"] != 1 {
		t.Errorf("advisory series %v, want %v", got, want)
	}
}
