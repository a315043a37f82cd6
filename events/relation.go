package events

// CheckRelation applies DESIGN §4's relation applicability to one reference
// of src whose target is now known. sameDeliberation reports whether the
// target belongs to src's deliberation. It returns nil or an *Error.
func CheckRelation(src *Artifact, rel Relation, target *Artifact, sameDeliberation bool) error {
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
		if tp := src.TerminationPayload(); ok && tp != nil && tp.State == Completed {
			if d := target.DecisionPayload(); d == nil || d.Status != Final {
				return fail(ErrRelationNeedsFinal, "/references", target.ID.String())
			}
		}
	}
	if !ok {
		return fail(ErrRelationInapplicable, "/references", string(rel)+" cannot target "+string(t))
	}
	return nil
}
