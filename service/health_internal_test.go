package service

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// The engine's writes by result: an expected lost race is no problem; a
// refusal is one until a later write is stored; a timeout counts as
// unavailable.
func TestStreamWatch_Wrote(t *testing.T) {
	w := &streamWatch{m: NewMetrics(), log: slog.New(slog.DiscardHandler), problems: map[string]*HealthProblem{}}
	has := func() bool { _, ok := w.problems[ProblemWriteRefused]; return ok }
	w.wrote(nil)
	w.wrote(&jetstream.APIError{ErrorCode: 10071, Description: "wrong last sequence: 7"})
	w.wrote(&jetstream.APIError{ErrorCode: 10158, Description: "duplicate message id is in process"})
	if has() {
		t.Fatal("an expected race is a problem")
	}
	w.wrote(&jetstream.APIError{ErrorCode: 10023, Description: "insufficient resources"})
	if !has() {
		t.Fatal("a refusal for storage is no problem")
	}
	w.wrote(context.DeadlineExceeded)
	if !has() {
		t.Fatal("a timeout cleared the refusal")
	}
	w.wrote(&jetstream.APIError{ErrorCode: 10071})
	if has() {
		t.Fatal("a write the server judged did not clear the refusal")
	}
	w.wrote(errors.Join(&jetstream.APIError{ErrorCode: 10077, Description: "store failed"}))
	want := WriteStats{Stored: 1, Superseded: 3, Refused: 2, Storage: 1, Unavailable: 1, LastRefused: "nats: API error: code=0 err_code=10077 description=store failed"}
	if w.writes != want {
		t.Errorf("writes %+v\nwant   %+v", w.writes, want)
	}
	if w.halted {
		t.Error("a refused write halted the engine")
	}
}
