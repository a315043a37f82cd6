package events

import (
	"strings"
)

// The error classes of artifact validation, beside the five profile classes
// that canon reports.
const (
	ClassInvalidArtifact    = "invalid_artifact"
	ClassUnsupportedVersion = "unsupported_version"
)

// Error is a semantic rejection: a class, a stable dotted code, the JSON
// pointer of the offending member (empty for the whole artifact) and a
// message. Profile and identifier errors are *canon.Error instead; both
// implement ErrorClass and ErrorCode.
type Error struct {
	Class string
	Code  string
	Path  string
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("events: ")
	b.WriteString(e.Msg)
	b.WriteString(" (")
	b.WriteString(e.Code)
	if e.Path != "" {
		b.WriteString(" at ")
		b.WriteString(e.Path)
	}
	b.WriteString(")")
	return b.String()
}

// Is matches another *Error with the same Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// ErrorClass returns the class.
func (e *Error) ErrorClass() string { return e.Class }

// ErrorCode returns the stable code.
func (e *Error) ErrorCode() string { return e.Code }

// ErrorOffset returns -1: semantic errors are located by Path.
func (e *Error) ErrorOffset() int64 { return -1 }

func sentinel(class, code, msg string) *Error { return &Error{Class: class, Code: code, Msg: msg} }

// Sentinels, one per code; match with errors.Is.
var (
	// Versions.
	ErrVersionMissing          = sentinel(ClassUnsupportedVersion, "version.missing", "protocol_version is missing")
	ErrVersionNotString        = sentinel(ClassUnsupportedVersion, "version.not_string", "protocol_version is not a string")
	ErrVersionMalformed        = sentinel(ClassUnsupportedVersion, "version.malformed", "protocol_version is not of the form MAJOR.MINOR")
	ErrVersionUnsupportedMajor = sentinel(ClassUnsupportedVersion, "version.unsupported_major", "unsupported major version")
	ErrVersionUnsupportedMinor = sentinel(ClassUnsupportedVersion, "version.unsupported_minor", "unsupported minor version (no compatibility rule is registered)")

	// The envelope.
	ErrUnknownMember = sentinel(ClassInvalidArtifact, "artifact.unknown_member", "unknown top-level member (extension data belongs in extensions)")
	ErrMissingMember = sentinel(ClassInvalidArtifact, "artifact.missing_member", "required top-level member is missing")
	ErrWrongType     = sentinel(ClassInvalidArtifact, "artifact.wrong_type", "top-level member has the wrong JSON type")
	ErrUnknownType   = sentinel(ClassInvalidArtifact, "artifact.unknown_type", "unknown artifact_type")

	// Extensions.
	ErrExtensionNamespace = sentinel(ClassInvalidArtifact, "extension.not_namespaced", "extension name is not namespaced (it needs a '.' inside)")

	// References.
	ErrReferenceNotObject     = sentinel(ClassInvalidArtifact, "reference.not_object", "reference is not an object")
	ErrReferenceUnknownMember = sentinel(ClassInvalidArtifact, "reference.unknown_member", "reference has a member other than artifact_id and relation")
	ErrReferenceMissingID     = sentinel(ClassInvalidArtifact, "reference.missing_id", "reference has no artifact_id")
	ErrReferenceInvalidID     = sentinel(ClassInvalidArtifact, "reference.invalid_id", "reference artifact_id is not sha256:<64 lowercase hex>")
	ErrReferenceUnknownRel    = sentinel(ClassInvalidArtifact, "reference.unknown_relation", "relation is not one of supports, objects-to, revises, supersedes, considers, decides")
	ErrReferenceDuplicate     = sentinel(ClassInvalidArtifact, "reference.duplicate", "the same (target, relation) pair appears twice")

	// Payloads.
	ErrMissingStatement       = sentinel(ClassInvalidArtifact, "semantic.missing_statement", "payload.statement is missing")
	ErrInvalidStatement       = sentinel(ClassInvalidArtifact, "semantic.invalid_statement", "payload.statement must be a string with a non-space character")
	ErrMissingContent         = sentinel(ClassInvalidArtifact, "semantic.missing_content", "payload.content is missing")
	ErrInvalidContent         = sentinel(ClassInvalidArtifact, "semantic.invalid_content", "payload.content must be a string with a non-space character")
	ErrMissingProvenance      = sentinel(ClassInvalidArtifact, "semantic.missing_provenance_class", "payload.provenance_class is missing")
	ErrInvalidProvenance      = sentinel(ClassInvalidArtifact, "semantic.invalid_provenance_class", "payload.provenance_class is not a provenance class of version 0.1")
	ErrMissingSupports        = sentinel(ClassInvalidArtifact, "semantic.missing_supports", "EVIDENCE needs at least one supports reference")
	ErrMissingBlocking        = sentinel(ClassInvalidArtifact, "semantic.missing_blocking", "payload.blocking is missing")
	ErrInvalidBlocking        = sentinel(ClassInvalidArtifact, "semantic.invalid_blocking", "payload.blocking must be a Boolean")
	ErrMissingObjectsTo       = sentinel(ClassInvalidArtifact, "semantic.missing_objects_to", "OBJECTION needs at least one objects-to reference")
	ErrMissingRevises         = sentinel(ClassInvalidArtifact, "semantic.missing_revises", "REVISION needs at least one revises or supersedes reference")
	ErrMissingOutcome         = sentinel(ClassInvalidArtifact, "semantic.missing_outcome", "payload.outcome is missing")
	ErrInvalidOutcome         = sentinel(ClassInvalidArtifact, "semantic.invalid_outcome", "payload.outcome must be a string with a non-space character")
	ErrMissingStatus          = sentinel(ClassInvalidArtifact, "semantic.missing_status", "payload.status is missing")
	ErrInvalidStatus          = sentinel(ClassInvalidArtifact, "semantic.invalid_status", "payload.status must be provisional or final")
	ErrMissingDispositions    = sentinel(ClassInvalidArtifact, "semantic.missing_objection_dispositions", "payload.objection_dispositions is missing")
	ErrInvalidDispositions    = sentinel(ClassInvalidArtifact, "semantic.invalid_objection_dispositions", "payload.objection_dispositions must be an array")
	ErrInvalidDisposition     = sentinel(ClassInvalidArtifact, "semantic.invalid_disposition", "a disposition must be {objection: id, disposition: sustained|overruled|addressed|withdrawn|deferred, rationale: text, by?: [ids]}")
	ErrDuplicateDisposition   = sentinel(ClassInvalidArtifact, "semantic.duplicate_disposition", "the same objection is disposed of twice")
	ErrMissingUnresolved      = sentinel(ClassInvalidArtifact, "semantic.missing_unresolved_issues", "payload.unresolved_issues is missing")
	ErrInvalidUnresolved      = sentinel(ClassInvalidArtifact, "semantic.invalid_unresolved_issues", "payload.unresolved_issues must be an array")
	ErrInvalidUnresolvedIssue = sentinel(ClassInvalidArtifact, "semantic.invalid_unresolved_issue", "an unresolved issue must be {description: text, objection?: id}")
	ErrMissingCode            = sentinel(ClassInvalidArtifact, "semantic.missing_code", "payload.code is missing")
	ErrInvalidCode            = sentinel(ClassInvalidArtifact, "semantic.invalid_code", "payload.code must be a string with a non-space character")
	ErrMissingDescription     = sentinel(ClassInvalidArtifact, "semantic.missing_description", "payload.description is missing")
	ErrInvalidDescription     = sentinel(ClassInvalidArtifact, "semantic.invalid_description", "payload.description must be a string with a non-space character")
	ErrMissingRetryable       = sentinel(ClassInvalidArtifact, "semantic.missing_retryable", "payload.retryable is missing")
	ErrInvalidRetryable       = sentinel(ClassInvalidArtifact, "semantic.invalid_retryable", "payload.retryable must be a Boolean")
	ErrMissingState           = sentinel(ClassInvalidArtifact, "semantic.missing_state", "payload.state is missing")
	ErrInvalidState           = sentinel(ClassInvalidArtifact, "semantic.invalid_state", "payload.state must be completed, suspended, cancelled, deadlock or exhausted")
	ErrMissingDecides         = sentinel(ClassInvalidArtifact, "semantic.missing_decides", "a completed TERMINATION must reference its final DECISION with decides")
	ErrInvalidUnresolvedList  = sentinel(ClassInvalidArtifact, "semantic.invalid_unresolved_objections", "payload.unresolved_objections must be an array of artifact ids")
	ErrUnreferencedUnresolved = sentinel(ClassInvalidArtifact, "semantic.unreferenced_unresolved_objection", "every listed unresolved objection must also be referenced with considers")
	ErrUnresolvedOnlyTerminal = sentinel(ClassInvalidArtifact, "semantic.unexpected_unresolved_objections", "only a deadlock or exhausted TERMINATION lists unresolved objections")

	// Relation applicability, checked once the target is known.
	ErrRelationInapplicable = sentinel(ClassInvalidArtifact, "relation.inapplicable", "the relation does not apply to the target's type")
	ErrRelationCrossDelib   = sentinel(ClassInvalidArtifact, "relation.cross_deliberation", "revises and supersedes must target an artifact of the same deliberation")
	ErrRelationNeedsFinal   = sentinel(ClassInvalidArtifact, "relation.completed_needs_final_decision", "a completed TERMINATION must decide a final DECISION")
)

// Codes lists every sentinel in documentation order; docs/ERRORS.md is
// checked against it.
var Codes = []*Error{
	ErrVersionMissing, ErrVersionNotString, ErrVersionMalformed, ErrVersionUnsupportedMajor, ErrVersionUnsupportedMinor,
	ErrUnknownMember, ErrMissingMember, ErrWrongType, ErrUnknownType,
	ErrExtensionNamespace,
	ErrReferenceNotObject, ErrReferenceUnknownMember, ErrReferenceMissingID, ErrReferenceInvalidID, ErrReferenceUnknownRel, ErrReferenceDuplicate,
	ErrMissingStatement, ErrInvalidStatement, ErrMissingContent, ErrInvalidContent, ErrMissingProvenance, ErrInvalidProvenance,
	ErrMissingSupports, ErrMissingBlocking, ErrInvalidBlocking, ErrMissingObjectsTo, ErrMissingRevises,
	ErrMissingOutcome, ErrInvalidOutcome, ErrMissingStatus, ErrInvalidStatus,
	ErrMissingDispositions, ErrInvalidDispositions, ErrInvalidDisposition, ErrDuplicateDisposition,
	ErrMissingUnresolved, ErrInvalidUnresolved, ErrInvalidUnresolvedIssue,
	ErrMissingCode, ErrInvalidCode, ErrMissingDescription, ErrInvalidDescription, ErrMissingRetryable, ErrInvalidRetryable,
	ErrMissingState, ErrInvalidState, ErrMissingDecides, ErrInvalidUnresolvedList, ErrUnreferencedUnresolved, ErrUnresolvedOnlyTerminal,
	ErrRelationInapplicable, ErrRelationCrossDelib, ErrRelationNeedsFinal,
}

func fail(s *Error, path, detail string) *Error {
	msg := s.Msg
	if detail != "" {
		msg += ": " + detail
	}
	return &Error{Class: s.Class, Code: s.Code, Path: path, Msg: msg}
}
