package api

// Kind is what sort of refusal an Error is: the read model and the write
// path say which, and the HTTP API and the micro service answer each with
// its status (HTTPStatus).
type Kind uint8

// Kinds of Error.
const (
	// KindInternal: the engine failed (500); the zero Kind.
	KindInternal Kind = iota
	// KindInvalid: the request is malformed (400).
	KindInvalid
	// KindUnauthorized: it needs a token (401).
	KindUnauthorized
	// KindForbidden: the token, or the request's origin, may not do it (403).
	KindForbidden
	// KindNotFound: what it names does not exist (404).
	KindNotFound
	// KindConflict: the record says otherwise, or moved (409).
	KindConflict
	// KindUnprocessable: well-formed, and refused on its merits (422).
	KindUnprocessable
	// KindLimited: a bound refuses it for now; RetryAfter says when to
	// ask again (429).
	KindLimited
	// KindUnavailable: the engine cannot answer now: the stream did not
	// answer, the projection is behind, the engine halted (503).
	KindUnavailable
)

// HTTPStatus is the status an error of the kind is answered with, over
// HTTP and as the micro service's error code.
func (k Kind) HTTPStatus() int {
	switch k {
	case KindInvalid:
		return 400
	case KindUnauthorized:
		return 401
	case KindForbidden:
		return 403
	case KindNotFound:
		return 404
	case KindConflict:
		return 409
	case KindUnprocessable:
		return 422
	case KindLimited:
		return 429
	case KindUnavailable:
		return 503
	}
	return 500
}

// Error is a refusal of the query API, with a stable code (docs/ERRORS.md),
// as its body goes on the wire: {"code":…,"error":…}.
type Error struct {
	Kind     Kind   `json:"-"`
	Code     string `json:"code"`
	Message  string `json:"error"`
	Findings any    `json:"findings,omitempty"`
	// Projected is, in a projection.behind answer, the position the
	// engine's projection had reached.
	Projected uint64 `json:"projected,omitempty"`
	// RetryAfter, when positive, is sent as Retry-After (seconds).
	RetryAfter int `json:"-"`
}

func (e *Error) Error() string { return e.Message }

// ErrorCode and RetryAfterSeconds tell web's pages how to answer it.
func (e *Error) ErrorCode() string      { return e.Code }
func (e *Error) RetryAfterSeconds() int { return e.RetryAfter }

// HTTPStatus is the status the error is answered with (its Kind's; web's
// binding pages answer a refused resolution with it).
func (e *Error) HTTPStatus() int { return e.Kind.HTTPStatus() }

// Codes of the API's own refusals (the fold's, canon's, events' and
// binding's codes are theirs).
const (
	CodeBadRequest   = "bad_request"
	CodeNotFound     = "not_found"
	CodeUnavailable  = "unavailable"
	CodeInternal     = "internal"
	CodeUnauthorized = "unauthorized"
	CodeForbidden    = "forbidden"
	// CodeCursorInvalid, CodeLimitInvalid, CodeStatusInvalid: a page
	// request's cursor, limit or status filter.
	CodeCursorInvalid = "cursor.invalid"
	CodeLimitInvalid  = "limit.invalid"
	CodeStatusInvalid = "status.invalid"
	// CodeBehind is the code of a read whose min_position the projection
	// has not reached within the wait.
	CodeBehind = "projection.behind"
	// CodePartitionUnavailable is the code of a read of a deliberation
	// whose stream no engine answering it holds now: its owner died and
	// the others have not taken it yet, or the forward to its owner
	// failed (503, retried; engine serve --own-streams).
	CodePartitionUnavailable = "partition.unavailable"
	// CodeHalted is the code of every answer of a halted engine's query
	// API (the client does not retry it).
	CodeHalted = "engine.halted"
	// CodeReadBudget is the code of a read refused for the budget (429).
	CodeReadBudget = "limit.read_budget"
	// CodeArtifactMismatch: the message at the position asked is another
	// artifact than the one named.
	CodeArtifactMismatch = "outcome.artifact_mismatch"
)

// PageRequest asks for a page: at most Limit items (0: the default), after
// Cursor (empty: the first page), and, for deliberations, of the statuses
// in Status (comma-separated; empty: any).
type PageRequest struct {
	Limit  int    `json:"limit,omitempty"`
	Cursor string `json:"cursor,omitempty"`
	Status string `json:"status,omitempty"`
}
