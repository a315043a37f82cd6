package provenance

import "github.com/parley-engine/parley/events"

// Requery reports whether a judgement of a set of vocabulary may re-query
// annotation a: it has a substrate class (neither terminal nor unknown), a
// ts and an observation id. Whether the ts lies within the window depends
// on the relying party's parameters, which Reverify does not know, so it
// re-queries such an annotation whatever its ts.
func Requery(a Annotation, vocabulary string) bool {
	return !Terminal(Effective(a.Class, vocabulary)) && a.TS != nil && a.ObservationID != ""
}

// Reverify re-verifies with verify every annotation of s that a judgement
// may re-query (Requery), in order: the result is aligned with
// s.Annotations, the entries of the others are zero (AdmitReverified never
// reads them). It is nil when verify is nil. verify may do IO (a
// substrate.Reverifier reads files and runs git): Reverify is called ahead
// of the fold, outside any lock, and the fold takes its result as an input
// (projector.Msg.Reverified).
func (s *Set) Reverify(verify Verifier) []Verification {
	if verify == nil {
		return nil
	}
	out := make([]Verification, len(s.Annotations))
	for i, a := range s.Annotations {
		if Requery(a, s.Vocabulary) {
			out[i] = verify(a)
		}
	}
	return out
}

// Observed reports whether EVIDENCE of class c claims to be observed
// (TRACE_VERIFIED_OBSERVATION, EXTERNAL_EVIDENCE): the classes a charter's
// provenance policy may require to be admissible; the other two make no
// such claim.
func Observed(c events.ProvenanceClass) bool {
	return c == events.TraceVerifiedObservation || c == events.ExternalEvidence
}

// Annotated reports whether a is an EVIDENCE of an observed class that
// carries a parley.provenance extension: the artifacts a fold under a
// provenance policy may judge, and so the only ones Reverify re-verifies.
func Annotated(a *events.Artifact) bool {
	if a == nil || a.Type != events.TypeEvidence {
		return false
	}
	ev, ok := a.Payload.(*events.Evidence)
	if !ok || !Observed(ev.ProvenanceClass) {
		return false
	}
	_, ok = a.Extensions[Extension]
	return ok
}

// Reverify is the re-verification of a validated artifact's annotations
// ahead of the fold (Set.Reverify): nil when verify is nil, when a is not
// Annotated or when its extension does not parse (the fold then judges the
// EVIDENCE inadmissible without re-querying anything).
func Reverify(a *events.Artifact, verify Verifier) []Verification {
	if verify == nil || !Annotated(a) {
		return nil
	}
	s, err := ParseSet(a.Extensions[Extension])
	if err != nil {
		return nil
	}
	return s.Reverify(verify)
}
