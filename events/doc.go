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
// PayloadRules states each type's payload rules as data (members, kinds,
// enumerations, the codes the validator reports, the references a type
// needs), and DraftSchema renders them as JSON Schema for tools that
// describe artifacts to agents (engine mcp's publish tools). The validator
// decides; TestPayloadRules holds the rules to it code by code, and the
// schemas to the semantic vectors. What no schema can say (an objection
// disposed of twice, a listed unresolved objection not also referenced)
// only the validator checks.
//
// The package is pure: values in, values out, no IO, no clock.
package events
