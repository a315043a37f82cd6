package events

// Text returns what an artifact says, for people: the statement of a
// CLAIM, OBJECTION or REVISION, the content of EVIDENCE, the outcome of a
// DECISION, the code and description of a FAILURE, the state and reason
// of a TERMINATION. It is the participant's text as written: whoever
// shows it escapes it for where it goes.
func (a *Artifact) Text() string {
	switch p := a.Payload.(type) {
	case *Claim:
		return p.Statement
	case *Objection:
		return p.Statement
	case *RevisionPayload:
		return p.Statement
	case *Evidence:
		return p.Content
	case *Decision:
		return p.Outcome
	case *Failure:
		return p.Code + ": " + p.Description
	case *Termination:
		if p.Reason != "" {
			return string(p.State) + ": " + p.Reason
		}
		return string(p.State)
	}
	return ""
}
