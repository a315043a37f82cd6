package partition

import (
	"errors"
	"strconv"
	"strings"

	"github.com/parley-engine/parley/wire"
)

// Count is the number of logical partitions. It is part of the wire: a
// change of it moves almost every deliberation to another partition.
const Count = 1024

// Prefix is the prefix of every mapped subject: parley.p.<n>.
const Prefix = wire.SubjectPrefix + "p."

// Refused is where the server maps a publish made directly to a mapped
// subject (parley.p.…): no stream holds it and no permission allows it.
const Refused = wire.SubjectPrefix + "refused"

// FNV-1a, 32 bits.
const (
	offset32 = 2166136261
	prime32  = 16777619
)

// Of returns the partition of a deliberation: FNV-1a-32 of its id's bytes
// modulo Count, what the server's {{partition(1024,1)}} computes for the
// id's token.
func Of(deliberation string) int {
	h := uint32(offset32)
	for i := 0; i < len(deliberation); i++ {
		h ^= uint32(deliberation[i])
		h *= prime32
	}
	return int(h % Count)
}

// Token is the subject token of partition p: its decimal number, as the
// server writes it (no padding).
func Token(p int) string { return strconv.Itoa(p) }

// Subject returns the mapped form of an artifact or control subject of
// package wire (parley.<d>.art.<participant> or parley.<d>.ctl): the
// subject the server stores it under. ok is false for a subject the
// mapping leaves alone (the query API, a binding announcement, anything
// else).
func Subject(subject string) (mapped string, ok bool) {
	rest, ok := strings.CutPrefix(subject, wire.SubjectPrefix)
	if !ok {
		return "", false
	}
	d, tail, ok := strings.Cut(rest, ".")
	if !ok || d == "" {
		return "", false
	}
	switch {
	case tail == "ctl":
	case strings.HasPrefix(tail, "art.") && len(tail) > len("art.") && !strings.Contains(tail[len("art."):], "."):
	default:
		return "", false
	}
	return Prefix + Token(Of(d)) + "." + rest, true
}

// Original returns the subject a mapped subject was published as, and
// its partition. It fails (Error, ErrNotMapped or ErrMisplaced) for a
// subject that is not the mapping's output: not under Prefix, a partition
// token that is not a number below Count, a tail that is not an artifact
// or control subject, or a partition that is not its deliberation's.
func Original(mapped string) (subject string, p int, err error) {
	rest, ok := strings.CutPrefix(mapped, Prefix)
	if !ok {
		return "", 0, &Error{Code: CodeNotMapped, Subject: mapped}
	}
	tok, rest, ok := strings.Cut(rest, ".")
	if !ok {
		return "", 0, &Error{Code: CodeNotMapped, Subject: mapped}
	}
	p, err = strconv.Atoi(tok)
	if err != nil || p < 0 || p >= Count || Token(p) != tok {
		return "", 0, &Error{Code: CodeNotMapped, Subject: mapped}
	}
	subject = wire.SubjectPrefix + rest
	again, ok := Subject(subject)
	if !ok {
		return "", 0, &Error{Code: CodeNotMapped, Subject: mapped}
	}
	if again != mapped {
		return "", 0, &Error{Code: CodeMisplaced, Subject: mapped}
	}
	return subject, p, nil
}

// DeliberationFilter is the mapped form of wire.DeliberationFilter: the
// filter of everything stored for a deliberation, parley.p.<n>.<d>.>. It
// is what a Nats-Expected-Last-Subject-Sequence-Subject header and a
// consumer reading one deliberation must name.
func DeliberationFilter(deliberation string) string {
	return Prefix + Token(Of(deliberation)) + "." + deliberation + ".>"
}

// Error codes.
const (
	// CodeNotMapped: a subject that is not of the form the mapping
	// produces.
	CodeNotMapped = "partition.not_mapped"
	// CodeMisplaced: a mapped subject whose partition token is not its
	// deliberation's partition (published directly, not through the
	// mapping).
	CodeMisplaced = "partition.misplaced"
	// CodeStreams: a stream count outside 1..Count.
	CodeStreams = "partition.streams"
)

// Codes are the package's error codes.
var Codes = []string{CodeNotMapped, CodeMisplaced, CodeStreams}

// Error is the package's error: a code and what it is about.
type Error struct {
	Code    string
	Subject string // the subject refused, if any
	Detail  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("partition: ")
	b.WriteString(e.Code)
	if e.Subject != "" {
		b.WriteString(": ")
		b.WriteString(strconv.Quote(e.Subject))
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Is matches on the code: errors.Is(err, ErrMisplaced).
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// Sentinels for errors.Is.
var (
	ErrNotMapped = &Error{Code: CodeNotMapped}
	ErrMisplaced = &Error{Code: CodeMisplaced}
	ErrStreams   = &Error{Code: CodeStreams}
)
