// Package events is the artifact model of protocol 0.1: the seven artifact
// types (CLAIM, EVIDENCE, OBJECTION, REVISION, DECISION, FAILURE,
// TERMINATION), their payload rules, references and relations, the version
// rule, extension namespacing and decision dispositions.
//
// Validate takes the bytes of a published artifact and returns a typed
// *Artifact or a classified error: a *canon.Error for the canonical profile
// and the identifier (the five upstream classes), an *Error for the rest
// (class unsupported_version for versions, invalid_artifact for semantics),
// each with a stable dotted code (Codes lists them) and, for *Error, the
// JSON pointer of the offending member. Seal turns a Draft into a sealed
// artifact whose Canonical bytes are ready to publish; it never returns
// what Validate would reject.
//
// What Validate cannot know, because it needs the referenced artifacts, is
// relation applicability: CheckRelation applies it once a target is known,
// and the projector calls it.
//
// Rules where the draft is silent (docs/ERRORS.md): strings that must be
// non-empty need a non-space character; EVIDENCE needs a supports
// reference; dispositions are {objection, disposition, rationale, by?} with
// sustained, overruled, addressed and withdrawn public and deferred not;
// payload members beyond the required ones are kept (in Canonical) and
// ignored; any top-level member beyond the six is rejected; extension names
// need a '.' inside; only "0.1" is accepted unless WithCompatibleVersion
// registers another minor.
//
// The package is pure: values in, values out, no IO, no clock.
package events
