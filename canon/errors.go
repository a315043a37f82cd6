package canon

import (
	"fmt"
	"strconv"
)

// Class is one of the five error classes of the restricted profile. They are
// the upstream reference's classes, so that a result from parley can be
// compared with one from any other implementation of the profile.
type Class string

// The error classes. Every rejection carries exactly one.
const (
	// MalformedInput: not JSON, a byte-order mark, invalid UTF-8, a raw
	// control character in a string, or a duplicate member name.
	MalformedInput Class = "malformed_input"
	// UnsupportedValue: JSON outside the admitted domain (fractions,
	// exponents, non-finite numbers, integers out of range, unpaired
	// surrogate escapes, a top level that is not an object where one is
	// required) or past a configured limit.
	UnsupportedValue Class = "unsupported_value"
	// NormalizationCollision: distinct member names that are equal after NFC.
	NormalizationCollision Class = "normalization_collision"
	// InvalidIdentifierSyntax: verification found no artifact_id, a
	// non-string one, or one not of the form sha256:<64 lowercase hex>.
	InvalidIdentifierSyntax Class = "invalid_artifact_identifier_syntax"
	// IdentifierMismatch: the artifact_id does not match the content.
	IdentifierMismatch Class = "artifact_identifier_mismatch"
)

// Error is a classified rejection. Class is one of the five profile classes,
// Code a finer stable code (see Codes), and Offset the byte offset in the
// input where the problem was found (-1 when it concerns the whole input).
type Error struct {
	Class  Class
	Code   string
	Offset int64
	Msg    string
}

func (e *Error) Error() string {
	if e.Offset >= 0 {
		return "canon: " + e.Msg + " (" + e.Code + " at byte " + strconv.FormatInt(e.Offset, 10) + ")"
	}
	return "canon: " + e.Msg + " (" + e.Code + ")"
}

// Is reports whether target is an *Error with the same Code, so that
// errors.Is(err, canon.ErrDuplicateName) matches wherever the duplicate is.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// ErrorClass and ErrorCode let callers in other packages read the
// classification without importing this package's concrete type.
func (e *Error) ErrorClass() string { return string(e.Class) }

// ErrorCode returns the stable code.
func (e *Error) ErrorCode() string { return e.Code }

// ErrorOffset returns the byte offset, or -1.
func (e *Error) ErrorOffset() int64 { return e.Offset }

func sentinel(class Class, code, msg string) *Error {
	return &Error{Class: class, Code: code, Offset: -1, Msg: msg}
}

// Sentinels, one per code. Match them with errors.Is; the error returned by
// the parser is a fresh *Error with the same Class and Code and an Offset.
var (
	ErrEmpty         = sentinel(MalformedInput, "json.empty", "empty input")
	ErrBOM           = sentinel(MalformedInput, "json.bom", "UTF-8 byte-order mark is not admitted")
	ErrSyntax        = sentinel(MalformedInput, "json.syntax", "invalid JSON syntax")
	ErrUnexpectedEnd = sentinel(MalformedInput, "json.unexpected_end", "unexpected end of input")
	ErrTrailingData  = sentinel(MalformedInput, "json.trailing_data", "data after the top-level value")
	ErrInvalidUTF8   = sentinel(MalformedInput, "json.invalid_utf8", "invalid UTF-8")
	ErrControlChar   = sentinel(MalformedInput, "json.control_character", "raw control character in a string")
	ErrInvalidEscape = sentinel(MalformedInput, "json.invalid_escape", "invalid escape sequence")
	ErrInvalidNumber = sentinel(MalformedInput, "json.invalid_number", "invalid number syntax")
	ErrDuplicateName = sentinel(MalformedInput, "json.duplicate_name", "duplicate object member name")
	ErrFraction      = sentinel(UnsupportedValue, "number.fraction", "fractional number is not admitted")
	ErrExponent      = sentinel(UnsupportedValue, "number.exponent", "number with an exponent is not admitted")
	ErrNonInteger    = sentinel(UnsupportedValue, "number.non_integer", "number is not an integer")
	ErrNonFinite     = sentinel(UnsupportedValue, "number.non_finite", "non-finite number is not admitted")
	ErrIntegerRange  = sentinel(UnsupportedValue, "number.out_of_range", "integer outside -(2^53-1)..2^53-1")
	ErrIntegerDigits = sentinel(UnsupportedValue, "limit.integer_digits", "integer literal has too many digits")
	ErrLoneSurrogate = sentinel(UnsupportedValue, "string.unpaired_surrogate", "unpaired surrogate escape")
	ErrNonstarterRun = sentinel(UnsupportedValue, "string.nonstarter_run", "more than 30 combining marks in a row, which NFC implementations normalize differently")
	ErrTopLevel      = sentinel(UnsupportedValue, "value.top_level_not_object", "top-level value is not an object")
	ErrDepth         = sentinel(UnsupportedValue, "limit.depth", "nesting too deep")
	ErrSize          = sentinel(UnsupportedValue, "limit.size", "input larger than the size limit")
	ErrNFCCollision  = sentinel(NormalizationCollision, "nfc.collision", "member names collide after NFC normalization")
	ErrIDMissing     = sentinel(InvalidIdentifierSyntax, "id.missing", "no top-level artifact_id")
	ErrIDNotString   = sentinel(InvalidIdentifierSyntax, "id.not_string", "artifact_id is not a string")
	ErrIDSyntax      = sentinel(InvalidIdentifierSyntax, "id.syntax", "artifact_id does not match sha256:[0-9a-f]{64}")
	ErrIDMismatch    = sentinel(IdentifierMismatch, "id.mismatch", "artifact_id does not match the content")
)

// Codes lists every sentinel, in documentation order. docs/ERRORS.md is
// checked against it by a test.
var Codes = []*Error{
	ErrEmpty, ErrBOM, ErrSyntax, ErrUnexpectedEnd, ErrTrailingData,
	ErrInvalidUTF8, ErrControlChar, ErrInvalidEscape, ErrInvalidNumber,
	ErrDuplicateName, ErrFraction, ErrExponent, ErrNonInteger, ErrNonFinite,
	ErrIntegerRange, ErrIntegerDigits, ErrLoneSurrogate, ErrNonstarterRun, ErrTopLevel,
	ErrDepth, ErrSize, ErrNFCCollision, ErrIDMissing, ErrIDNotString,
	ErrIDSyntax, ErrIDMismatch,
}

// at returns a located copy of a sentinel.
func at(s *Error, off int, detail string) *Error {
	msg := s.Msg
	if detail != "" {
		msg = fmt.Sprintf("%s: %s", s.Msg, detail)
	}
	return &Error{Class: s.Class, Code: s.Code, Offset: int64(off), Msg: msg}
}
