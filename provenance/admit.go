package provenance

import (
	"fmt"
	"slices"
	"time"
)

// Reason codes of a verdict (docs/ERRORS.md).
const (
	CodeTerminal        = "provenance.terminal"              // a terminal annotation: the assertion is not admitted
	CodeUnknownClass    = "provenance.unknown_class"         // not in the loaded vocabulary: counted as unverified-inference
	CodeNoTS            = "provenance.no_ts"                 // no ts: never counted
	CodeOutsideWindow   = "provenance.outside_window"        // ts not within W of the evaluation time
	CodeNoObservationID = "provenance.no_observation_id"     // cannot be re-verified: not counted toward k = 3
	CodeNotRequeryable  = "provenance.not_requeryable"       // re-querying cannot confirm the observation: not toward k = 3
	CodeNotReverified   = "provenance.not_reverified"        // no re-verifier for it: not toward k = 3
	CodeReverifyFailed  = "provenance.reverification_failed" // re-verification contradicts it: never counted
	CodeBelowFloor      = "provenance.below_floor"           // fewer distinct classes counted than k
	CodeDuplicateClass  = "provenance.duplicate_class"       // a class already counted for this assertion
)

// Params are the relying party's: the window W, the floor k and the
// evaluation time; MCPBriefRequeryable says whether substrate.mcp.brief
// observations pass the re-queryability test (their state is a third
// party's, stable or not as configured).
type Params struct {
	Window              time.Duration
	K                   int
	At                  time.Time
	MCPBriefRequeryable bool
}

// Verification is the result of re-querying a substrate for one
// annotation: Attempted false when it could not be re-queried here (no
// re-verifier for the class, a path outside the roots); then Verified
// says whether the substrate confirmed the observation. Detail says what
// was read; Cached that the result was reused.
type Verification struct {
	Attempted bool
	Verified  bool
	Cached    bool
	Detail    string
}

// Verifier re-verifies an annotation against its substrate.
type Verifier func(a Annotation) Verification

// Check is one re-verification as a verdict reports it.
type Check struct {
	Class         string `json:"substrate_class"`
	ObservationID string `json:"observation_id"`
	// Result is verified, failed or unavailable.
	Result string `json:"result"`
	Detail string `json:"detail"`
	Cached bool   `json:"cached,omitempty"`
}

// Check results.
const (
	ResultVerified    = "verified"
	ResultFailed      = "failed"
	ResultUnavailable = "unavailable"
)

// Reason explains one step of a verdict.
type Reason struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Verdict is the admissibility of one assertion.
type Verdict struct {
	Assertion string   `json:"assertion"`
	Admitted  bool     `json:"admitted"`
	Counted   []string `json:"counted"`
	Reasons   []Reason `json:"reasons"`
	// Reverification lists the substrates re-queried for the assertion.
	Reverification []Check `json:"reverification,omitempty"`
}

// Requeryable reports whether re-querying a substrate of class can confirm
// an earlier observation (§6): never for substrate.do.sse-count (the count
// differs on every observation) nor substrate.unix.peercred (the
// connection is gone); substrate.mcp.brief as configured.
func (p Params) Requeryable(class string) bool {
	switch class {
	case SSECount, UnixPeercred:
		return false
	case MCPBrief:
		return p.MCPBriefRequeryable
	}
	return !Terminal(class) && Known(class)
}

// Admit applies the admissibility discipline of seed 003 §6 to a set's
// annotations, per assertion in order of first appearance. An annotation
// counts when its effective class is a substrate class, its ts lies within
// W before the evaluation time, and it has not failed re-verification;
// toward k >= 3 only when it also has an observation id, passes the
// re-queryability test and was re-verified. An assertion is admitted when
// the distinct classes counted reach k and no annotation of it is
// terminal. verify may be nil; it is called for the annotations Requery
// selects that lie within the window.
func Admit(s *Set, p Params, verify Verifier) []Verdict {
	if verify == nil {
		return admit(s, p, nil)
	}
	return admit(s, p, func(i int) (Verification, bool) { return verify(s.Annotations[i]), true })
}

// AdmitReverified is Admit with the re-verifications made ahead of it
// (Reverify): rs[i] is the result for annotation i. With rs nil no
// annotation was re-queried, as with a nil Verifier; so is an annotation
// past the end of rs. It does no IO whatever the substrates: a fold calls
// it with results a runner computed before, outside any lock.
func AdmitReverified(s *Set, p Params, rs []Verification) []Verdict {
	if rs == nil {
		return admit(s, p, nil)
	}
	return admit(s, p, func(i int) (Verification, bool) {
		if i < len(rs) {
			return rs[i], true
		}
		return Verification{}, false
	})
}

// admit is the discipline; reverified gives annotation i's re-verification
// and whether it was re-queried (nil: none was).
func admit(s *Set, p Params, reverified func(i int) (Verification, bool)) []Verdict {
	var order []string
	by := map[string]*Verdict{}
	terminal := map[string]bool{}
	for i, a := range s.Annotations {
		v := by[a.Assertion]
		if v == nil {
			v = &Verdict{Assertion: a.Assertion, Counted: []string{}, Reasons: []Reason{}}
			by[a.Assertion] = v
			order = append(order, a.Assertion)
		}
		why := func(code, format string, args ...any) {
			v.Reasons = append(v.Reasons, Reason{code, fmt.Sprintf("%s: ", a.Class) + fmt.Sprintf(format, args...)})
		}
		class := Effective(a.Class, s.Vocabulary)
		switch {
		case class == Unverified && a.Class != Unverified:
			why(CodeUnknownClass, "not in vocabulary %s as loaded (%s): treated as unverified-inference", Vocabulary, s.Vocabulary)
			terminal[a.Assertion] = true
			continue
		case Terminal(class):
			why(CodeTerminal, "a terminal annotation: the assertion is not admitted")
			terminal[a.Assertion] = true
			continue
		case a.TS == nil:
			why(CodeNoTS, "no ts: never counted")
			continue
		case a.TS.After(p.At) || p.At.Sub(*a.TS) > p.Window:
			why(CodeOutsideWindow, "ts %s is not within %s before %s", a.TS.UTC().Format(time.RFC3339), p.Window, p.At.UTC().Format(time.RFC3339))
			continue
		}
		var ver Verification
		attempted, asked := false, false
		if reverified != nil && a.ObservationID != "" {
			ver, asked = reverified(i)
		}
		if asked {
			attempted = ver.Attempted
			c := Check{Class: a.Class, ObservationID: a.ObservationID, Result: ResultUnavailable, Detail: ver.Detail, Cached: ver.Cached}
			switch {
			case ver.Attempted && ver.Verified:
				c.Result = ResultVerified
			case ver.Attempted:
				c.Result = ResultFailed
			}
			v.Reverification = append(v.Reverification, c)
			if attempted && !ver.Verified {
				why(CodeReverifyFailed, "re-verification failed: %s", ver.Detail)
				continue
			}
		}
		if p.K >= 3 {
			switch {
			case a.ObservationID == "":
				why(CodeNoObservationID, "no observation_id: cannot be re-verified, not counted toward k = %d", p.K)
				continue
			case !p.Requeryable(class):
				why(CodeNotRequeryable, "re-querying the substrate cannot confirm the earlier observation: not counted toward k = %d", p.K)
				continue
			case !asked:
				why(CodeNotReverified, "not independently re-verified (no re-verifier configured): not counted toward k = %d", p.K)
				continue
			case !attempted:
				why(CodeNotReverified, "not independently re-verified (%s): not counted toward k = %d", v.Reverification[len(v.Reverification)-1].Detail, p.K)
				continue
			}
		}
		if slices.Contains(v.Counted, class) {
			why(CodeDuplicateClass, "already counted: classes must be distinct")
			continue
		}
		v.Counted = append(v.Counted, class)
	}
	out := make([]Verdict, 0, len(order))
	for _, as := range order {
		v := by[as]
		switch {
		case terminal[as]:
		case len(v.Counted) < p.K:
			v.Reasons = append(v.Reasons, Reason{CodeBelowFloor, fmt.Sprintf("%d distinct substrate classes counted, the floor is %d", len(v.Counted), p.K)})
		default:
			v.Admitted = true
		}
		out = append(out, *v)
	}
	return out
}
