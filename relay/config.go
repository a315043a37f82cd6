package relay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/parley-engine/parley/wire"
)

// Config is a relay experiment (docs/RELAY.md documents every field).
type Config struct {
	// Title of the deliberation.
	Title string `json:"title"`
	// Question every participant deliberates on; it opens each turn.
	Question string `json:"question"`
	// Rounds: in each, every participant but the decider takes one turn.
	Rounds int `json:"rounds"`
	// Context is what a turn shows of the record: "single-hop" (the
	// artifacts of the turn before), "full-history" (every artifact), or
	// "closure" (the turn before's artifacts and everything they reference).
	Context string `json:"context"`
	// Order of turns within a round: "round-robin" (the participants in
	// the order listed).
	Order string `json:"order"`
	// Decider is the id of the participant that takes the last turn, after
	// the rounds, and must answer with a DECISION.
	Decider string `json:"decider"`
	// Strict ends the run (a cancel control message, recorded by the
	// supervisor's TERMINATION) when a participant's output stays invalid
	// after its retries; otherwise the turn is lost and the run goes on.
	Strict bool `json:"strict"`
	// MaxRetries bounds the retries of a turn whose output is invalid or
	// whose call failed (default 2).
	MaxRetries *int `json:"max_retries"`
	// Limits and Policy are the charter's (see the engine's charters).
	Limits map[string]any `json:"limits"`
	Policy map[string]any `json:"policy"`
	// ProvenanceRoots are the directories (relative to the configuration
	// file) the embedded engine re-verifies provenance annotations against,
	// for a policy.provenance charter (docs/PROVENANCE.md). With --nats
	// the engine's own --provenance-root applies.
	ProvenanceRoots []string `json:"provenance_roots"`
	// WaitTermination bounds the wait for the supervisor's TERMINATION after
	// the decision (default "10s").
	WaitTermination string `json:"wait_termination"`

	// Principal, when set, is the participant token of the person the
	// decider may ask (seed 002): a decider's DECISION that carries a
	// binding_moment envelope is published provisional, and the relay
	// waits for the principal's resolution (made at the engine's /bind
	// page or API) before it goes on.
	Principal string `json:"principal"`
	// MaxAsks bounds the binding moments of a run (default 3).
	MaxAsks int `json:"max_asks"`
	// PrincipalTimeout bounds the wait for each resolution (default "1h").
	PrincipalTimeout string `json:"principal_timeout"`

	// Sign, when true, makes the relay draw a user key pair per
	// participant for the run, bind the public keys in the charter
	// ("keys", "require_signatures": docs/VERIFY.md) and sign every
	// artifact it publishes for a participant with that participant's key;
	// the run directory gets keys.json (the public keys) and
	// recording.jsonl (the deliberation as a stream recording, for engine
	// audit). The seeds are held in memory for the run only.
	Sign bool `json:"sign"`

	Participants []ParticipantConfig `json:"participants"`

	dir string // the config file's directory: relative paths start there
}

// ParticipantConfig configures one participant.
type ParticipantConfig struct {
	// ID is the participant token.
	ID string `json:"id"`
	// Role and Instructions are given to the participant with every turn.
	Role         string `json:"role"`
	Instructions string `json:"instructions"`
	// Adapter: "openai", "anthropic", "exec", "script" or "human".
	Adapter string `json:"adapter"`

	// openai: any OpenAI-compatible Chat Completions server; anthropic:
	// Anthropic's Messages API (base_url optional). The key is read from
	// the environment variable api_key_env names (for anthropic, default
	// ANTHROPIC_API_KEY), never from the file.
	BaseURL     string   `json:"base_url"`
	Model       string   `json:"model"`
	APIKeyEnv   string   `json:"api_key_env"`
	Temperature *float64 `json:"temperature"`
	Seed        *int64   `json:"seed"`
	MaxTokens   int64    `json:"max_tokens"`
	// ResponseFormat: "json_schema" (strict structured output, the
	// default) or "json_object" (for servers without json_schema).
	ResponseFormat string `json:"response_format"`
	// Timeout of one call (default "120s").
	Timeout string `json:"timeout"`
	// Price, to count cost: US dollars per million input and output tokens.
	Price *Price `json:"price"`

	// exec: a command that reads the turn as JSON on standard input and
	// writes the draft as JSON on standard output.
	Command []string `json:"command"`

	// script: a JSON file of drafts, taken in order, one per turn.
	Script string `json:"script"`
}

// Price of a model.
type Price struct {
	InputPerMTokUSD  float64 `json:"input_per_mtok_usd"`
	OutputPerMTokUSD float64 `json:"output_per_mtok_usd"`
}

// Load reads and checks a configuration file.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Config
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("relay: %s: %w", path, at(b, err))
	}
	c.dir = filepath.Dir(path)
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("relay: %s: %w", path, err)
	}
	return &c, nil
}

// JSONError is a configuration file's JSON error with where it is: the
// line and column (from 1, in bytes) of the offending byte or member.
type JSONError struct {
	Line, Column int
	Err          error
}

func (e *JSONError) Error() string {
	return fmt.Sprintf("line %d, column %d: %v", e.Line, e.Column, e.Err)
}

func (e *JSONError) Unwrap() error { return e.Err }

// at locates a JSON decoding error of b: a syntax or type error at its
// offset, an unknown member at its name's first occurrence; other errors
// (an empty file) as they are.
func at(b []byte, err error) error {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset - 1
	case errors.As(err, &te):
		off = te.Offset - 1
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		off = int64(bytes.Index(b, []byte(name)))
	}
	if errors.Is(err, io.EOF) {
		return errors.New("the file is empty: a relay configuration is a JSON object")
	}
	if off < 0 || off > int64(len(b)) {
		return err
	}
	if off == int64(len(b)) && off > 0 {
		off--
	}
	line := 1 + bytes.Count(b[:off], []byte{'\n'})
	col := int(off) - bytes.LastIndexByte(b[:off], '\n')
	return &JSONError{Line: line, Column: col, Err: err}
}

func (c *Config) check() error {
	if c.Title == "" {
		return fmt.Errorf("title is required")
	}
	if c.Rounds < 1 {
		return fmt.Errorf("rounds must be at least 1")
	}
	switch c.Context {
	case "":
		c.Context = "single-hop"
	case "single-hop", "full-history", "closure":
	default:
		return fmt.Errorf("context %q: want single-hop, full-history or closure", c.Context)
	}
	switch c.Order {
	case "":
		c.Order = "round-robin"
	case "round-robin":
	default:
		return fmt.Errorf("order %q: only round-robin is known", c.Order)
	}
	if c.MaxRetries == nil {
		two := 2
		c.MaxRetries = &two
	}
	if *c.MaxRetries < 0 || *c.MaxRetries > 10 {
		return fmt.Errorf("max_retries must be 0..10")
	}
	if c.WaitTermination == "" {
		c.WaitTermination = "10s"
	}
	if _, err := time.ParseDuration(c.WaitTermination); err != nil {
		return fmt.Errorf("wait_termination: %w", err)
	}
	if len(c.Participants) < 1 {
		return fmt.Errorf("participants: at least one")
	}
	if c.Principal != "" {
		if !wire.ValidToken(c.Principal) {
			return fmt.Errorf("principal %q is not a participant token", c.Principal)
		}
		if c.Decider == "" {
			return fmt.Errorf("principal needs a decider to ask it")
		}
		for _, p := range c.Participants {
			if p.ID == c.Principal {
				return fmt.Errorf("principal %q is also a participant: the principal answers through binding moments only", c.Principal)
			}
		}
	}
	if c.Sign && c.Principal != "" {
		return fmt.Errorf("sign with a principal: the principal's resolutions come through the engine's API unsigned, which a charter requiring signatures refuses")
	}
	if c.MaxAsks == 0 {
		c.MaxAsks = 3
	}
	if c.MaxAsks < 1 || c.MaxAsks > 20 {
		return fmt.Errorf("max_asks must be 1..20")
	}
	if c.PrincipalTimeout == "" {
		c.PrincipalTimeout = "1h"
	}
	if _, err := time.ParseDuration(c.PrincipalTimeout); err != nil {
		return fmt.Errorf("principal_timeout: %w", err)
	}
	seen := map[string]bool{}
	deciderFound := c.Decider == ""
	for i, p := range c.Participants {
		if !wire.ValidToken(p.ID) {
			return fmt.Errorf("participants[%d].id %q is not a participant token", i, p.ID)
		}
		if seen[p.ID] {
			return fmt.Errorf("participants[%d].id %q appears twice", i, p.ID)
		}
		seen[p.ID] = true
		if p.ID == c.Decider {
			deciderFound = true
		}
		switch p.Adapter {
		case "openai":
			if p.BaseURL == "" || p.Model == "" {
				return fmt.Errorf("participants[%d] (%s): openai needs base_url and model", i, p.ID)
			}
			switch p.ResponseFormat {
			case "", "json_schema", "json_object":
			default:
				return fmt.Errorf("participants[%d] (%s): response_format %q", i, p.ID, p.ResponseFormat)
			}
			if p.Timeout != "" {
				if _, err := time.ParseDuration(p.Timeout); err != nil {
					return fmt.Errorf("participants[%d] (%s): timeout: %w", i, p.ID, err)
				}
			}
		case "anthropic":
			if p.Model == "" {
				return fmt.Errorf("participants[%d] (%s): anthropic needs a model", i, p.ID)
			}
		case "human":
		case "exec":
			if len(p.Command) == 0 {
				return fmt.Errorf("participants[%d] (%s): exec needs a command", i, p.ID)
			}
		case "script":
			if p.Script == "" {
				return fmt.Errorf("participants[%d] (%s): script needs a script file", i, p.ID)
			}
		default:
			return fmt.Errorf("participants[%d] (%s): adapter %q: want openai, anthropic, exec, script or human", i, p.ID, p.Adapter)
		}
	}
	if !deciderFound {
		return fmt.Errorf("decider %q is not a participant", c.Decider)
	}
	return nil
}

// Roots returns the provenance roots, resolved against the configuration
// file's directory.
func (c *Config) Roots() []string {
	var out []string
	for _, r := range c.ProvenanceRoots {
		out = append(out, c.path(r))
	}
	return out
}

// path resolves a path relative to the configuration file.
func (c *Config) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.dir, p)
}
