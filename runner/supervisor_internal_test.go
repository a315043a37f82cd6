package runner

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/ledger"
)

// The refusals a supervisor meets when it loses a race are told from the
// answers that did not come and from real faults.
func TestSupervisor_Classify(t *testing.T) {
	api := func(code, errCode int) error {
		return fmt.Errorf("publish: %w", &jetstream.APIError{Code: code, ErrorCode: jetstream.ErrorCode(errCode), Description: "x"})
	}
	for _, tt := range []struct {
		name       string
		err        error
		lost, none bool
	}{
		{"wrong last sequence", api(400, 10071), true, false},
		{"wrong last sequence for subject", api(400, 10164), true, false},
		{"duplicate message id in process", api(409, 10158), true, false},
		{"no stream leader", api(503, 10008), false, true},
		{"timeout", context.DeadlineExceeded, false, true},
		{"no responders", nats.ErrNoResponders, false, true},
		{"no stream response", jetstream.ErrNoStreamResponse, false, true},
		{"permission", api(403, 10000), false, false},
		{"other", errors.New("disk"), false, false},
	} {
		if ledger.IsLostRace(tt.err) != tt.lost || unanswered(tt.err) != tt.none {
			t.Errorf("%s: lost race %v, unanswered %v; want %v, %v", tt.name, ledger.IsLostRace(tt.err), unanswered(tt.err), tt.lost, tt.none)
		}
	}
}
