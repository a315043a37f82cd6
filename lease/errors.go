package lease

import (
	"errors"
	"strconv"
	"strings"
)

// Error codes.
const (
	// CodeHeld: another owner holds the lease.
	CodeHeld = "lease.held"
	// CodeLost: the lease is no longer the caller's (another owner's
	// revision, or expired): stop acting for the partition.
	CodeLost = "lease.lost"
	// CodeConflict: a guarded write was refused because the record
	// changed after the position it was decided at.
	CodeConflict = "lease.conflict"
	// CodeUnavailable: the server did not answer (a timeout, JetStream
	// unavailable); nothing is known to have changed.
	CodeUnavailable = "lease.unavailable"
	// CodeBucket: the bucket cannot be made or used as a lease bucket.
	CodeBucket = "lease.bucket"
	// CodeInvalid: a bad argument.
	CodeInvalid = "lease.invalid"
)

// Codes are the package's error codes.
var Codes = []string{CodeHeld, CodeLost, CodeConflict, CodeUnavailable, CodeBucket, CodeInvalid}

// Error is the package's error.
type Error struct {
	Code     string
	Op       string // acquire, renew, check, release, keep, wait, write, …
	Key      string // the partition's key, if any
	Revision uint64 // the caller's revision (lost), or the holder's (held)
	Holder   string // the owner holding the key, when known
	Err      error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("lease: ")
	b.WriteString(e.Op)
	if e.Key != "" {
		b.WriteString(" " + e.Key)
	}
	b.WriteString(": " + e.Code)
	if e.Holder != "" {
		b.WriteString(" (held by " + strconv.Quote(e.Holder))
		if e.Code == CodeHeld && e.Revision != 0 {
			b.WriteString(" at revision " + strconv.FormatUint(e.Revision, 10))
		}
		b.WriteString(")")
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches on the code: errors.Is(err, ErrLost).
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// Sentinels for errors.Is.
var (
	ErrHeld        = &Error{Code: CodeHeld}
	ErrLost        = &Error{Code: CodeLost}
	ErrConflict    = &Error{Code: CodeConflict}
	ErrUnavailable = &Error{Code: CodeUnavailable}
	ErrBucket      = &Error{Code: CodeBucket}
	ErrInvalid     = &Error{Code: CodeInvalid}
)
