package events

import (
	"github.com/parley-engine/parley/canon"
)

// ProtocolVersion is the version of the artifact format parley speaks.
const ProtocolVersion = "0.1"

// Type is an artifact type.
type Type string

// The seven core artifact types.
const (
	TypeClaim       Type = "CLAIM"
	TypeEvidence    Type = "EVIDENCE"
	TypeObjection   Type = "OBJECTION"
	TypeRevision    Type = "REVISION"
	TypeDecision    Type = "DECISION"
	TypeFailure     Type = "FAILURE"
	TypeTermination Type = "TERMINATION"
)

// Types lists the seven core types.
var Types = []Type{TypeClaim, TypeEvidence, TypeObjection, TypeRevision, TypeDecision, TypeFailure, TypeTermination}

// Valid reports whether t is one of the seven core types.
func (t Type) Valid() bool {
	switch t {
	case TypeClaim, TypeEvidence, TypeObjection, TypeRevision, TypeDecision, TypeFailure, TypeTermination:
		return true
	}
	return false
}

// Relation is the optional relation of a reference.
type Relation string

// The core relation vocabulary. NoRelation is a reference without one.
const (
	NoRelation Relation = ""
	Supports   Relation = "supports"
	ObjectsTo  Relation = "objects-to"
	Revises    Relation = "revises"
	Supersedes Relation = "supersedes"
	Considers  Relation = "considers"
	Decides    Relation = "decides"
)

// Valid reports whether r is a core relation (or none).
func (r Relation) Valid() bool {
	switch r {
	case NoRelation, Supports, ObjectsTo, Revises, Supersedes, Considers, Decides:
		return true
	}
	return false
}

// Reference points at a prior artifact.
type Reference struct {
	Target   canon.Digest
	Relation Relation
}

// ProvenanceClass classifies EVIDENCE.
type ProvenanceClass string

// The provenance classes of version 0.1.
const (
	TraceVerifiedObservation ProvenanceClass = "TRACE_VERIFIED_OBSERVATION"
	ExternalEvidence         ProvenanceClass = "EXTERNAL_EVIDENCE"
	ModelGeneratedAnalysis   ProvenanceClass = "MODEL_GENERATED_ANALYSIS"
	Hypothesis               ProvenanceClass = "HYPOTHESIS"
)

// Valid reports whether p is a provenance class of version 0.1.
func (p ProvenanceClass) Valid() bool {
	switch p {
	case TraceVerifiedObservation, ExternalEvidence, ModelGeneratedAnalysis, Hypothesis:
		return true
	}
	return false
}

// DecisionStatus is provisional or final.
type DecisionStatus string

// Decision statuses.
const (
	Provisional DecisionStatus = "provisional"
	Final       DecisionStatus = "final"
)

// DispositionKind is what a DECISION did with an objection.
type DispositionKind string

// Disposition kinds. All but Deferred are public dispositions.
const (
	Sustained DispositionKind = "sustained"
	Overruled DispositionKind = "overruled"
	Addressed DispositionKind = "addressed"
	Withdrawn DispositionKind = "withdrawn"
	Deferred  DispositionKind = "deferred"
)

// Public reports whether the disposition disposes of the objection publicly
// (docs/ERRORS.md, artifact semantics): every kind but deferred.
func (d DispositionKind) Public() bool {
	switch d {
	case Sustained, Overruled, Addressed, Withdrawn:
		return true
	}
	return false
}

func (d DispositionKind) valid() bool { return d.Public() || d == Deferred }

// TerminationState is the state a TERMINATION records.
type TerminationState string

// Termination states. Suspended is not terminal.
const (
	Completed TerminationState = "completed"
	Suspended TerminationState = "suspended"
	Cancelled TerminationState = "cancelled"
	Deadlock  TerminationState = "deadlock"
	Exhausted TerminationState = "exhausted"
)

// Terminal reports whether the state ends the deliberation.
func (s TerminationState) Terminal() bool {
	switch s {
	case Completed, Cancelled, Deadlock, Exhausted:
		return true
	}
	return false
}

func (s TerminationState) valid() bool { return s.Terminal() || s == Suspended }

// Payload is the typed payload of an artifact: one of *Claim, *Evidence,
// *Objection, *RevisionPayload, *Decision, *Failure, *Termination. Members
// beyond the required ones are kept in the artifact's canonical bytes and
// ignored here.
type Payload interface{ artifactType() Type }

// Claim introduces a proposition.
type Claim struct {
	Statement string `json:"statement"`
}

// Evidence supports other artifacts.
type Evidence struct {
	Content         string          `json:"content"`
	ProvenanceClass ProvenanceClass `json:"provenance_class"`
}

// Objection challenges an artifact or assumption.
type Objection struct {
	Statement string `json:"statement"`
	Blocking  bool   `json:"blocking"`
}

// RevisionPayload creates a new position without mutating history.
type RevisionPayload struct {
	Statement string `json:"statement"`
}

// Disposition is a DECISION's answer to one objection.
type Disposition struct {
	Objection   canon.Digest    `json:"objection"`
	Disposition DispositionKind `json:"disposition"`
	Rationale   string          `json:"rationale"`
	By          []canon.Digest  `json:"by,omitempty"`
}

// Issue is an unresolved issue a DECISION lists.
type Issue struct {
	Description string        `json:"description"`
	Objection   *canon.Digest `json:"objection,omitempty"`
}

// Decision records an outcome and its declared closure.
type Decision struct {
	Outcome               string         `json:"outcome"`
	Status                DecisionStatus `json:"status"`
	ObjectionDispositions []Disposition  `json:"objection_dispositions"`
	UnresolvedIssues      []Issue        `json:"unresolved_issues"`
}

// Failure records that processing could not complete.
type Failure struct {
	Code        string `json:"code"`
	Description string `json:"description"`
	Retryable   bool   `json:"retryable"`
}

// Termination records how a deliberation ended (or was suspended).
// UnresolvedObjections lists, for deadlock and exhausted, the blocking
// objections left unresolved; each is also referenced with considers.
type Termination struct {
	State                TerminationState `json:"state"`
	Reason               string           `json:"reason,omitempty"`
	UnresolvedObjections []canon.Digest   `json:"unresolved_objections,omitempty"`
}

func (*Claim) artifactType() Type           { return TypeClaim }
func (*Evidence) artifactType() Type        { return TypeEvidence }
func (*Objection) artifactType() Type       { return TypeObjection }
func (*RevisionPayload) artifactType() Type { return TypeRevision }
func (*Decision) artifactType() Type        { return TypeDecision }
func (*Failure) artifactType() Type         { return TypeFailure }
func (*Termination) artifactType() Type     { return TypeTermination }

// Artifact is a validated artifact.
type Artifact struct {
	ID         canon.Digest
	Version    string
	Type       Type
	Payload    Payload
	References []Reference
	// Extensions maps each extension name to its canonical JSON value.
	Extensions map[string][]byte
	// Canonical is the artifact's canonical form, artifact_id included:
	// the bytes published on the stream.
	Canonical []byte
}

// Blocking reports whether a is a blocking OBJECTION.
func (a *Artifact) Blocking() bool {
	o, ok := a.Payload.(*Objection)
	return ok && o.Blocking
}

// DecisionPayload returns the payload of a DECISION, or nil.
func (a *Artifact) DecisionPayload() *Decision {
	d, _ := a.Payload.(*Decision)
	return d
}

// TerminationPayload returns the payload of a TERMINATION, or nil.
func (a *Artifact) TerminationPayload() *Termination {
	t, _ := a.Payload.(*Termination)
	return t
}
