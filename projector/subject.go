package projector

import (
	"strings"

	"github.com/google/uuid"
)

// Subjects. One stream holds every deliberation:
//
//	parley.<deliberation>.art.<participant>   artifacts
//	parley.<deliberation>.ctl                  control messages
const (
	SubjectPrefix = "parley."
	// SupervisorToken is the participant token of the termination
	// supervisor. Tokens starting with '_' are reserved for the engine.
	SupervisorToken = "_supervisor"
)

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
	u, err := uuid.Parse(s)
	return err == nil && u.String() == s
}

// route splits a subject into its deliberation and, for artifacts, its
// participant. kind is "art", "ctl" or "" for a subject that is neither.
func route(subject string) (deliberation, kind, participant string) {
	rest, ok := strings.CutPrefix(subject, SubjectPrefix)
	if !ok {
		return "", "", ""
	}
	parts := strings.Split(rest, ".")
	switch {
	case len(parts) == 2 && parts[1] == "ctl":
		return parts[0], "ctl", ""
	case len(parts) == 3 && parts[1] == "art":
		return parts[0], "art", parts[2]
	}
	return "", "", ""
}
