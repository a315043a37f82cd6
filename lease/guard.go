package lease

import (
	"context"
	"errors"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Guarded publishes msg as l's owner, for a write that must happen once
// (a TERMINATION): it renews l (ErrLost: nothing published), stamps msg
// with Header, and publishes it on the condition that last is the last
// sequence of the subjects filter matches (the deliberation's, mapped:
// partition.DeliberationFilter), the position the owner decided at.
// ErrConflict when the record moved past last: re-read it and decide
// again. opts are added to the publish (a Nats-Msg-Id, an expected
// stream).
func (m *Leases) Guarded(ctx context.Context, js jetstream.JetStream, l *Lease, msg *nats.Msg, filter string, last uint64, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if err := m.Renew(ctx, l); err != nil {
		return nil, err
	}
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	msg.Header.Set(Header, l.Stamp())
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
	msg.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, filter)
	ack, err := js.PublishMsg(ctx, msg, opts...)
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return nil, &Error{Code: CodeConflict, Op: "write", Key: l.key(), Revision: l.Revision, Err: err}
		}
		return nil, &Error{Code: CodeUnavailable, Op: "write", Key: l.key(), Revision: l.Revision, Err: err}
	}
	return ack, nil
}
