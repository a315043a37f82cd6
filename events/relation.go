package events

import "github.com/parley-engine/parley/canon"

// Target is what relation applicability reads of a reference's target.
type Target struct {
	ID            canon.Digest
	Type          Type
	FinalDecision bool // a DECISION with status final
}

// TargetOf returns the Target view of an artifact.
func TargetOf(a *Artifact) Target {
	t := Target{ID: a.ID, Type: a.Type}
	if d := a.DecisionPayload(); d != nil && d.Status == Final {
		t.FinalDecision = true
	}
	return t
}

// CheckRelation applies the relation applicability rules (docs/ERRORS.md) to one reference
// of src whose target is now known. sameDeliberation reports whether the
// target belongs to src's deliberation. It returns nil or an *Error.
func CheckRelation(src *Artifact, rel Relation, target Target, sameDeliberation bool) error {
	t := target.Type
	ok := true
	switch rel {
	case Supports:
		ok = t == TypeClaim || t == TypeRevision || t == TypeObjection || t == TypeEvidence || t == TypeDecision
	case ObjectsTo:
		ok = t != TypeTermination
	case Revises, Supersedes:
		ok = t == TypeClaim || t == TypeRevision || t == TypeEvidence || t == TypeObjection || t == TypeDecision
		if ok && !sameDeliberation {
			return fail(ErrRelationCrossDelib, "/references", string(rel)+" "+target.ID.String())
		}
	case Decides:
		ok = t == TypeDecision || t == TypeClaim || t == TypeRevision
		if tp := src.TerminationPayload(); ok && tp != nil && tp.State == Completed && !target.FinalDecision {
			return fail(ErrRelationNeedsFinal, "/references", target.ID.String())
		}
	}
	if !ok {
		return fail(ErrRelationInapplicable, "/references", string(rel)+" cannot target "+string(t))
	}
	return nil
}
