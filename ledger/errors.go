package ledger

import (
	"errors"
	"slices"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The JetStream API errors the engine tells apart, by their error code
// (the err_code of an API error; the server's names are those of
// nats-server's errors.json). nats.go's jetstream package names two of
// them, and the engine uses its names for those:
//
//   - jetstream.JSErrCodeStreamWrongLastSequence (10071,
//     JSStreamWrongLastSequenceErrF): the expected last sequence, of the
//     stream or of a subject, is not the last one.
//   - jetstream.JSErrCodeStreamWrongLastSequenceConstant (10164,
//     JSStreamWrongLastSequenceConstantErr): the same, as a replicated
//     stream answers it.
//
// The others are these; two are the nats package's (its older JetStream
// API), given jetstream's type.
const (
	// ErrCodeJetStreamNotAvailable is JSClusterNotAvailErr (status 503;
	// nats.JSErrCodeJetStreamNotAvailable): JetStream is temporarily
	// unavailable, a cluster without a meta leader yet.
	ErrCodeJetStreamNotAvailable = jetstream.ErrorCode(nats.JSErrCodeJetStreamNotAvailable)
	// ErrCodeInsufficientResources is JSInsufficientResourcesErr (status
	// 503; nats.JSErrCodeInsufficientResourcesErr): insufficient
	// resources, the server's limit.
	ErrCodeInsufficientResources = jetstream.ErrorCode(nats.JSErrCodeInsufficientResourcesErr)
	// ErrCodeAccountResourcesExceeded is JSAccountResourcesExceededErr:
	// resource limits exceeded for the account.
	ErrCodeAccountResourcesExceeded jetstream.ErrorCode = 10002
	// ErrCodeMemoryResourcesExceeded is JSMemoryResourcesExceededErr:
	// insufficient memory resources available.
	ErrCodeMemoryResourcesExceeded jetstream.ErrorCode = 10028
	// ErrCodeStorageResourcesExceeded is JSStorageResourcesExceededErr:
	// insufficient storage resources available.
	ErrCodeStorageResourcesExceeded jetstream.ErrorCode = 10047
	// ErrCodeDuplicateInProcess is JSStreamDuplicateMessageConflict
	// (status 409): a message with the same Nats-Msg-Id is being stored
	// (the leader is still storing a first attempt).
	ErrCodeDuplicateInProcess jetstream.ErrorCode = 10158
)

// statusUnavailable is the status (HTTP-like) of an API error that says
// JetStream cannot serve the request now.
const statusUnavailable = 503

// apiError returns the status and error code of err's JetStream API
// error, from either client API (jetstream's, or the nats package's
// JetStreamContext that Reader uses); ok is false when err has none.
func apiError(err error) (status int, code jetstream.ErrorCode, ok bool) {
	var jsErr *jetstream.APIError
	if errors.As(err, &jsErr) {
		return jsErr.Code, jsErr.ErrorCode, true
	}
	var natsErr *nats.APIError
	if errors.As(err, &natsErr) {
		return natsErr.Code, jetstream.ErrorCode(natsErr.ErrorCode), true
	}
	return 0, 0, false
}

// HasErrorCode reports whether err is a JetStream API error with one of
// codes.
func HasErrorCode(err error, codes ...jetstream.ErrorCode) bool {
	_, code, ok := apiError(err)
	return ok && slices.Contains(codes, code)
}

// IsWrongLastSequence reports whether a publish was refused because the
// last sequence it expected (of the stream, or of a subject) is not the
// last one: someone else's message arrived after the position it was
// judged at.
func IsWrongLastSequence(err error) bool {
	return HasErrorCode(err, jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// IsDuplicateInProcess reports whether a publish was refused because a
// message with the same Nats-Msg-Id is still being stored.
func IsDuplicateInProcess(err error) bool {
	return HasErrorCode(err, ErrCodeDuplicateInProcess)
}

// IsLostRace reports whether a publish refusal is an expected lost race,
// not a fault: a wrong last sequence, or a duplicate in process.
func IsLostRace(err error) bool {
	return IsWrongLastSequence(err) || IsDuplicateInProcess(err)
}

// IsResourcesExceeded reports whether a write was refused for storage or
// resources: insufficient resources (the server's limit), the account's
// resource limits, insufficient storage or memory.
func IsResourcesExceeded(err error) bool {
	return HasErrorCode(err, ErrCodeInsufficientResources, ErrCodeAccountResourcesExceeded,
		ErrCodeStorageResourcesExceeded, ErrCodeMemoryResourcesExceeded)
}

// IsJetStreamNotAvailable reports whether JetStream answered that it is
// temporarily unavailable (a cluster without a meta leader yet).
func IsJetStreamNotAvailable(err error) bool {
	return HasErrorCode(err, ErrCodeJetStreamNotAvailable)
}

// IsStatusUnavailable reports whether err is a JetStream API error with
// status 503, whatever its code: JetStream cannot serve the request now
// (no stream leader, JetStream not available, a store that failed).
func IsStatusUnavailable(err error) bool {
	status, _, ok := apiError(err)
	return ok && status == statusUnavailable
}
