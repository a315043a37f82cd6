package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/wire"
)

// CodeNotResolved: the user was asked to resolve a binding moment and
// declined to answer, or dismissed the form: nothing was published.
const CodeNotResolved = "mcp.not_resolved"

// elicitID is the id of the input request resolve_binding makes.
const elicitID = "binding"

type resolveIn struct {
	Deliberation string `json:"deliberation"`
	Decision     string `json:"decision" jsonschema:"the provisional DECISION that carries the binding moment (request_binding's decision)"`
	Resolution   string `json:"resolution,omitempty" jsonschema:"option, answer or question; leave it out to ask the user (elicitation) or, when the client cannot ask, to show the moment"`
	OptionIdx    int    `json:"option_idx,omitempty" jsonschema:"with option: the chosen option's index (0-based)"`
	Answer       string `json:"answer,omitempty" jsonschema:"with answer: the principal's own answer"`
}

// MomentOption is one option of a binding moment as resolve_binding shows
// it.
type MomentOption struct {
	Index       int    `json:"index"`
	Label       string `json:"label"`
	Reasoning   string `json:"reasoning"`
	Recommended bool   `json:"recommended,omitempty"`
}

type resolveOut struct {
	Decision       string         `json:"decision,omitempty"`
	EnvelopeDigest string         `json:"envelope_digest,omitempty"`
	Principal      string         `json:"principal,omitempty"`
	Stem           string         `json:"stem,omitempty" jsonschema:"the question put to the principal"`
	Options        []MomentOption `json:"options,omitempty"`
	Hatches        []string       `json:"hatches,omitempty" jsonschema:"the other resolutions the envelope allows beside an option: answer, question"`
	BindingMoment  map[string]any `json:"binding_moment,omitempty" jsonschema:"the whole envelope"`
	Resolution     string         `json:"resolution,omitempty" jsonschema:"the resolution published, when one was"`
	ArtifactID     string         `json:"artifact_id,omitempty" jsonschema:"the principal's artifact that resolves it"`
	Verdict
}

// moment is a binding moment read from the engine.
type moment struct {
	decision  *events.Artifact
	env       *binding.Envelope
	principal string
}

func (t *tools) readMoment(ctx context.Context, c *client.Client, delib, decision string) (*moment, error) {
	if !wire.ValidDeliberation(delib) {
		return nil, refuse(CodeInvalidArgument, "deliberation %q is not a deliberation id (a UUID in lowercase)", delib)
	}
	if _, ok := canon.ParseDigest(decision); !ok {
		return nil, refuse(CodeInvalidArgument, "decision %q is not an artifact id", decision)
	}
	v, err := c.State(ctx, delib)
	if err != nil {
		return nil, err
	}
	m := &moment{principal: wire.PrincipalToken}
	if v.Charter != nil && v.Charter.Principal != "" {
		m.principal = v.Charter.Principal
	}
	raw, found, err := c.Artifact(ctx, delib, decision)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, refuse(binding.CodeUnknownEnvelope, "deliberation %s has no artifact %s", delib, decision)
	}
	if m.decision, err = events.Validate(raw); err != nil {
		return nil, err
	}
	if m.env, err = binding.EnvelopeOf(m.decision); err != nil {
		return nil, refuse(binding.CodeUnknownEnvelope, "%s carries no well-formed binding moment: %v", decision, err)
	}
	return m, nil
}

// show fills what out says of the moment.
func (m *moment) show(out *resolveOut) {
	q := m.env.Question
	out.Decision, out.EnvelopeDigest, out.Principal, out.Stem = m.decision.ID.String(), m.env.Digest.String(), m.principal, q.Stem
	out.Options = nil
	for i, o := range q.Options {
		out.Options = append(out.Options, MomentOption{Index: i, Label: o.Label, Reasoning: o.Reasoning, Recommended: i == q.RecommendedIdx})
	}
	out.Hatches = nil
	if q.Hatches.FreeText {
		out.Hatches = append(out.Hatches, string(binding.KindAnswer))
	}
	if q.Hatches.Dialogue {
		out.Hatches = append(out.Hatches, string(binding.KindQuestion))
	}
	json.Unmarshal(m.env.Canonical, &out.BindingMoment)
}

// Choices offered in the elicitation form beside the options.
const (
	choiceAnswer   = "Answer in my own words"
	choiceQuestion = "Reject the question as put"
)

// form is the elicitation of the moment: a message with the briefing,
// and a form whose choice is one of the options (or a hatch).
func (m *moment) form() *mcp.ElicitParams {
	q := m.env.Question
	var b strings.Builder
	fmt.Fprintf(&b, "Binding moment for %s. %s\n", m.principal, m.env.Synopsis)
	for _, f := range m.env.Findings {
		fmt.Fprintf(&b, "- %s\n", f)
	}
	for _, r := range m.env.Recommendations {
		fmt.Fprintf(&b, "Recommendation: %s\n", r)
	}
	fmt.Fprintf(&b, "\n%s\n", q.Stem)
	var choices []string
	for i, o := range q.Options {
		rec := ""
		if i == q.RecommendedIdx {
			rec = " (recommended)"
		}
		fmt.Fprintf(&b, "%d. %s%s: %s\n", i+1, o.Label, rec, o.Reasoning)
		choices = append(choices, o.Label)
	}
	props := map[string]any{}
	if q.Hatches.FreeText {
		choices = append(choices, choiceAnswer)
		props["answer"] = map[string]any{"type": "string", "title": "Your answer", "description": "when you answer in your own words"}
	}
	if q.Hatches.Dialogue {
		choices = append(choices, choiceQuestion)
	}
	props["choice"] = map[string]any{"type": "string", "title": q.Stem, "enum": choices, "default": q.Options[q.RecommendedIdx].Label}
	return &mcp.ElicitParams{Mode: "form", Message: strings.TrimSpace(b.String()),
		RequestedSchema: map[string]any{"type": "object", "properties": props, "required": []string{"choice"}}}
}

// fromForm reads the user's answer to the form as a resolution.
func (m *moment) fromForm(r *mcp.ElicitResult) (resolveIn, error) {
	var in resolveIn
	if r.Action != "accept" {
		return in, refuse(CodeNotResolved, "the user did not resolve the binding moment (%s): nothing was published; it stays open", r.Action)
	}
	choice, _ := r.Content["choice"].(string)
	switch choice {
	case choiceAnswer:
		in.Resolution = string(binding.KindAnswer)
		in.Answer, _ = r.Content["answer"].(string)
		return in, nil
	case choiceQuestion:
		in.Resolution = string(binding.KindQuestion)
		return in, nil
	}
	for i, o := range m.env.Question.Options {
		if o.Label == choice {
			in.Resolution, in.OptionIdx = string(binding.KindOption), i
			return in, nil
		}
	}
	return in, refuse(CodeNotResolved, "the user's choice %q is none of the moment's: nothing was published", choice)
}

func canElicit(req *mcp.CallToolRequest) bool {
	if req == nil || req.Session == nil {
		return false
	}
	p := req.Session.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil
}

func (t *tools) resolve(ctx context.Context, req *mcp.CallToolRequest, in resolveIn) (resolveOut, Verdict, mcp.InputRequestMap) {
	out, ask, err := t.resolveBinding(ctx, req, in)
	if err != nil {
		out.Verdict = verdictOf(err)
	}
	return out, out.Verdict, ask
}

func (t *tools) resolveBinding(ctx context.Context, req *mcp.CallToolRequest, in resolveIn) (resolveOut, mcp.InputRequestMap, error) {
	var out resolveOut
	c, err := t.client()
	if err != nil {
		return out, nil, err
	}
	m, err := t.readMoment(ctx, c, in.Deliberation, in.Decision)
	if err != nil {
		return out, nil, err
	}
	m.show(&out)
	if in.Resolution == "" {
		if t.participant != m.principal || !canElicit(req) {
			// Show the moment: the agent can relay it, and resolve it when
			// this server speaks as the principal.
			out.Verdict = Verdict{Outcome: OutcomeOK}
			return out, nil, nil
		}
		if r, ok := req.Params.InputResponses[elicitID].(*mcp.ElicitResult); ok {
			f, err := m.fromForm(r)
			if err != nil {
				return out, nil, err
			}
			in.Resolution, in.OptionIdx, in.Answer = f.Resolution, f.OptionIdx, f.Answer
		} else {
			return out, mcp.InputRequestMap{elicitID: m.form()}, nil
		}
	}
	if t.participant != m.principal {
		return out, nil, refuse(CodeNotPrincipal, "only the deliberation's principal, %q, resolves its binding moments, and this server speaks as %q: nothing was published (the principal resolves it at the engine's /bind page, with engine bind, or through an MCP server started as the principal)", m.principal, t.participant)
	}
	res := &binding.Resolution{EnvelopeDigest: m.env.Digest, Kind: binding.Kind(in.Resolution)}
	switch res.Kind {
	case binding.KindOption:
		res.OptionIdx = in.OptionIdx
		if in.OptionIdx < 0 || in.OptionIdx >= len(m.env.Question.Options) {
			return out, nil, refuse(binding.CodeOptionRange, "option_idx %d is out of range for %d options", in.OptionIdx, len(m.env.Question.Options))
		}
	case binding.KindAnswer:
		if !m.env.Question.Hatches.FreeText {
			return out, nil, refuse(binding.CodeResolutionShape, "the envelope does not offer an answer in the principal's own words (free_text)")
		}
		if strings.TrimSpace(in.Answer) == "" {
			return out, nil, refuse(binding.CodeResolutionShape, "an answer resolution needs a non-blank answer")
		}
		res.Answer = in.Answer
	case binding.KindQuestion:
		if !m.env.Question.Hatches.Dialogue {
			return out, nil, refuse(binding.CodeResolutionShape, "the envelope does not offer to reject the question (dialogue)")
		}
	case binding.KindDeclined:
		return out, nil, refuse(binding.CodeResolutionShape, "a decline ends the deliberation, with a cancel published with it at once: decline at the engine's /bind page or with engine bind")
	default:
		return out, nil, refuse(binding.CodeResolutionKind, "resolution %q is not option, answer or question", in.Resolution)
	}
	if v := binding.Verify(m.env, res, nil); !v.OK {
		return out, nil, refuse(v.Findings[0].Code, "%s", v.Findings[0].Message)
	}
	a, err := binding.Record(m.decision, m.env, res)
	if err != nil {
		return out, nil, err
	}
	pub, err := t.publishArtifact(ctx, in.Deliberation, "", a)
	if err != nil {
		return out, nil, err
	}
	out.Verdict = pub.Verdict
	if pub.Published {
		out.Resolution, out.ArtifactID = string(res.Kind), a.ID.String()
	}
	return out, nil, nil
}
