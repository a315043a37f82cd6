package projector

import "github.com/parley-engine/parley/api"

// The fold's values that the query API serves as they are are api's
// types; the fold names them here, as do the packages that read the fold
// (runner, termination, audit, web, relay, bench, cmd).
type (
	Status        = api.Status
	Verdict       = api.Verdict
	Charter       = api.Charter
	Rejection     = api.Rejection
	Summary       = api.Summary
	ArtifactEntry = api.ArtifactEntry
	RejectionList = api.RejectionList
	View          = api.View
	OutcomeReport = api.OutcomeReport
)

// Statuses (api.Status).
const (
	StatusOpen      = api.StatusOpen
	StatusSuspended = api.StatusSuspended
	StatusCompleted = api.StatusCompleted
	StatusCancelled = api.StatusCancelled
	StatusDeadlock  = api.StatusDeadlock
	StatusExhausted = api.StatusExhausted
)

// Verdicts (api.Verdict).
const (
	VerdictAccepted    = api.VerdictAccepted
	VerdictRejected    = api.VerdictRejected
	VerdictLate        = api.VerdictLate
	VerdictApplied     = api.VerdictApplied
	VerdictUnprojected = api.VerdictUnprojected
	VerdictUnknown     = api.VerdictUnknown
)
