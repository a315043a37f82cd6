package mcpserver

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
)

// refIn is a reference as a typed publish tool takes it.
type refIn struct {
	ArtifactID string `json:"artifact_id"`
	Relation   string `json:"relation,omitempty"`
}

// draftIn is the input of a typed publish tool: the draft's members, whose
// schema is the type's (events.DraftSchema).
type draftIn struct {
	Deliberation string         `json:"deliberation"`
	Participant  string         `json:"participant,omitempty"`
	Payload      map[string]any `json:"payload"`
	References   []refIn        `json:"references"`
	Extensions   map[string]any `json:"extensions,omitempty"`
}

// PublishToolName is the name of the tool that publishes an artifact of
// type t: publish_claim, publish_evidence, …
func PublishToolName(t events.Type) string { return "publish_" + strings.ToLower(string(t)) }

// DraftInputSchema is the input schema of t's publish tool: the
// deliberation, and the draft's payload, references and extensions with
// the schema the validator's payload rules render (events.DraftSchema).
// References may be left out (none).
func DraftInputSchema(t events.Type) map[string]any {
	s := events.DraftSchema(t)
	props := s["properties"].(map[string]any)
	props["deliberation"] = map[string]any{"type": "string", "description": "the deliberation's id (a UUID)"}
	props["participant"] = map[string]any{"type": "string", "description": "optional: the participant this server speaks as (any other is refused)"}
	s["required"] = []string{"deliberation", "payload"}
	if r, ok := events.PayloadRuleOf(t); ok && len(r.NeedsRelation) > 0 {
		s["required"] = []string{"deliberation", "payload", "references"}
	}
	return s
}

func addTypedPublish(s *mcp.Server, t *tools, r events.PayloadRule) {
	desc := fmt.Sprintf("Publish a %s: %s. The payload and references follow the engine's rules for %s (the input schema); the engine's verdict comes back with the artifact's id, position and ordinal, and when it is refused, the code and message.", r.Type, r.Doc, r.Type)
	addTool(s, &mcp.Tool{Name: PublishToolName(r.Type), Description: desc, InputSchema: DraftInputSchema(r.Type)},
		func(ctx context.Context, _ *mcp.CallToolRequest, in draftIn) (publishOut, Verdict) {
			a, err := sealTyped(r.Type, in)
			if err != nil {
				v := verdictOf(err)
				return publishOut{Verdict: v}, v
			}
			out, err := t.publishArtifact(ctx, in.Deliberation, in.Participant, a)
			if err != nil {
				out.Verdict = verdictOf(err)
			}
			return out, out.Verdict
		})
}

// sealTyped seals the draft of a typed publish tool.
func sealTyped(typ events.Type, in draftIn) (*events.Artifact, error) {
	if in.Payload == nil {
		return nil, &Refusal{Class: events.ClassInvalidArtifact, Code: events.ErrMissingMember.Code, Message: "payload is missing"}
	}
	d := events.Draft{Type: typ, Payload: in.Payload, Extensions: in.Extensions}
	for i, r := range in.References {
		id, ok := canon.ParseDigest(r.ArtifactID)
		if !ok {
			return nil, &Refusal{Class: events.ClassInvalidArtifact, Code: events.ErrReferenceInvalidID.Code,
				Message: fmt.Sprintf("references[%d]: %q is not sha256:<64 lowercase hex>", i, r.ArtifactID)}
		}
		rel := events.Relation(r.Relation)
		if !slices.Contains(events.Relations, rel) && rel != events.NoRelation {
			return nil, &Refusal{Class: events.ClassInvalidArtifact, Code: events.ErrReferenceUnknownRel.Code,
				Message: fmt.Sprintf("references[%d]: relation %q is not one of %s", i, r.Relation, strings.Join(relationNames(), ", "))}
		}
		d.References = append(d.References, events.Reference{Target: id, Relation: rel})
	}
	return events.Seal(d)
}

func relationNames() []string {
	var out []string
	for _, r := range events.Relations {
		out = append(out, string(r))
	}
	return out
}
