package tlog

import "strings"

// ClassLog is the error class of every tlog error, beside the
// classes of canon and events.
const ClassLog = "invalid_log_proof"

// Error is a classified tlog error: a stable dotted code and a message.
// Match a sentinel with errors.Is (it compares codes).
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("tlog: ")
	b.WriteString(e.Msg)
	b.WriteString(" (")
	b.WriteString(e.Code)
	b.WriteString(")")
	return b.String()
}

// Is matches another *Error with the same Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// ErrorClass returns ClassLog.
func (e *Error) ErrorClass() string { return ClassLog }

// ErrorCode returns the stable code.
func (e *Error) ErrorCode() string { return e.Code }

func sentinel(code, msg string) *Error { return &Error{Code: code, Msg: msg} }

// fail returns an error with s's code and a message that adds detail.
func fail(s *Error, detail string) *Error {
	if detail == "" {
		return s
	}
	return &Error{Code: s.Code, Msg: s.Msg + ": " + detail}
}

// Sentinels, one per code.
var (
	// ErrLeaf: bytes that are not a leaf of LeafVersion's encoding.
	ErrLeaf = sentinel("tlog.malformed_leaf", "not a parley log leaf")
	// ErrOrigin: a deliberation id that is not one, or a checkpoint or
	// key of another origin than the one expected.
	ErrOrigin = sentinel("tlog.origin", "the origin is not the deliberation's")
	// ErrKey: a key that is not an Ed25519 nkeys key (seed or public
	// key) or a note verifier key.
	ErrKey = sentinel("tlog.invalid_key", "not a usable Ed25519 key")
	// ErrCheckpoint: a signed note whose text is not exactly a
	// checkpoint body (origin, canonical decimal size, base64 of a 32-byte
	// root, no extension line), or not a signed note.
	ErrCheckpoint = sentinel("tlog.malformed_checkpoint", "not a checkpoint")
	// ErrSignature: the checkpoint bears no valid signature of the
	// trusted key (or a cosignature required of a witness is missing).
	ErrSignature = sentinel("tlog.unsigned", "the checkpoint is not signed by a trusted key")
	// ErrRange: a leaf index or tree size outside the tree.
	ErrRange = sentinel("tlog.out_of_range", "the index or size is outside the tree")
	// ErrInclusion: an inclusion proof that does not lead from the leaf to
	// the checkpoint's root.
	ErrInclusion = sentinel("tlog.bad_inclusion_proof", "the leaf is not included in the checkpoint")
	// ErrConsistency: a consistency proof that does not show the larger
	// checkpoint's tree extends the smaller's.
	ErrConsistency = sentinel("tlog.bad_consistency_proof", "the consistency proof does not verify")
	// ErrInconsistent: two checkpoints of one origin that cannot both be
	// true: the same size with different roots (a split view, provable
	// from the two signed notes alone), or a root that the record does not
	// reproduce.
	ErrInconsistent = sentinel("tlog.inconsistent", "the checkpoints are inconsistent")
	// ErrReceipt: bytes that are not exactly a receipt (C2SP tlog-proof
	// with the leaf as its extra data).
	ErrReceipt = sentinel("tlog.malformed_receipt", "not a receipt")
)

// Codes lists every sentinel.
var Codes = []*Error{ErrLeaf, ErrOrigin, ErrKey, ErrCheckpoint, ErrSignature, ErrRange, ErrInclusion, ErrConsistency, ErrInconsistent, ErrReceipt}
