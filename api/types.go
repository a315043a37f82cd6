// Package api holds the types of the engine's query API as they go on the
// wire (HTTP under /api/v1 and the NATS micro service parley.api.*): a
// deliberation's view and summary, its artifacts and rejections, the
// outcome of a message, the statuses and verdicts they carry. The fold
// (projector) builds them; the engine's read model serves them; the
// client decodes them, importing this package and not the fold.
//
// Like the fold, it is a pure core: values only, no IO, no clock
// (internal/layering).
package api

import (
	"encoding/json"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
)

// Status of a deliberation.
type Status string

// Statuses. Suspended is not terminal; completed, cancelled, deadlock and
// exhausted are.
const (
	StatusOpen      Status = "open"
	StatusSuspended Status = "suspended"
	StatusCompleted Status = "completed"
	StatusCancelled Status = "cancelled"
	StatusDeadlock  Status = "deadlock"
	StatusExhausted Status = "exhausted"
)

// Terminal reports whether s ends the deliberation.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusCancelled || s == StatusDeadlock || s == StatusExhausted
}

// Rejection records a message that did not enter the DAG. It stays in the
// stream; this is its place in the projection.
type Rejection struct {
	Position uint64 `json:"position"`
	// Ordinal is the message's rank among the deliberation's messages,
	// filled in by the query API as it answers (0, and absent, for a
	// message of no opened deliberation).
	Ordinal     uint64 `json:"ordinal,omitempty"`
	Participant string `json:"participant,omitempty"`
	ArtifactID  string `json:"artifact_id,omitempty"`
	Class       string `json:"error_class"`
	Code        string `json:"code"`
	Message     string `json:"message"`
}

// Charter is what the open control message fixes. Limits and Policy are
// kept as canonical JSON for the supervisor.
type Charter struct {
	Title        string   `json:"title"`
	Participants []string `json:"participants,omitempty"`
	// Terminators are the participants who may, beside the supervisor,
	// publish a TERMINATION; the record must still justify it.
	Terminators []string        `json:"terminators,omitempty"`
	Limits      json.RawMessage `json:"limits,omitempty"`
	Policy      json.RawMessage `json:"policy,omitempty"`
	// Principal is the participant whose resolution alone resolves the
	// deliberation's binding moments (projector/binding.go); "" means
	// wire.PrincipalToken.
	Principal string `json:"principal,omitempty"`
	// Keys binds participant tokens to the nkeys user public keys their
	// artifacts are signed with (signing.Binding; docs/VERIFY.md).
	Keys map[string]string `json:"keys,omitempty"`
	// RequireSignatures: an artifact from a participant is admitted only
	// signed by the key Keys binds to its token.
	RequireSignatures bool `json:"require_signatures,omitempty"`
}

// Verdict is what the fold did with one message.
type Verdict string

// Verdicts. Accepted and applied mean the message took effect;
// rejected and late mean it did not (it stays in the stream); unprojected
// and unknown say that the projection cannot tell (yet, or any more).
const (
	// VerdictAccepted: the artifact is in the DAG at the message's position.
	VerdictAccepted Verdict = "accepted"
	// VerdictRejected: the message is recorded as a rejection, with its
	// class, code and message.
	VerdictRejected Verdict = "rejected"
	// VerdictLate: a valid artifact that arrived after the deliberation
	// ended; it is kept outside the state.
	VerdictLate Verdict = "late"
	// VerdictApplied: a control message that took effect.
	VerdictApplied Verdict = "applied"
	// VerdictUnprojected: the projection has not reached the position yet.
	// Ask again.
	VerdictUnprojected Verdict = "unprojected"
	// VerdictUnknown: the projection no longer keeps the record (only the
	// most recent projector.Options.MaxKept rejections and late artifacts are kept
	// in detail).
	VerdictUnknown Verdict = "unknown"
)

// Took reports whether the verdict says the message took effect.
func (v Verdict) Took() bool {
	return v == VerdictAccepted || v == VerdictApplied
}

// OutcomeReport is the answer of the outcome query: what the projector did
// with the message at a stream position (the Sequence of the PubAck its
// publisher received).
//
// Outcome is one of accepted (the artifact is in the DAG at Position),
// rejected (ErrorClass,
// Code and Message say why), late (a valid artifact after the deliberation
// ended, kept outside the state), applied (a control message that took
// effect), unprojected (the engine's projection, at Projected, has not
// reached Position yet: ask again) or unknown (the projection no longer
// keeps the record: only the most recent 10,000 rejections and late
// artifacts of a deliberation are kept in detail; Note says so).
type OutcomeReport struct {
	Deliberation string  `json:"deliberation"`
	Position     uint64  `json:"position"`
	Outcome      Verdict `json:"outcome"`
	// Projected is the projection's position when it answered.
	Projected    uint64 `json:"projected"`
	Participant  string `json:"participant,omitempty"`
	ArtifactID   string `json:"artifact_id,omitempty"`
	ArtifactType string `json:"artifact_type,omitempty"`
	Op           string `json:"op,omitempty"`
	// Ordinal is the message's rank among the deliberation's messages
	// (projector.MessageOutcome.Ordinal): absent for a message outside its
	// record, and from an engine whose answer does not carry it.
	Ordinal    uint64 `json:"ordinal,omitempty"`
	ErrorClass string `json:"error_class,omitempty"`
	Code       string `json:"code,omitempty"`
	Message    string `json:"message,omitempty"`
	Note       string `json:"note,omitempty"`
}

// Took reports whether the message took effect: accepted or applied.
func (o OutcomeReport) Took() bool { return o.Outcome.Took() }

// Summary is one deliberation in the query API's list.
type Summary struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Status   Status `json:"status"`
	Position uint64 `json:"position"`
	// OpenedAt is the position of the open control message: the list's
	// order (newest first) and its cursor.
	OpenedAt   uint64 `json:"opened_at"`
	Artifacts  int    `json:"artifacts"`
	Rejections int    `json:"rejections"`
}

// ArtifactEntry is one artifact of a deliberation's DAG in the query
// API's list of its artifacts.
type ArtifactEntry struct {
	ArtifactID canon.Digest `json:"artifact_id"`
	Position   uint64       `json:"position"`
	// Ordinal is the artifact's message's rank among the deliberation's
	// messages (projector.Deliberation.Ordinal): where a person reads positions.
	Ordinal     uint64 `json:"ordinal,omitempty"`
	Participant string `json:"participant"`
	Type        string `json:"artifact_type"`
}

// RejectionList is a page of rejections (of a deliberation, or of the
// messages of no opened deliberation) in stream order, with the counts
// of all of them.
type RejectionList struct {
	Deliberation string `json:"deliberation"`
	// Total counts every rejection ever recorded, ByCode the recorded ones
	// by code (of a deliberation: all of them; unrouted: the kept ones),
	// Kept those kept in detail (the most recent MaxKept).
	Total  int            `json:"total"`
	ByCode map[string]int `json:"by_code"`
	Kept   int            `json:"kept"`
	// NextCursor asks for the page after this one (empty: this is the
	// last).
	NextCursor string      `json:"next_cursor,omitempty"`
	Rejections []Rejection `json:"rejections"`
}

// View is the JSON summary of a deliberation served by the query API
// (the HTTP API in the README).
type View struct {
	ID                     string              `json:"id"`
	Title                  string              `json:"title"`
	Status                 Status              `json:"status"`
	Position               uint64              `json:"position"`
	OpenedAt               uint64              `json:"opened_at"`
	Round                  int                 `json:"round"`
	Artifacts              int                 `json:"artifacts"`
	Counts                 map[events.Type]int `json:"counts"`
	Participants           map[string]int      `json:"participants"`
	Rejections             int                 `json:"rejections"`
	RejectionsByCode       map[string]int      `json:"rejections_by_code"`
	Late                   int                 `json:"late"`
	Tips                   []canon.Digest      `json:"tips"`
	OpenBlockingObjections []canon.Digest      `json:"open_blocking_objections"`
	Decisions              []canon.Digest      `json:"decisions"`
	Terminations           []canon.Digest      `json:"terminations"`
	Charter                *Charter            `json:"charter,omitempty"`
	// InadmissibleEvidence is the EVIDENCE the charter's provenance
	// policy holds inadmissible (absent without a policy).
	InadmissibleEvidence []canon.Digest `json:"inadmissible_evidence,omitempty"`
	StateDigest          canon.Digest   `json:"state_digest"`
	// Log is the deliberation's log (docs/VERIFY.md): its messages and
	// root, and its checkpoints.
	Log LogState `json:"log"`
}

// LogState is a deliberation's log as the fold has it.
type LogState struct {
	// Size is the number of messages of the record (leaves), Root the
	// base64 of the RFC 6962 root.
	Size uint64 `json:"size"`
	Root string `json:"root"`
	// Checkpoints that verified, the messages the last of them covers,
	// and those that did not verify.
	Checkpoints    int    `json:"checkpoints"`
	Covered        uint64 `json:"covered"`
	BadCheckpoints int    `json:"bad_checkpoints,omitempty"`
	// CheckpointDue: a judgment (a DECISION, FAILURE or TERMINATION, or
	// the end) is in the log and no checkpoint covers it yet; the engine
	// publishes one within about a second.
	CheckpointDue bool `json:"checkpoint_due"`
}

// MaxReceipts bounds the ordinals of one request for receipts.
const MaxReceipts = 1000

// MaxReceiptLog bounds the log a receipt read rebuilds: a deliberation
// whose record holds more messages gives no receipts from the engine (the
// tree holds about 64 bytes a message while it is built: at most 64 MiB a
// read, two reads at a time). An auditor rebuilds any log from a
// recording (engine audit).
const MaxReceiptLog = 1 << 20

// CodeReceiptLogTooLarge: the deliberation's log is past MaxReceiptLog.
const CodeReceiptLogTooLarge = "limit.receipt_log"

// Codes of a receipt that could not be given (ReceiptItem.Code).
const (
	// CodeReceiptNotCovered: no checkpoint covers the message yet; the
	// engine publishes one after the next judgment (a DECISION, FAILURE or
	// TERMINATION) and at the end.
	CodeReceiptNotCovered = "receipt.not_covered"
	// CodeReceiptNoOrdinal: no message of the record has the ordinal.
	CodeReceiptNoOrdinal = "receipt.no_ordinal"
)

// ReceiptList answers a request for the receipts of messages of a
// deliberation, by ordinal, in the order asked.
type ReceiptList struct {
	Deliberation string        `json:"deliberation"`
	Receipts     []ReceiptItem `json:"receipts"`
}

// ReceiptItem is the receipt of one message (a C2SP tlog-proof document,
// docs/VERIFY.md), or why there is none.
type ReceiptItem struct {
	Ordinal uint64 `json:"ordinal"`
	Receipt string `json:"receipt,omitempty"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// EngineInfo is what an engine says of itself: its public key, which
// signs its supervisor's emissions, its principals' resolutions and its
// checkpoints (docs/VERIFY.md), and the record it reads: the stream's
// name, and whether the server's subject mapping stores its subjects by
// partition (docs/SCALING.md), and over several streams every stream's
// name, in order of their index (a position's high bits are that index).
// A client reads with them; an engine that says neither reads the
// unpartitioned stream PARLEY.
type EngineInfo struct {
	Key         string   `json:"engine_key"`
	Stream      string   `json:"stream,omitempty"`
	Partitioned bool     `json:"partitioned,omitempty"`
	Streams     []string `json:"streams,omitempty"`
}
