package mcpserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
)

// Outcomes of a tool call beside the engine's own (api.Verdict: accepted,
// rejected, late, applied, unprojected, unknown), for calls that publish
// nothing or that the engine does not judge.
const (
	// OutcomeOK: a read the engine answered.
	OutcomeOK = "ok"
	// OutcomeRefused: the server refused the call and published nothing
	// (an artifact the validator refuses, with the code the engine would
	// record; another participant named; an argument out of range).
	OutcomeRefused = "refused"
	// OutcomeError: the engine answered with an error (its code: not_found,
	// unavailable, …) or did not answer in time (CodeNoAnswer).
	OutcomeError = "error"
)

// Codes of the server's own refusals and errors (docs/ERRORS.md).
const (
	// CodeParticipantMismatch: a call names a participant other than the
	// one the server speaks as.
	CodeParticipantMismatch = "mcp.participant_mismatch"
	// CodeInvalidArgument: an argument the engine's rules do not decide
	// (a malformed id, a timeout out of range, a missing member).
	CodeInvalidArgument = "mcp.invalid_argument"
	// CodeNoAnswer: the engine did not answer in time (no engine serves,
	// or its projection has not reached the message yet).
	CodeNoAnswer = "mcp.no_answer"
	// CodeNotPrincipal: resolve_binding on a server that does not speak as
	// the deliberation's principal (the engine would refuse the resolution
	// with the same code).
	CodeNotPrincipal = "binding.not_principal"
)

// Verdict is the engine's word on a tool call, in every tool's structured
// result: the outcome (the engine's verdict on the message the call
// published, or ok, refused, error), and when the call did not take
// effect, the error class, code and message. Position is the message's
// stream position (or, for a read, the position the state was read at),
// Ordinal its rank among the deliberation's messages.
type Verdict struct {
	Outcome    string `json:"outcome" jsonschema:"accepted, applied, rejected, late, unprojected, unknown (the engine's verdict on the published message), ok (a read), refused (nothing was published), error (the engine answered an error or did not answer)"`
	ErrorClass string `json:"error_class,omitempty" jsonschema:"the class of the code, for a rejected or refused artifact"`
	Code       string `json:"code,omitempty" jsonschema:"the stable dotted code of a rejection, refusal or error (docs/ERRORS.md)"`
	Message    string `json:"message,omitempty" jsonschema:"what the code means here"`
	Position   uint64 `json:"position,omitempty" jsonschema:"the message's stream position, or the position a read was answered at"`
	Ordinal    uint64 `json:"ordinal,omitempty" jsonschema:"the message's rank among the deliberation's messages (1 opened it)"`
}

// failed reports whether the call did not do what it asked.
func (v Verdict) failed() bool {
	switch v.Outcome {
	case OutcomeOK, string(api.VerdictAccepted), string(api.VerdictApplied):
		return false
	}
	return true
}

// Refusal is an error carrying a verdict's code.
type Refusal struct {
	Class, Code, Message string
}

func (r *Refusal) Error() string { return r.Code + ": " + r.Message }

func refuse(code, format string, a ...any) *Refusal {
	return &Refusal{Code: code, Message: fmt.Sprintf(format, a...)}
}

// classified is what the validator's errors (canon, events) implement.
type classified interface {
	ErrorClass() string
	ErrorCode() string
}

// verdictOf turns an error into the verdict that reports it: a refusal
// or the validator's error (refused: nothing was published), an error
// answer of the engine, or no answer.
func verdictOf(err error) Verdict {
	var r *Refusal
	var c classified
	var se *client.ServiceError
	switch {
	case errors.As(err, &r):
		return Verdict{Outcome: OutcomeRefused, ErrorClass: r.Class, Code: r.Code, Message: r.Message}
	case errors.As(err, &c):
		return Verdict{Outcome: OutcomeRefused, ErrorClass: c.ErrorClass(), Code: c.ErrorCode(), Message: err.Error()}
	case errors.As(err, &se) && se.Code != "":
		return Verdict{Outcome: OutcomeError, Code: se.Code, Message: se.Message}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, client.ErrUnavailable):
		return Verdict{Outcome: OutcomeError, Code: CodeNoAnswer, Message: err.Error()}
	}
	return Verdict{Outcome: OutcomeError, Code: api.CodeUnavailable, Message: err.Error()}
}

// outcomeVerdict is the verdict of an outcome report.
func outcomeVerdict(o api.OutcomeReport) Verdict {
	return Verdict{Outcome: string(o.Outcome), ErrorClass: o.ErrorClass, Code: o.Code, Message: o.Message, Position: o.Position, Ordinal: o.Ordinal}
}
