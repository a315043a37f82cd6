package signing

import "strings"

// ClassSignature is the error class of every signing error, beside the
// classes of canon and events.
const ClassSignature = "invalid_signature"

// Error is a classified signing error: a stable dotted code and a message.
// Match a sentinel with errors.Is (it compares codes).
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("signing: ")
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

// ErrorClass returns ClassSignature.
func (e *Error) ErrorClass() string { return ClassSignature }

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
	// ErrInput: the deliberation id, participant token or artifact id
	// given to Message, Sign or Verify is not of its grammar (a caller's
	// error, never a participant's).
	ErrInput = sentinel("signature.invalid_input", "the deliberation, token or artifact id is malformed")
	// ErrNoSignature: the message carries neither signature header.
	ErrNoSignature = sentinel("signature.missing", "the message is not signed")
	// ErrMalformed: a signature header is present but not of its
	// grammar: only one of the two, a header given twice, a key that is
	// not an nkeys user public key, a signature that is not 86 characters
	// of unpadded base64url encoding 64 bytes.
	ErrMalformed = sentinel("signature.malformed", "the signature headers are malformed")
	// ErrUnknownToken: the binding has no key for the participant token.
	ErrUnknownToken = sentinel("signature.unknown_token", "no key is bound to the participant token")
	// ErrWrongKey: the message names a key other than the one bound to
	// its token.
	ErrWrongKey = sentinel("signature.wrong_key", "the message is signed with a key not bound to its token")
	// ErrBadSignature: the signature does not verify under the bound key
	// for this deliberation, token and artifact id.
	ErrBadSignature = sentinel("signature.bad", "the signature does not verify")
	// ErrBinding: a binding maps a token that is not a participant token,
	// or to a key that is not an nkeys user public key.
	ErrBinding = sentinel("signature.invalid_binding", "the key binding is malformed")
	// ErrKey: a key pair given to Sign is not an nkeys user key pair
	// with its seed.
	ErrKey = sentinel("signature.invalid_key", "the key pair is not an nkeys user key with its seed")
)

// Codes lists every sentinel.
var Codes = []*Error{ErrInput, ErrNoSignature, ErrMalformed, ErrUnknownToken, ErrWrongKey, ErrBadSignature, ErrBinding, ErrKey}
