package events

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// FieldKind is the kind of value a payload member holds.
type FieldKind string

// Field kinds.
const (
	// KindText: a string with a non-space character.
	KindText FieldKind = "text"
	// KindBoolean: true or false.
	KindBoolean FieldKind = "boolean"
	// KindEnum: one of Field.Enum.
	KindEnum FieldKind = "enum"
	// KindDispositions: a DECISION's objection_dispositions.
	KindDispositions FieldKind = "dispositions"
	// KindIssues: a DECISION's unresolved_issues.
	KindIssues FieldKind = "issues"
	// KindIDs: an array of artifact ids.
	KindIDs FieldKind = "ids"
	// KindString: any string.
	KindString FieldKind = "string"
)

// Field is the rule of one payload member: what it holds, whether it is
// required, and the codes the validator reports when it is missing and
// when it breaks the rule.
type Field struct {
	Name     string
	Kind     FieldKind
	Required bool
	Enum     []string // KindEnum
	Missing  *Error   // nil when optional
	Invalid  *Error
	Doc      string
}

// PayloadRule is the rule of one artifact type's payload and of the
// references it needs. The validator (Validate) enforces it, and
// DraftSchema renders it as JSON Schema; TestPayloadRules holds the two
// together, code by code.
type PayloadRule struct {
	Type   Type
	Doc    string
	Fields []Field
	// NeedsRelation: at least one reference with one of these relations
	// (MissingRelation otherwise).
	NeedsRelation   []Relation
	MissingRelation *Error
}

// The enumerations the validator checks against, in documentation order.
var (
	ProvenanceClasses = []ProvenanceClass{TraceVerifiedObservation, ExternalEvidence, ModelGeneratedAnalysis, Hypothesis}
	DispositionKinds  = []DispositionKind{Sustained, Overruled, Addressed, Withdrawn, Deferred}
	TerminationStates = []TerminationState{Completed, Suspended, Cancelled, Deadlock, Exhausted}
	Relations         = []Relation{Supports, ObjectsTo, Revises, Supersedes, Considers, Decides}
)

func strs[T ~string](v []T) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = string(x)
	}
	return out
}

// PayloadRules returns the payload rule of each of the seven types, in
// the order of Types.
func PayloadRules() []PayloadRule {
	text := func(name string, missing, invalid *Error, doc string) Field {
		return Field{Name: name, Kind: KindText, Required: true, Missing: missing, Invalid: invalid, Doc: doc}
	}
	boolean := func(name string, missing, invalid *Error, doc string) Field {
		return Field{Name: name, Kind: KindBoolean, Required: true, Missing: missing, Invalid: invalid, Doc: doc}
	}
	return []PayloadRule{
		{Type: TypeClaim, Doc: "a proposition",
			Fields: []Field{text("statement", ErrMissingStatement, ErrInvalidStatement, "the proposition")}},
		{Type: TypeEvidence, Doc: "support for other artifacts (at least one supports reference)",
			Fields: []Field{text("content", ErrMissingContent, ErrInvalidContent, "the evidence"),
				{Name: "provenance_class", Kind: KindEnum, Required: true, Enum: strs(ProvenanceClasses), Missing: ErrMissingProvenance, Invalid: ErrInvalidProvenance, Doc: "where the evidence comes from"}},
			NeedsRelation: []Relation{Supports}, MissingRelation: ErrMissingSupports},
		{Type: TypeObjection, Doc: "a challenge to an artifact (at least one objects-to reference); a blocking one must be disposed of before a final decision",
			Fields: []Field{text("statement", ErrMissingStatement, ErrInvalidStatement, "the objection"),
				boolean("blocking", ErrMissingBlocking, ErrInvalidBlocking, "whether a final decision must dispose of it")},
			NeedsRelation: []Relation{ObjectsTo}, MissingRelation: ErrMissingObjectsTo},
		{Type: TypeRevision, Doc: "a new position (at least one revises or supersedes reference)",
			Fields:        []Field{text("statement", ErrMissingStatement, ErrInvalidStatement, "the revised proposition")},
			NeedsRelation: []Relation{Revises, Supersedes}, MissingRelation: ErrMissingRevises},
		{Type: TypeDecision, Doc: "an outcome and its declared closure: a final one must dispose publicly of every blocking objection against what it decides",
			Fields: []Field{text("outcome", ErrMissingOutcome, ErrInvalidOutcome, "the outcome, in a sentence"),
				{Name: "status", Kind: KindEnum, Required: true, Enum: []string{string(Provisional), string(Final)}, Missing: ErrMissingStatus, Invalid: ErrInvalidStatus, Doc: "provisional or final"},
				{Name: "objection_dispositions", Kind: KindDispositions, Required: true, Missing: ErrMissingDispositions, Invalid: ErrInvalidDispositions, Doc: "what the decision did with each objection, each objection once"},
				{Name: "unresolved_issues", Kind: KindIssues, Required: true, Missing: ErrMissingUnresolved, Invalid: ErrInvalidUnresolved, Doc: "issues left open"}}},
		{Type: TypeFailure, Doc: "processing that could not complete",
			Fields: []Field{text("code", ErrMissingCode, ErrInvalidCode, "a dotted code"),
				text("description", ErrMissingDescription, ErrInvalidDescription, "what failed"),
				boolean("retryable", ErrMissingRetryable, ErrInvalidRetryable, "whether trying again may succeed")}},
		{Type: TypeTermination, Doc: "how a deliberation ended (only the supervisor and the charter's terminators may publish one)",
			Fields: []Field{{Name: "state", Kind: KindEnum, Required: true, Enum: strs(TerminationStates), Missing: ErrMissingState, Invalid: ErrInvalidState, Doc: "the state it records"},
				{Name: "reason", Kind: KindString, Doc: "why"},
				{Name: "unresolved_objections", Kind: KindIDs, Invalid: ErrInvalidUnresolvedList, Doc: "deadlock or exhausted: every unresolved blocking objection, each also referenced with considers"}}},
	}
}

// PayloadRuleOf returns the rule of type t.
func PayloadRuleOf(t Type) (PayloadRule, bool) {
	for _, r := range PayloadRules() {
		if r.Type == t {
			return r, true
		}
	}
	return PayloadRule{}, false
}

// IDPattern is the JSON Schema pattern of an artifact id.
const IDPattern = "^sha256:[0-9a-f]{64}$"

// ExtensionNamePattern is the JSON Schema pattern of an extension name:
// a '.' after the first character and before the last.
const ExtensionNamePattern = `^[^.]+\.[\s\S]`

var textPattern = func() string {
	// A character that is not a space as the validator reads spaces
	// (unicode.IsSpace), so that a blank string fails the pattern.
	var b strings.Builder
	b.WriteString("[^")
	for r := rune(0); r <= 0x3000; r++ {
		if unicode.IsSpace(r) {
			if r < 0x80 {
				b.WriteString(`\x` + strconv.FormatInt(int64(r)+0x100, 16)[1:])
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteString("]")
	return b.String()
}()

// TextPattern is the JSON Schema pattern of a string the validator
// holds non-blank: one character that is not a space (unicode.IsSpace).
func TextPattern() string { return textPattern }

var _ = regexp.MustCompile(textPattern) // the pattern compiles

func idSchema() map[string]any {
	return map[string]any{"type": "string", "pattern": IDPattern, "description": "an artifact id: sha256: and 64 lowercase hex digits"}
}

func fieldSchema(f Field) map[string]any {
	var s map[string]any
	switch f.Kind {
	case KindText:
		s = map[string]any{"type": "string", "pattern": textPattern}
	case KindBoolean:
		s = map[string]any{"type": "boolean"}
	case KindEnum:
		s = map[string]any{"type": "string", "enum": f.Enum}
	case KindIDs:
		s = map[string]any{"type": "array", "items": idSchema()}
	case KindDispositions:
		s = map[string]any{"type": "array", "items": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"objection":   idSchema(),
				"disposition": map[string]any{"type": "string", "enum": strs(DispositionKinds), "description": "deferred is not a public disposition"},
				"rationale":   map[string]any{"type": "string", "pattern": textPattern},
				"by":          map[string]any{"type": "array", "items": idSchema(), "description": "the artifacts that dispose of it"},
			},
			"required": []string{"objection", "disposition", "rationale"},
		}}
	case KindIssues:
		s = map[string]any{"type": "array", "items": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"description": map[string]any{"type": "string", "pattern": textPattern},
				"objection":   idSchema(),
			},
			"required": []string{"description"},
		}}
	default:
		s = map[string]any{"type": "string"}
	}
	if f.Doc != "" {
		s["description"] = f.Doc
	}
	return s
}

// PayloadSchema returns the JSON Schema (draft 2020-12) of the payload of
// type t: its members as the validator reads them. Members beyond them
// are admitted (kept and ignored).
func PayloadSchema(t Type) map[string]any {
	r, ok := PayloadRuleOf(t)
	if !ok {
		return nil
	}
	props := map[string]any{}
	required := []string{}
	for _, f := range r.Fields {
		props[f.Name] = fieldSchema(f)
		if f.Required {
			required = append(required, f.Name)
		}
	}
	s := map[string]any{"type": "object", "description": r.Doc, "properties": props, "required": required}
	if t == TypeTermination {
		// Only a deadlock or exhausted TERMINATION lists unresolved
		// objections.
		s["if"] = map[string]any{"required": []string{"unresolved_objections"}}
		s["then"] = map[string]any{"properties": map[string]any{"state": map[string]any{"enum": []string{string(Deadlock), string(Exhausted)}}}}
	}
	return s
}

// ReferencesSchema returns the JSON Schema of the references of an
// artifact of type t: each {artifact_id, relation?}, no pair twice, with
// the relations its type needs.
func ReferencesSchema(t Type) map[string]any {
	s := map[string]any{
		"type":        "array",
		"uniqueItems": true,
		"description": "the artifacts it refers to, each (artifact_id, relation) pair once",
		"items": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"artifact_id": idSchema(),
				"relation":    map[string]any{"type": "string", "enum": strs(Relations)},
			},
			"required":             []string{"artifact_id"},
			"additionalProperties": false,
		},
	}
	if r, ok := PayloadRuleOf(t); ok && len(r.NeedsRelation) > 0 {
		s["contains"] = map[string]any{"type": "object", "properties": map[string]any{"relation": map[string]any{"enum": strs(r.NeedsRelation)}}, "required": []string{"relation"}}
		s["description"] = s["description"].(string) + "; at least one with relation " + strings.Join(strs(r.NeedsRelation), " or ")
	}
	return s
}

// ExtensionsSchema returns the JSON Schema of an artifact's extensions:
// an object whose member names are namespaced.
func ExtensionsSchema() map[string]any {
	return map[string]any{"type": "object", "propertyNames": map[string]any{"pattern": ExtensionNamePattern},
		"description": "extension data, each name namespaced (with a '.' inside)"}
}

// DraftSchema returns the JSON Schema of a draft of type t: payload,
// references and extensions, as Seal takes them.
func DraftSchema(t Type) map[string]any {
	s := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"payload":    PayloadSchema(t),
			"references": ReferencesSchema(t),
			"extensions": ExtensionsSchema(),
		},
		"required": []string{"payload", "references"},
	}
	if t == TypeTermination {
		// A completed TERMINATION decides its final DECISION.
		s["if"] = map[string]any{"properties": map[string]any{"payload": map[string]any{"properties": map[string]any{"state": map[string]any{"const": string(Completed)}}, "required": []string{"state"}}}, "required": []string{"payload"}}
		s["then"] = map[string]any{"properties": map[string]any{"references": map[string]any{"contains": map[string]any{"type": "object", "properties": map[string]any{"relation": map[string]any{"const": string(Decides)}}, "required": []string{"relation"}}}}}
	}
	return s
}
