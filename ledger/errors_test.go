package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/ledger"
)

// The predicates read the error code of either client API's error, however
// wrapped; the codes are the server's (nats-server's errors.json).
func TestErrorCodes(t *testing.T) {
	js := func(status, code int) error {
		return fmt.Errorf("publish: %w", &jetstream.APIError{Code: status, ErrorCode: jetstream.ErrorCode(code), Description: "x"})
	}
	legacy := func(status, code int) error {
		return fmt.Errorf("subscribe: %w", &nats.APIError{Code: status, ErrorCode: nats.ErrorCode(code), Description: "x"})
	}
	type is struct{ wrongLast, duplicate, lost, resources, notAvailable, unavailable bool }
	for _, tt := range []struct {
		name string
		code int
		is   is
	}{
		{"wrong last sequence", 10071, is{wrongLast: true, lost: true}},
		{"wrong last sequence, replicated", 10164, is{wrongLast: true, lost: true}},
		{"duplicate message id in process", 10158, is{duplicate: true, lost: true}},
		{"insufficient resources", 10023, is{resources: true, unavailable: true}},
		{"account resources exceeded", 10002, is{resources: true}},
		{"insufficient storage", 10047, is{resources: true}},
		{"insufficient memory", 10028, is{resources: true}},
		{"JetStream not available", 10008, is{notAvailable: true, unavailable: true}},
		{"store failed", 10077, is{unavailable: true}},
		{"stream name in use", 10058, is{}},
	} {
		status := 400
		if tt.is.unavailable {
			status = 503
		}
		for _, err := range []error{js(status, tt.code), legacy(status, tt.code)} {
			got := is{ledger.IsWrongLastSequence(err), ledger.IsDuplicateInProcess(err), ledger.IsLostRace(err),
				ledger.IsResourcesExceeded(err), ledger.IsJetStreamNotAvailable(err), ledger.IsStatusUnavailable(err)}
			if got != tt.is {
				t.Errorf("%s (%T): %+v, want %+v", tt.name, errors.Unwrap(err), got, tt.is)
			}
		}
	}
	for _, err := range []error{nil, context.DeadlineExceeded, nats.ErrNoResponders, jetstream.ErrNoStreamResponse} {
		if ledger.HasErrorCode(err, ledger.ErrCodeDuplicateInProcess, jetstream.JSErrCodeStreamWrongLastSequence) || ledger.IsStatusUnavailable(err) {
			t.Errorf("%v has a JetStream error code", err)
		}
	}
}
