package relay

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/parley-engine/parley/canon"
)

// anthropicParticipant speaks Anthropic's Messages API through the
// official Go SDK (which retries 429 and 5xx with backoff). The draft
// schema is given in the prompt; the answer's text is the draft (a JSON
// code fence around it is tolerated).
type anthropicParticipant struct {
	cfg    ParticipantConfig
	client anthropic.Client
}

func newAnthropic(p ParticipantConfig) (*anthropicParticipant, error) {
	env := p.APIKeyEnv
	if env == "" {
		env = "ANTHROPIC_API_KEY"
	}
	key := os.Getenv(env)
	if key == "" {
		return nil, fmt.Errorf("relay: participant %s: the environment variable %s is empty", p.ID, env)
	}
	timeout := 120 * time.Second
	if p.Timeout != "" {
		timeout, _ = time.ParseDuration(p.Timeout)
	}
	opts := []aoption.RequestOption{aoption.WithAPIKey(key), aoption.WithRequestTimeout(timeout), aoption.WithMaxRetries(3)}
	if p.BaseURL != "" {
		opts = append(opts, aoption.WithBaseURL(strings.TrimSuffix(p.BaseURL, "/")+"/"))
	}
	return &anthropicParticipant{cfg: p, client: anthropic.NewClient(opts...)}, nil
}

func (a *anthropicParticipant) Take(ctx context.Context, t Turn) (Response, error) {
	turn, _ := json.Marshal(t)
	schema, _ := json.Marshal(DraftSchema)
	maxTokens := a.cfg.MaxTokens
	if maxTokens <= 0 {
		maxTokens = 2048
	}
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(a.cfg.Model),
		MaxTokens: maxTokens,
		System:    []anthropic.TextBlockParam{{Text: SystemPrompt + "\nAnswer with the JSON object only, following this JSON Schema: " + string(schema)}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(string(turn)))},
	}
	body, _ := json.Marshal(params)
	model := map[string]any{"provider": "anthropic", "model": a.cfg.Model, "request_hash": canon.Digest(sha256.Sum256(body)).String()}
	start := time.Now()
	res, err := a.client.Messages.New(ctx, params)
	lat := time.Since(start)
	model["latency_ms"] = lat.Milliseconds()
	r := Response{Model: model, Latency: lat}
	if err != nil {
		return r, fmt.Errorf("relay: %s: %w", a.cfg.ID, err)
	}
	model["response_model"] = string(res.Model)
	model["finish_reason"] = string(res.StopReason)
	r.Usage = map[string]int64{"input_tokens": res.Usage.InputTokens, "output_tokens": res.Usage.OutputTokens}
	if pr := a.cfg.Price; pr != nil {
		r.Usage["cost_usd_micros"] = int64(float64(res.Usage.InputTokens)*pr.InputPerMTokUSD + float64(res.Usage.OutputTokens)*pr.OutputPerMTokUSD)
	}
	r.Truncated = res.StopReason == "max_tokens"
	var text strings.Builder
	for _, b := range res.Content {
		if b.Type == "text" {
			text.WriteString(b.Text)
		}
	}
	if text.Len() == 0 {
		return r, errors.New("relay: the answer has no text")
	}
	r.Output = []byte(stripFence(text.String()))
	return r, nil
}

// stripFence removes a Markdown code fence around a JSON answer.
func stripFence(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "```") {
		s = strings.TrimPrefix(s, "```json")
		s = strings.TrimPrefix(s, "```")
		s = strings.TrimSuffix(strings.TrimSpace(s), "```")
	}
	return strings.TrimSpace(s)
}
