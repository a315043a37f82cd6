package projector

import (
	"bytes"

	"github.com/parley-engine/parley/wire"
)

// The subjects and tokens are wire's (one grammar for every package);
// these names stay for the fold's callers.
const (
	SubjectPrefix   = wire.SubjectPrefix
	SupervisorToken = wire.SupervisorToken
	ImportToken     = wire.ImportToken
)

// ArtifactSubject is wire.ArtifactSubject.
func ArtifactSubject(deliberation, participant string) string {
	return wire.ArtifactSubject(deliberation, participant)
}

// ControlSubject is wire.ControlSubject.
func ControlSubject(deliberation string) string { return wire.ControlSubject(deliberation) }

// DeliberationFilter is wire.DeliberationFilter.
func DeliberationFilter(deliberation string) string { return wire.DeliberationFilter(deliberation) }

// ValidToken is wire.ValidToken.
func ValidToken(s string) bool { return wire.ValidToken(s) }

// ValidDeliberation is wire.ValidDeliberation.
func ValidDeliberation(s string) bool { return wire.ValidDeliberation(s) }

// DeliberationOf is wire.DeliberationOf.
func DeliberationOf(subject string) string { return wire.DeliberationOf(subject) }

func route(subject string) (deliberation, kind, participant string) { return wire.Parse(subject) }

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
