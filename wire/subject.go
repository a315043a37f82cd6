// Package wire is what parley puts on the wire, with no dependency beyond
// the standard library, so that a participant built on package client
// links neither the engine nor the NATS server: the subjects and their
// grammar, participant tokens and deliberation ids, the stream's name and
// subjects, the headers an import sets, the Nats-Msg-Ids every publisher
// makes (MsgIDs), and the prefix of the query API's NATS micro service.
package wire

import "strings"

// Subjects. One stream holds every deliberation:
//
//	parley.<deliberation>.art.<participant>   artifacts
//	parley.<deliberation>.ctl                  control messages
const (
	SubjectPrefix = "parley."
	// SupervisorToken is the participant token of the termination
	// supervisor. Tokens starting with '_' are reserved for the engine.
	SupervisorToken = "_supervisor"
	// PrincipalToken is the participant token a principal's resolution
	// of a binding moment is published as, unless an HTTP token names
	// another.
	PrincipalToken = "principal"
	// CheckpointToken is the reserved token the engine publishes its
	// signed checkpoints of a deliberation's log as
	// (parley.<deliberation>.art._checkpoint; docs/VERIFY.md): the message
	// is the signed note, its Parley-Key header the engine's public key.
	CheckpointToken = "_checkpoint"
)

// CheckpointSubject is the subject the engine publishes deliberation's
// checkpoints on.
func CheckpointSubject(deliberation string) string {
	return ArtifactSubject(deliberation, CheckpointToken)
}

// ValidSigner reports whether s is a token whose messages may carry a
// signature: a participant token, or the supervisor's (the engine signs
// its emissions).
func ValidSigner(s string) bool { return ValidToken(s) || s == SupervisorToken }

// BindingSubject is where the engine announces a new binding moment of a
// deliberation (core NATS, not stored: GET .../bindings is the record).
func BindingSubject(deliberation string) string {
	return SubjectPrefix + deliberation + ".binding"
}

// ArtifactSubject returns the subject participant publishes artifacts of
// deliberation on.
func ArtifactSubject(deliberation, participant string) string {
	return SubjectPrefix + deliberation + ".art." + participant
}

// ControlSubject returns the control subject of deliberation.
func ControlSubject(deliberation string) string {
	return SubjectPrefix + deliberation + ".ctl"
}

// DeliberationFilter is the subject filter of everything in deliberation.
func DeliberationFilter(deliberation string) string {
	return SubjectPrefix + deliberation + ".>"
}

// ValidToken reports whether s is a participant token:
// [A-Za-z0-9][A-Za-z0-9_-]{0,63}. Reserved engine tokens ('_' first) are
// not participant tokens.
func ValidToken(s string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] == '_' || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ValidDeliberation reports whether s is a deliberation id: a UUID of any
// version in its canonical 36-character lowercase form.
func ValidDeliberation(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// DeliberationOf returns the deliberation a subject names (the token after
// "parley."), or "" for a subject that names none. A runner that spreads
// deliberations over shards routes by it.
func DeliberationOf(subject string) string {
	d, kind, _ := Parse(subject)
	if kind == "" {
		return ""
	}
	return d
}

// Parse splits a subject into its deliberation and, for artifacts, its
// participant. kind is "art", "ctl" or "" for a subject that is neither.
func Parse(subject string) (deliberation, kind, participant string) {
	rest, ok := strings.CutPrefix(subject, SubjectPrefix)
	if !ok {
		return "", "", ""
	}
	delib, rest, ok := strings.Cut(rest, ".")
	if !ok {
		return "", "", ""
	}
	if rest == "ctl" {
		return delib, "ctl", ""
	}
	if p, ok := strings.CutPrefix(rest, "art."); ok && p != "" && !strings.Contains(p, ".") {
		return delib, "art", p
	}
	return "", "", ""
}
