package relay

import (
	"context"
	"encoding/json"
	"time"

	"github.com/parley-engine/parley/events"
)

// Turn is what a participant receives (exec adapters read it as JSON).
type Turn struct {
	Deliberation string `json:"deliberation"`
	Round        int    `json:"round"`
	Participant  string `json:"participant"`
	Role         string `json:"role"`
	Instructions string `json:"instructions,omitempty"`
	Question     string `json:"question"`
	// Final is true on the decider's turn, which must answer a DECISION.
	Final bool `json:"final"`
	// AllowedTypes are the artifact types this turn may answer with.
	AllowedTypes []events.Type `json:"allowed_types"`
	// Context holds the public artifacts the context policy shows, in
	// stream order.
	Context []ContextArtifact `json:"context"`
}

// ContextArtifact is one artifact of a turn's context.
type ContextArtifact struct {
	Position    uint64          `json:"position"`
	Participant string          `json:"participant"`
	Artifact    json.RawMessage `json:"artifact"` // canonical JSON, artifact_id included
}

// Draft is what a participant answers: an artifact without its id and
// version.
type Draft struct {
	ArtifactType events.Type        `json:"artifact_type"`
	Payload      json.RawMessage    `json:"payload"`
	References   []events.Reference `json:"-"`
	Extensions   map[string]any     `json:"extensions,omitempty"`
}

// Response is a participant's answer to a turn, with what the call cost.
type Response struct {
	// Output is the raw answer: the draft's JSON text.
	Output []byte
	// Model is the parley.model extension (provenance of the call), nil
	// for participants that are not models.
	Model map[string]any
	// Usage is the parley.usage extension, nil when nothing was counted.
	Usage map[string]int64
	// Truncated reports an answer cut off (finish_reason "length").
	Truncated bool
	Latency   time.Duration
}

// Participant takes turns.
type Participant interface {
	Take(ctx context.Context, t Turn) (Response, error)
}

// DraftSchema is the JSON Schema a model's answer must follow (strict
// structured output: every property required, no additional properties).
// Payload members are typed by artifact type in the prompt; the relay
// validates the sealed artifact with the full protocol rules before it
// publishes anything.
var DraftSchema = map[string]any{
	"type":                 "object",
	"additionalProperties": false,
	"required":             []string{"artifact_type", "payload", "references"},
	"properties": map[string]any{
		"artifact_type": map[string]any{"type": "string", "enum": []string{"CLAIM", "EVIDENCE", "OBJECTION", "REVISION", "DECISION"}},
		"payload": map[string]any{
			"type":                 "object",
			"additionalProperties": false,
			"required":             []string{"statement", "content", "provenance_class", "blocking", "outcome", "status", "objection_dispositions", "unresolved_issues"},
			"properties": map[string]any{
				"statement":        map[string]any{"type": "string"},
				"content":          map[string]any{"type": "string"},
				"provenance_class": map[string]any{"type": "string", "enum": []string{"", "TRACE_VERIFIED_OBSERVATION", "EXTERNAL_EVIDENCE", "MODEL_GENERATED_ANALYSIS", "HYPOTHESIS"}},
				"blocking":         map[string]any{"type": "boolean"},
				"outcome":          map[string]any{"type": "string"},
				"status":           map[string]any{"type": "string", "enum": []string{"", "provisional", "final"}},
				"objection_dispositions": map[string]any{"type": "array", "items": map[string]any{
					"type": "object", "additionalProperties": false, "required": []string{"objection", "disposition", "rationale"},
					"properties": map[string]any{
						"objection":   map[string]any{"type": "string"},
						"disposition": map[string]any{"type": "string", "enum": []string{"sustained", "overruled", "addressed", "withdrawn", "deferred"}},
						"rationale":   map[string]any{"type": "string"},
					}}},
				"unresolved_issues": map[string]any{"type": "array", "items": map[string]any{
					"type": "object", "additionalProperties": false, "required": []string{"description"},
					"properties": map[string]any{"description": map[string]any{"type": "string"}}}},
			},
		},
		"references": map[string]any{"type": "array", "items": map[string]any{
			"type": "object", "additionalProperties": false, "required": []string{"artifact_id", "relation"},
			"properties": map[string]any{
				"artifact_id": map[string]any{"type": "string"},
				"relation":    map[string]any{"type": "string", "enum": []string{"supports", "objects-to", "revises", "supersedes", "considers", "decides"}},
			}}},
	},
}

// SystemPrompt is what a model is told before each turn.
const SystemPrompt = `You take part in an auditable deliberation. You answer each turn with exactly one public artifact, as a JSON object:
{"artifact_type": TYPE, "payload": {...}, "references": [{"artifact_id": "sha256:...", "relation": REL}]}
TYPE is one of the turn's allowed_types. Fill the payload members your type needs and leave the others empty ("", false, []):
- CLAIM: statement (a proposition).
- EVIDENCE: content, provenance_class (TRACE_VERIFIED_OBSERVATION, EXTERNAL_EVIDENCE, MODEL_GENERATED_ANALYSIS or HYPOTHESIS); at least one "supports" reference. Your own calculations are MODEL_GENERATED_ANALYSIS, never an observation.
- OBJECTION: statement, blocking (true if a decision must not be final until it is answered); at least one "objects-to" reference.
- REVISION: statement; at least one "revises" or "supersedes" reference.
- DECISION: outcome, status ("final" or "provisional"), objection_dispositions (each blocking objection: objection id, disposition sustained|overruled|addressed|withdrawn|deferred, rationale), unresolved_issues.
Reference only artifact ids that appear in the turn's context. A final decision must dispose publicly of every blocking objection against what it decides. Do not reveal private reasoning; publish only what others may audit.`
