// Package mcpserver is parley's Model Context Protocol server (engine mcp):
// the tools an agent needs to take part in a deliberation, on the official
// Go SDK, over stdio or streamable HTTP. It speaks to a running engine over
// NATS, as any participant does, and as one participant only
// (Options.Participant), signing every artifact when it has a key.
//
// Invariants:
//   - every tool result carries a Verdict in its structured content: the
//     engine's outcome for what the call published, or ok, refused,
//     error, with the code and message of whatever did not take effect;
//     a call that did not take effect is an error result;
//   - the input schema of publish_<type> is events.DraftSchema, rendered
//     from the validator's payload rules (events.PayloadRules), and the
//     validator, not the schema, decides: a draft the schema lets through
//     and the validator refuses comes back refused with the validator's
//     code;
//   - nothing is published under another participant's token: a call
//     naming one is refused (CodeParticipantMismatch), and a binding
//     moment is resolved only by the principal's server.
//
// wait_artifacts waits for the next artifacts after an ordinal on an
// ordered push consumer of the deliberation's subjects (ledger.Reader),
// and each deliberation is the resource parley://deliberations/<id>, whose
// subscribers are notified as the engine projects its messages.
//
// The tool request_binding emits a binding moment (seed 002 §8): it
// advertises emits_binding_moment in its _meta, and its result carries the
// envelope in a binding_moment member. resolve_binding resolves one,
// asking the user through elicitation where the client can.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/wire"
)

// EmitsBindingMoment is the tool-manifest annotation of seed 002 §8.2,
// carried in the tool's _meta.
const EmitsBindingMoment = "emits_binding_moment"

// Options configure the server.
type Options struct {
	// Version is the server's version, as it introduces itself.
	Version string
	// MaxWait is the longest wait_artifacts waits (DefaultMaxWait when 0).
	MaxWait time.Duration
	// Participant is the token the server speaks as: every artifact and
	// open it publishes is this participant's, and a call naming another
	// is refused (CodeParticipantMismatch). DefaultParticipant when "".
	Participant string
	// SigningKey, when set, signs every artifact the server publishes
	// (an nkeys user key with its seed: client.Options.SigningKey).
	SigningKey nkeys.KeyPair
}

// DefaultParticipant is the token a server started without one speaks as.
const DefaultParticipant = "mcp"

// New returns the MCP server over a connection to the engine's NATS.
// It speaks as DefaultParticipant.
func New(nc *nats.Conn, version string) *mcp.Server {
	s, err := NewWithOptions(nc, Options{Version: version})
	if err != nil {
		panic(err) // DefaultParticipant is a token, and there is no key
	}
	return s
}

// NewWithOptions returns the MCP server over a connection to the engine's
// NATS, configured by o.
func NewWithOptions(nc *nats.Conn, o Options) (*mcp.Server, error) {
	s, _, err := newServer(nc, o)
	return s, err
}

func newServer(nc *nats.Conn, o Options) (*mcp.Server, *tools, error) {
	if o.Participant == "" {
		o.Participant = DefaultParticipant
	}
	if _, err := client.NewWithOptions(nc, o.Participant, client.Options{SigningKey: o.SigningKey}); err != nil {
		return nil, nil, fmt.Errorf("mcpserver: %w", err)
	}
	t := &tools{nc: nc, maxWait: o.MaxWait, participant: o.Participant, key: o.SigningKey}
	if t.maxWait <= 0 {
		t.maxWait = DefaultMaxWait
	}
	whoami := fmt.Sprintf(" This server speaks as participant %q", o.Participant)
	if o.SigningKey != nil {
		whoami += " and signs every artifact"
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "parley", Version: o.Version}, &mcp.ServerOptions{
		SubscribeHandler: t.subscribe, UnsubscribeHandler: t.unsubscribe,
		Instructions: "parley runs auditable deliberations. Publish with the publish_<type> tools (their schemas give each artifact type's payload), " +
			"follow a deliberation with wait_artifacts (it waits for the next artifacts after an ordinal: no need to poll), " +
			"and read every result's outcome and code: a refusal says why." + whoami + ".",
	})
	t.srv = s
	addTool(s, &mcp.Tool{Name: "open_deliberation",
		Description: "Open a deliberation with a charter (title, optional participant tokens, optional principal). Returns its id and the engine's verdict on the open."}, t.open)
	addTool(s, &mcp.Tool{Name: "publish_artifact",
		Description: "Publish an artifact of any type: a draft {artifact_type, payload, references, extensions} (sealed here) or a sealed artifact. Prefer the typed publish_<type> tools, whose schemas give each type's payload. Returns its id, its position and ordinal, and the engine's verdict (outcome, and code and message when it is refused)."}, t.publish)
	for _, r := range events.PayloadRules() {
		addTypedPublish(s, t, r)
	}
	addTool(s, &mcp.Tool{Name: "wait_artifacts",
		Description: fmt.Sprintf("Wait for the next artifacts of a deliberation after an ordinal (up to timeout_seconds, at most %d s), instead of polling: returns them in order with their content, as soon as there is one, and next_after to pass next time; timed_out when none came, and at once when the deliberation has ended.", int(t.maxWait/time.Second))}, t.wait)
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "deliberation", URITemplate: deliberationPrefix + "{id}", MIMEType: "application/json",
		Description: "A deliberation's state (as get_state gives it). Subscribe to be told each time the engine has projected new messages of it."}, t.readResource)
	addTool(s, &mcp.Tool{Name: "get_state",
		Description: "Read a deliberation's state: status, counts, open blocking objections, decisions, terminations, state_digest."}, t.state)
	addTool(s, &mcp.Tool{Name: "verify_closure",
		Description: "Verify that a decision's closure hides no blocking objection, over the live state."}, t.closure)
	addTool(s, &mcp.Tool{Name: "request_binding",
		Description: "Ask the principal: publish a provisional DECISION carrying a briefing-and-binding envelope (seed 002). Returns the envelope in binding_moment, with its digest and the principal the deliberation's charter names, who alone resolves it (resolve_binding on a server speaking as the principal, the engine's /bind page, or engine bind).",
		Meta:        mcp.Meta{EmitsBindingMoment: true}}, t.requestBinding)
	addToolAsking(s, &mcp.Tool{Name: "resolve_binding",
		Description: "Show or resolve a binding moment (a provisional DECISION carrying an envelope). Without a resolution, on a server that speaks as the deliberation's principal and a client that can ask its user (elicitation), the user is asked and their choice is published; otherwise the moment is shown (question, options, hatches) for the agent to relay. With resolution option (option_idx), answer (answer) or question, it is published as the principal's resolution: only a server speaking as the principal may (binding.not_principal otherwise)."}, t.resolve)
	return s, t, nil
}

// addTool adds a tool whose input is In and whose structured result is
// Out, a struct embedding Verdict (or a map holding its members). The
// input schema is the tool's own when it has one, else In's; the
// arguments are not checked against it here: a call the engine's rules
// refuse comes back with the rule's code (refused), and arguments that
// do not decode come back refused with CodeInvalidArgument. The output
// schema is Out's, with outcome its only required member, so that a
// verdict alone fits it.
func addTool[In, Out any](s *mcp.Server, tool *mcp.Tool, h func(context.Context, *mcp.CallToolRequest, In) (Out, Verdict)) {
	addToolAsking(s, tool, func(ctx context.Context, req *mcp.CallToolRequest, in In) (Out, Verdict, mcp.InputRequestMap) {
		out, v := h(ctx, req, in)
		return out, v, nil
	})
}

// addToolAsking is addTool for a tool that may ask the client for input
// first (elicitation): when h returns input requests, the result carries
// them, and the client calls again with the responses
// (req.Params.InputResponses).
func addToolAsking[In, Out any](s *mcp.Server, tool *mcp.Tool, h func(context.Context, *mcp.CallToolRequest, In) (Out, Verdict, mcp.InputRequestMap)) {
	if tool.InputSchema == nil {
		in, err := jsonschema.For[In](nil)
		if err != nil {
			panic(fmt.Sprintf("mcpserver: %s input schema: %v", tool.Name, err))
		}
		tool.InputSchema = in
	}
	out, err := jsonschema.For[Out](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: %s output schema: %v", tool.Name, err))
	}
	if out.Properties == nil {
		// A map: the answer's members, and the verdict's.
		v, err := jsonschema.For[Verdict](nil)
		if err != nil {
			panic(fmt.Sprintf("mcpserver: %s output schema: %v", tool.Name, err))
		}
		out.Properties = v.Properties
	}
	out.Required = []string{"outcome"}
	tool.OutputSchema = out
	s.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in In
		var structured any
		var v Verdict
		if err := json.Unmarshal(orEmpty(req.Params.Arguments), &in); err != nil {
			v = verdictOf(refuse(CodeInvalidArgument, "the arguments do not fit the tool's input schema: %v", err))
			structured = v
		} else {
			var ask mcp.InputRequestMap
			structured, v, ask = h(ctx, req, in)
			if ask != nil {
				return &mcp.CallToolResult{InputRequests: ask}, nil
			}
		}
		b, err := json.Marshal(structured)
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{IsError: v.failed(), StructuredContent: json.RawMessage(b),
			Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
	})
}

func orEmpty(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || string(b) == "null" {
		return json.RawMessage("{}")
	}
	return b
}

type tools struct {
	nc          *nats.Conn
	participant string
	key         nkeys.KeyPair
	srv         *mcp.Server
	maxWait     time.Duration
	watch       watchers
	// seen is the highest stream position the server's publishes were
	// acknowledged at: every read carries it (read-your-writes across tool
	// calls, whichever engine answers).
	seen atomic.Uint64
}

// client returns a client for the server's participant with the
// client's deadlines and retries, whose reads carry the server's last
// acknowledged position.
func (t *tools) client() (*client.Client, error) {
	c, err := client.NewWithOptions(t.nc, t.participant, client.Options{SigningKey: t.key})
	if err != nil {
		return nil, err
	}
	c.Saw(t.seen.Load())
	return c, nil
}

// as checks a participant a call names: none, or the server's own.
func (t *tools) as(named string) error {
	if named != "" && named != t.participant {
		return refuse(CodeParticipantMismatch, "this server speaks as %q, not %q: start another server (engine mcp --participant %s) to speak as another participant", t.participant, named, named)
	}
	return nil
}

// saw records the position of an acknowledged publish.
func (t *tools) saw(seq uint64) {
	for cur := t.seen.Load(); seq > cur && !t.seen.CompareAndSwap(cur, seq); cur = t.seen.Load() {
	}
}

func toMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}

type openIn struct {
	Title             string            `json:"title" jsonschema:"the deliberation's title"`
	Participants      []string          `json:"participants,omitempty" jsonschema:"participant tokens the charter admits (empty: anyone)"`
	Opener            string            `json:"opener,omitempty" jsonschema:"optional: the participant this server speaks as (any other is refused)"`
	Principal         string            `json:"principal,omitempty" jsonschema:"the participant token of the principal, whose resolutions of binding moments alone count (default principal; added to participants when they are listed)"`
	Terminators       []string          `json:"terminators,omitempty" jsonschema:"participant tokens who may, beside the supervisor, end it with a TERMINATION the record justifies"`
	Limits            map[string]any    `json:"limits,omitempty" jsonschema:"the charter's limits (docs/WIRE.md), e.g. max_artifacts, idle_timeout"`
	Keys              map[string]string `json:"keys,omitempty" jsonschema:"participant token to the nkeys user public key (U…) its artifacts are signed with"`
	RequireSignatures bool              `json:"require_signatures,omitempty" jsonschema:"admit a participant's artifact only signed by the key keys binds to its token"`
}
type openOut struct {
	Deliberation string `json:"deliberation,omitempty"`
	Verdict
}

func (t *tools) open(ctx context.Context, _ *mcp.CallToolRequest, in openIn) (openOut, Verdict) {
	out := openOut{}
	id, v, err := t.openDeliberation(ctx, in)
	if err != nil {
		v = verdictOf(err)
	}
	if v.Outcome == string(api.VerdictApplied) {
		out.Deliberation = id
	}
	out.Verdict = v
	return out, v
}

// openDeliberation publishes the open and returns the engine's verdict on
// it.
func (t *tools) openDeliberation(ctx context.Context, in openIn) (string, Verdict, error) {
	if err := t.as(in.Opener); err != nil {
		return "", Verdict{}, err
	}
	c, err := t.client()
	if err != nil {
		return "", Verdict{}, err
	}
	u, err := uuid.NewV7()
	if err != nil {
		return "", Verdict{}, err
	}
	id := u.String()
	if in.Principal != "" && len(in.Participants) > 0 && !slices.Contains(in.Participants, in.Principal) {
		in.Participants = append(in.Participants, in.Principal)
	}
	ack, err := c.Control(ctx, id, client.Control{Op: "open", Charter: &client.Charter{Title: in.Title, Participants: in.Participants, Principal: in.Principal,
		Terminators: in.Terminators, Limits: in.Limits, Keys: in.Keys, RequireSignatures: in.RequireSignatures}})
	if err != nil {
		return "", Verdict{}, err
	}
	t.saw(ack.Sequence)
	// Answer once the engine has judged the open: a refused charter comes
	// back with the engine's code, and an accepted one can be read.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	o, err := c.WaitOutcome(wctx, id, ack.Sequence, "")
	if err != nil {
		return "", Verdict{}, fmt.Errorf("the open was published at position %d, but the engine's verdict did not come: %w", ack.Sequence, err)
	}
	return id, outcomeVerdict(o), nil
}

type publishIn struct {
	Deliberation string         `json:"deliberation"`
	Participant  string         `json:"participant,omitempty" jsonschema:"optional: the participant this server speaks as (any other is refused)"`
	Artifact     map[string]any `json:"artifact" jsonschema:"a draft {artifact_type, payload, references, extensions} or a sealed artifact"`
}
type publishOut struct {
	ArtifactID string `json:"artifact_id,omitempty"`
	// Published: the message is in the stream (whatever the verdict).
	Published bool `json:"published"`
	// Accepted: the artifact is in the deliberation's DAG.
	Accepted bool   `json:"accepted"`
	Status   string `json:"status,omitempty" jsonschema:"the deliberation's status after the message"`
	Verdict
}

// sealDraft seals a draft or validates a sealed artifact.
func sealDraft(m map[string]any) (*events.Artifact, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if _, sealed := m["artifact_id"]; sealed {
		return events.Validate(b)
	}
	var d struct {
		Type       events.Type    `json:"artifact_type"`
		Payload    map[string]any `json:"payload"`
		References []struct {
			ArtifactID string `json:"artifact_id"`
			Relation   string `json:"relation"`
		} `json:"references"`
		Extensions map[string]any `json:"extensions"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, refuse(CodeInvalidArgument, "the draft: %v", err)
	}
	draft := events.Draft{Type: d.Type, Payload: d.Payload, Extensions: d.Extensions}
	for _, r := range d.References {
		id, ok := canon.ParseDigest(r.ArtifactID)
		if !ok {
			return nil, &Refusal{Class: events.ClassInvalidArtifact, Code: events.ErrReferenceInvalidID.Code, Message: fmt.Sprintf("reference %q is not sha256:<64 lowercase hex>", r.ArtifactID)}
		}
		draft.References = append(draft.References, events.Reference{Target: id, Relation: events.Relation(r.Relation)})
	}
	return events.Seal(draft)
}

// publishArtifact publishes a as participant and waits for the engine's
// verdict on it.
func (t *tools) publishArtifact(ctx context.Context, delib, participant string, a *events.Artifact) (publishOut, error) {
	out := publishOut{ArtifactID: a.ID.String()}
	if err := t.as(participant); err != nil {
		return out, err
	}
	if !wire.ValidDeliberation(delib) {
		return out, refuse(CodeInvalidArgument, "deliberation %q is not a deliberation id (a UUID in lowercase)", delib)
	}
	c, err := t.client()
	if err != nil {
		return out, err
	}
	ack, err := c.PublishArtifact(ctx, delib, a)
	if err != nil {
		return out, err
	}
	t.saw(ack.Sequence)
	out.Published = true
	out.Position = ack.Sequence
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	o, err := c.WaitOutcome(wctx, delib, ack.Sequence, a.ID.String())
	if err != nil {
		v := verdictOf(fmt.Errorf("published at position %d, but the engine's verdict did not come: %w", ack.Sequence, err))
		v.Position = ack.Sequence
		out.Verdict = v
		return out, nil
	}
	out.Verdict = outcomeVerdict(o)
	out.Accepted = o.Outcome == api.VerdictAccepted
	if v, err := c.State(ctx, delib); err == nil {
		out.Status = string(v.Status)
	}
	return out, nil
}

func (t *tools) publish(ctx context.Context, _ *mcp.CallToolRequest, in publishIn) (publishOut, Verdict) {
	a, err := sealDraft(in.Artifact)
	if err != nil {
		v := verdictOf(err)
		return publishOut{Verdict: v}, v
	}
	out, err := t.publishArtifact(ctx, in.Deliberation, in.Participant, a)
	if err != nil {
		out.Verdict = verdictOf(err)
	}
	return out, out.Verdict
}

type idIn struct {
	Deliberation string `json:"deliberation"`
}

func (t *tools) state(ctx context.Context, _ *mcp.CallToolRequest, in idIn) (map[string]any, Verdict) {
	c, err := t.client()
	if err != nil {
		return readOut(nil, 0, err)
	}
	v, err := c.State(ctx, in.Deliberation)
	return readOut(v, v.Position, err)
}

// readOut is the result of a read: the answer's members and the verdict's
// (ok at the position read), or the error's verdict.
func readOut(answer any, position uint64, err error) (map[string]any, Verdict) {
	v := Verdict{Outcome: OutcomeOK, Position: position}
	m := map[string]any{}
	if err == nil {
		m, err = toMap(answer)
	}
	if err != nil {
		m, v = map[string]any{}, verdictOf(err)
	}
	vm, _ := toMap(v)
	for k, x := range vm {
		m[k] = x
	}
	return m, v
}

type closureIn struct {
	Deliberation string `json:"deliberation"`
	Decision     string `json:"decision" jsonschema:"the DECISION's artifact id"`
	At           uint64 `json:"at,omitempty" jsonschema:"stream position to verify at (0: the decision's own)"`
}

func (t *tools) closure(ctx context.Context, _ *mcp.CallToolRequest, in closureIn) (map[string]any, Verdict) {
	c, err := t.client()
	if err != nil {
		return readOut(nil, 0, err)
	}
	r, err := c.Closure(ctx, in.Deliberation, in.Decision, in.At)
	return readOut(r, r.Position, err)
}

type bindingIn struct {
	Deliberation string         `json:"deliberation"`
	Participant  string         `json:"participant,omitempty" jsonschema:"optional: the participant this server speaks as (any other is refused)"`
	Outcome      string         `json:"outcome" jsonschema:"the provisional decision's outcome, in a sentence"`
	Decides      []string       `json:"decides" jsonschema:"ids of the CLAIMs, REVISIONs or DECISIONs it decides"`
	Envelope     map[string]any `json:"envelope" jsonschema:"the briefing-and-binding envelope (seed 002 §4)"`
}
type bindingOut struct {
	Decision       string         `json:"decision,omitempty"`
	EnvelopeDigest string         `json:"envelope_digest,omitempty"`
	Principal      string         `json:"principal,omitempty"` // the charter's: whose resolution alone counts
	BindingMoment  map[string]any `json:"binding_moment,omitempty"`
	Verdict
}

func (t *tools) requestBinding(ctx context.Context, _ *mcp.CallToolRequest, in bindingIn) (bindingOut, Verdict) {
	out, err := t.emitBinding(ctx, in)
	if err != nil {
		out.Verdict = verdictOf(err)
	}
	return out, out.Verdict
}

func (t *tools) emitBinding(ctx context.Context, in bindingIn) (bindingOut, error) {
	raw, err := json.Marshal(in.Envelope)
	if err != nil {
		return bindingOut{}, refuse(CodeInvalidArgument, "envelope: %v", err)
	}
	env, err := binding.ParseEnvelope(raw)
	if err != nil {
		// The agent-side veto (seed 002 §7.1): a malformed envelope is not
		// emitted.
		code := "envelope.malformed"
		var mal *binding.Malformed
		if errors.As(err, &mal) && len(mal.Findings) > 0 {
			code = mal.Findings[0].Code
		}
		return bindingOut{}, refuse(code, "no binding moment emitted: %v", err)
	}
	var refs []events.Reference
	for _, s := range in.Decides {
		id, ok := canon.ParseDigest(s)
		if !ok {
			return bindingOut{}, refuse(CodeInvalidArgument, "decides: %q is not an artifact id", s)
		}
		refs = append(refs, events.Reference{Target: id, Relation: events.Decides})
	}
	if len(refs) == 0 {
		return bindingOut{}, refuse(CodeInvalidArgument, "decides: name what the provisional decision decides")
	}
	a, err := events.Seal(events.Draft{Type: events.TypeDecision,
		Payload:    events.Decision{Outcome: in.Outcome, Status: events.Provisional, ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: refs, Extensions: map[string]any{binding.ExtEnvelope: json.RawMessage(env.Canonical)}})
	if err != nil {
		return bindingOut{}, err
	}
	pub, err := t.publishArtifact(ctx, in.Deliberation, in.Participant, a)
	if err != nil {
		return bindingOut{}, err
	}
	out := bindingOut{Decision: a.ID.String(), EnvelopeDigest: env.Digest.String(), Verdict: pub.Verdict}
	if !pub.Accepted {
		return out, nil
	}
	out.Principal = wire.PrincipalToken
	c, err := t.client()
	if err != nil {
		return out, err
	}
	if v, err := c.State(ctx, in.Deliberation); err != nil {
		return out, err
	} else if v.Charter != nil && v.Charter.Principal != "" {
		out.Principal = v.Charter.Principal
	}
	json.Unmarshal(env.Canonical, &out.BindingMoment)
	return out, nil
}
