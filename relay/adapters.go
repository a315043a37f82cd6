package relay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/parley-engine/parley/canon"
)

// newParticipant builds the adapter a participant's configuration names.
func newParticipant(c *Config, p ParticipantConfig) (Participant, error) {
	switch p.Adapter {
	case "script":
		return loadScript(c.path(p.Script))
	case "exec":
		return &execParticipant{command: p.Command, dir: c.dir}, nil
	case "openai":
		return newOpenAI(p)
	case "anthropic":
		return newAnthropic(p)
	case "human":
		return newHuman(p), nil
	}
	return nil, fmt.Errorf("relay: adapter %q", p.Adapter)
}

// --- script ---------------------------------------------------------------

// scriptParticipant answers with the drafts of a file, in order: a JSON
// array of drafts. Deterministic, for tests and examples. In a script,
// an artifact_id may be a placeholder resolved against the turn's context:
// "@last" (the last artifact), "@last.ref" (the first artifact the last
// one references, which single-hop context shows by id only), "@last:TYPE"
// (the last of a type), "@first:TYPE"; and a DECISION's objection_dispositions may be
// {"@all-blocking": KIND, "rationale": TEXT}, which disposes of every
// blocking objection in the context.
type scriptParticipant struct {
	mu     sync.Mutex
	drafts []json.RawMessage
	next   int
}

func loadScript(path string) (*scriptParticipant, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("relay: script: %w", err)
	}
	var drafts []json.RawMessage
	if err := json.Unmarshal(b, &drafts); err != nil {
		return nil, fmt.Errorf("relay: script %s (a JSON array of drafts): %w", path, at(b, err))
	}
	return &scriptParticipant{drafts: drafts}, nil
}

func (s *scriptParticipant) Take(_ context.Context, t Turn) (Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next >= len(s.drafts) {
		return Response{}, fmt.Errorf("relay: script exhausted after %d drafts", len(s.drafts))
	}
	d := s.drafts[s.next]
	s.next++
	out, err := resolvePlaceholders(d, t)
	if err != nil {
		return Response{Output: d}, nil // the raw draft, which will fail validation visibly
	}
	return Response{Output: out, Model: map[string]any{"provider": "script"}}, nil
}

func resolvePlaceholders(raw json.RawMessage, t Turn) ([]byte, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	type ctxArt struct {
		id       string
		typ      string
		blocking bool
		refs     []string
	}
	var arts []ctxArt
	for _, c := range t.Context {
		var a struct {
			ID      string `json:"artifact_id"`
			Type    string `json:"artifact_type"`
			Payload struct {
				Blocking bool `json:"blocking"`
			} `json:"payload"`
			Refs []struct {
				ID string `json:"artifact_id"`
			} `json:"references"`
		}
		json.Unmarshal(c.Artifact, &a)
		ca := ctxArt{id: a.ID, typ: a.Type, blocking: a.Payload.Blocking}
		for _, r := range a.Refs {
			ca.refs = append(ca.refs, r.ID)
		}
		arts = append(arts, ca)
	}
	lookup := func(ph string) (string, bool) {
		switch {
		case ph == "@last" && len(arts) > 0:
			return arts[len(arts)-1].id, true
		case ph == "@last.ref" && len(arts) > 0 && len(arts[len(arts)-1].refs) > 0:
			return arts[len(arts)-1].refs[0], true
		case strings.HasPrefix(ph, "@last:"):
			for i := len(arts) - 1; i >= 0; i-- {
				if arts[i].typ == ph[6:] {
					return arts[i].id, true
				}
			}
		case strings.HasPrefix(ph, "@first:"):
			for _, a := range arts {
				if a.typ == ph[7:] {
					return a.id, true
				}
			}
		}
		return "", false
	}
	var walk func(x any) (any, error)
	walk = func(x any) (any, error) {
		switch x := x.(type) {
		case string:
			if strings.HasPrefix(x, "@") {
				if id, ok := lookup(x); ok {
					return id, nil
				}
				return nil, fmt.Errorf("placeholder %s has no match in the context", x)
			}
			return x, nil
		case []any:
			for i := range x {
				y, err := walk(x[i])
				if err != nil {
					return nil, err
				}
				x[i] = y
			}
			return x, nil
		case map[string]any:
			if kind, ok := x["@all-blocking"]; ok {
				var out []any
				for _, a := range arts {
					if a.typ == "OBJECTION" && a.blocking {
						out = append(out, map[string]any{"objection": a.id, "disposition": kind, "rationale": x["rationale"]})
					}
				}
				if out == nil {
					out = []any{}
				}
				return out, nil
			}
			for k := range x {
				y, err := walk(x[k])
				if err != nil {
					return nil, err
				}
				x[k] = y
			}
			return x, nil
		}
		return x, nil
	}
	v, err := walk(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// --- exec -----------------------------------------------------------------

// execParticipant runs a command per turn: the turn as JSON on standard
// input, the draft as JSON on standard output. Any language will do.
type execParticipant struct {
	command []string
	dir     string
}

func (e *execParticipant) Take(ctx context.Context, t Turn) (Response, error) {
	in, _ := json.Marshal(t)
	cmd := exec.CommandContext(ctx, e.command[0], e.command[1:]...)
	cmd.Dir = e.dir
	cmd.Stdin = bytes.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	lat := time.Since(start)
	if err != nil {
		return Response{Output: out.Bytes(), Latency: lat}, fmt.Errorf("relay: exec %s: %w: %s", strings.Join(e.command, " "), err, strings.TrimSpace(errb.String()))
	}
	return Response{Output: bytes.TrimSpace(out.Bytes()), Latency: lat,
		Model: map[string]any{"provider": "exec", "command": strings.Join(e.command, " ")}}, nil
}

// --- openai ---------------------------------------------------------------

// openAIParticipant speaks the Chat Completions API of any OpenAI-compatible
// server (OpenAI, vLLM, llama.cpp, Ollama's /v1, LM Studio, OpenRouter)
// through the official Go SDK, which retries 429 and 5xx with backoff.
type openAIParticipant struct {
	cfg    ParticipantConfig
	client openai.Client

	mu       sync.Mutex
	fallback bool // the server refused json_schema: json_object from now on
}

func newOpenAI(p ParticipantConfig) (*openAIParticipant, error) {
	key := "not-needed"
	if p.APIKeyEnv != "" {
		key = os.Getenv(p.APIKeyEnv)
		if key == "" {
			return nil, fmt.Errorf("relay: participant %s: the environment variable %s is empty", p.ID, p.APIKeyEnv)
		}
	}
	timeout := 120 * time.Second
	if p.Timeout != "" {
		timeout, _ = time.ParseDuration(p.Timeout)
	}
	c := openai.NewClient(option.WithBaseURL(strings.TrimSuffix(p.BaseURL, "/")+"/"), option.WithAPIKey(key),
		option.WithRequestTimeout(timeout), option.WithMaxRetries(3))
	return &openAIParticipant{cfg: p, client: c}, nil
}

func (o *openAIParticipant) params(t Turn, jsonObject bool) openai.ChatCompletionNewParams {
	turn, _ := json.Marshal(t)
	system := SystemPrompt
	if jsonObject {
		schema, _ := json.Marshal(DraftSchema)
		system += "\nAnswer with the JSON object only, following this JSON Schema: " + string(schema)
	}
	p := openai.ChatCompletionNewParams{
		Model: shared.ChatModel(o.cfg.Model),
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage(system),
			openai.UserMessage(string(turn)),
		},
	}
	if o.cfg.Temperature != nil {
		p.Temperature = openai.Float(*o.cfg.Temperature)
	}
	if o.cfg.Seed != nil {
		p.Seed = openai.Int(*o.cfg.Seed)
	}
	if o.cfg.MaxTokens > 0 {
		p.MaxCompletionTokens = openai.Int(o.cfg.MaxTokens)
	}
	if jsonObject {
		p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
	} else {
		p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "parley_artifact", Strict: openai.Bool(true), Schema: DraftSchema}}}
	}
	return p
}

func (o *openAIParticipant) Take(ctx context.Context, t Turn) (Response, error) {
	o.mu.Lock()
	jsonObject := o.fallback || o.cfg.ResponseFormat == "json_object"
	o.mu.Unlock()
	r, err := o.take(ctx, t, jsonObject)
	var apiErr *openai.Error
	if err != nil && !jsonObject && errors.As(err, &apiErr) && (apiErr.StatusCode == 400 || apiErr.StatusCode == 422) {
		// A server without json_schema: fall back to json_object, with
		// the schema in the prompt, for this call and the next ones.
		o.mu.Lock()
		o.fallback = true
		o.mu.Unlock()
		r, err = o.take(ctx, t, true)
		if r.Model != nil {
			r.Model["response_format"] = "json_object (json_schema refused)"
		}
	}
	return r, err
}

func (o *openAIParticipant) take(ctx context.Context, t Turn, jsonObject bool) (Response, error) {
	params := o.params(t, jsonObject)
	// The request's hash: SHA-256 of the body the SDK sends (its field
	// order is fixed; JCS cannot be used, the body has fractional numbers).
	body, _ := json.Marshal(params)
	reqHash := canon.Digest(sha256.Sum256(body)).String()
	start := time.Now()
	res, err := o.client.Chat.Completions.New(ctx, params)
	lat := time.Since(start)
	model := map[string]any{"provider": "openai-compatible", "base_url": o.cfg.BaseURL, "model": o.cfg.Model,
		"request_hash": reqHash, "latency_ms": lat.Milliseconds()}
	if o.cfg.Temperature != nil {
		model["temperature_millis"] = int64(*o.cfg.Temperature * 1000)
	}
	if o.cfg.Seed != nil {
		model["seed"] = *o.cfg.Seed
	}
	if err != nil {
		return Response{Model: model, Latency: lat}, fmt.Errorf("relay: %s: %w", o.cfg.ID, err)
	}
	r := Response{Model: model, Latency: lat}
	model["response_model"] = res.Model
	// Deprecated upstream, but still sent by servers that have it, and
	// what tells two runs of the "same" model apart: recorded when present.
	//lint:ignore SA1019 recorded for reproducibility while servers send it
	if fp := res.SystemFingerprint; fp != "" {
		model["system_fingerprint"] = fp
	}
	r.Usage = map[string]int64{"input_tokens": res.Usage.PromptTokens, "output_tokens": res.Usage.CompletionTokens}
	if pr := o.cfg.Price; pr != nil {
		r.Usage["cost_usd_micros"] = int64(float64(res.Usage.PromptTokens)*pr.InputPerMTokUSD + float64(res.Usage.CompletionTokens)*pr.OutputPerMTokUSD)
	}
	if len(res.Choices) == 0 {
		return r, errors.New("relay: the response has no choices")
	}
	ch := res.Choices[0]
	model["finish_reason"] = ch.FinishReason
	r.Truncated = ch.FinishReason == "length"
	if ch.Message.Refusal != "" {
		r.Output = []byte(ch.Message.Refusal)
		return r, nil
	}
	r.Output = []byte(strings.TrimSpace(ch.Message.Content))
	return r, nil
}
