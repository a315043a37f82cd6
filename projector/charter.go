package projector

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/parley-engine/parley/closure"
)

// Limits are a charter's limits (the "limits" member of the open control
// message), with these member names so that charters are portable. Zero
// means no limit (or, for the closure limits, the verifier's default).
type Limits struct {
	MaxArtifactBytes           int    `json:"max_artifact_bytes,omitempty"`
	MaxReferences              int    `json:"max_references,omitempty"`
	MaxDepth                   int    `json:"max_depth,omitempty"` // graph depth: references in a row down to a root
	MaxClosure                 int    `json:"max_closure,omitempty"`
	MaxArtifacts               int    `json:"max_artifacts,omitempty"`
	MaxArtifactsPerParticipant int    `json:"max_artifacts_per_participant,omitempty"`
	MaxRounds                  int    `json:"max_rounds,omitempty"`
	BudgetTokens               int64  `json:"budget_tokens,omitempty"`
	BudgetCostUSDMicros        int64  `json:"budget_cost_usd_micros,omitempty"`
	Deadline                   string `json:"deadline,omitempty"`     // RFC 3339
	IdleTimeout                string `json:"idle_timeout,omitempty"` // a Go duration
	StallWindow                int    `json:"stall_window,omitempty"` // accepted artifacts

	deadline time.Time
	idle     time.Duration
}

// Policy is a charter's policy.
type Policy struct {
	// AutoComplete: a verified final decision completes the deliberation
	// (default true).
	AutoComplete         *bool    `json:"auto_complete,omitempty"`
	RequiredParticipants []string `json:"required_participants,omitempty"`
}

// Defaults are engine-wide charter defaults, used where a charter is silent.
type Defaults struct {
	Limits Limits `json:"limits"`
	Policy Policy `json:"policy"`
}

// DeadlineTime returns the parsed deadline (zero when none).
func (l Limits) DeadlineTime() time.Time { return l.deadline }

// Idle returns the parsed idle timeout (zero when none).
func (l Limits) Idle() time.Duration { return l.idle }

func (l *Limits) parse() error {
	for name, v := range map[string]int64{"max_artifact_bytes": int64(l.MaxArtifactBytes), "max_references": int64(l.MaxReferences),
		"max_depth": int64(l.MaxDepth), "max_closure": int64(l.MaxClosure), "max_artifacts": int64(l.MaxArtifacts),
		"max_artifacts_per_participant": int64(l.MaxArtifactsPerParticipant), "max_rounds": int64(l.MaxRounds),
		"budget_tokens": l.BudgetTokens, "budget_cost_usd_micros": l.BudgetCostUSDMicros, "stall_window": int64(l.StallWindow)} {
		if v < 0 {
			return fmt.Errorf("limits.%s is negative", name)
		}
	}
	if l.Deadline != "" {
		t, err := time.Parse(time.RFC3339, l.Deadline)
		if err != nil {
			return fmt.Errorf("limits.deadline: %w", err)
		}
		l.deadline = t
	}
	if l.IdleTimeout != "" {
		d, err := time.ParseDuration(l.IdleTimeout)
		if err != nil || d <= 0 {
			return fmt.Errorf("limits.idle_timeout: not a positive Go duration: %q", l.IdleTimeout)
		}
		l.idle = d
	}
	return nil
}

// merge fills what l leaves unset from def.
func (l Limits) merge(def Limits) Limits {
	pick := func(a, b int) int {
		if a != 0 {
			return a
		}
		return b
	}
	pick64 := func(a, b int64) int64 {
		if a != 0 {
			return a
		}
		return b
	}
	picks := func(a, b string) string {
		if a != "" {
			return a
		}
		return b
	}
	return Limits{
		MaxArtifactBytes: pick(l.MaxArtifactBytes, def.MaxArtifactBytes), MaxReferences: pick(l.MaxReferences, def.MaxReferences),
		MaxDepth: pick(l.MaxDepth, def.MaxDepth), MaxClosure: pick(l.MaxClosure, def.MaxClosure),
		MaxArtifacts: pick(l.MaxArtifacts, def.MaxArtifacts), MaxArtifactsPerParticipant: pick(l.MaxArtifactsPerParticipant, def.MaxArtifactsPerParticipant),
		MaxRounds: pick(l.MaxRounds, def.MaxRounds), BudgetTokens: pick64(l.BudgetTokens, def.BudgetTokens),
		BudgetCostUSDMicros: pick64(l.BudgetCostUSDMicros, def.BudgetCostUSDMicros), Deadline: picks(l.Deadline, def.Deadline),
		IdleTimeout: picks(l.IdleTimeout, def.IdleTimeout), StallWindow: pick(l.StallWindow, def.StallWindow),
	}
}

// Complete reports whether a verified final decision completes the
// deliberation.
func (p Policy) Complete() bool { return p.AutoComplete == nil || *p.AutoComplete }

// effective computes a charter's limits and policy over the defaults.
func effective(ch *Charter, def Defaults) (Limits, Policy, error) {
	var l Limits
	var p Policy
	if len(ch.Limits) > 0 {
		if err := strictJSON(ch.Limits, &l); err != nil {
			return l, p, fmt.Errorf("charter limits: %w", err)
		}
	}
	if len(ch.Policy) > 0 {
		if err := strictJSON(ch.Policy, &p); err != nil {
			return l, p, fmt.Errorf("charter policy: %w", err)
		}
	}
	l = l.merge(def.Limits)
	if err := l.parse(); err != nil {
		return l, p, err
	}
	if p.AutoComplete == nil {
		p.AutoComplete = def.Policy.AutoComplete
	}
	if p.RequiredParticipants == nil {
		p.RequiredParticipants = def.Policy.RequiredParticipants
	}
	for _, t := range p.RequiredParticipants {
		if !ValidToken(t) {
			return l, p, errors.New("policy.required_participants: " + t + " is not a participant token")
		}
	}
	return l, p, nil
}

// strictJSON decodes an object, refusing unknown members: a misspelt limit
// must not silently mean no limit.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytesReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Limits returns the deliberation's effective limits.
func (d *Deliberation) Limits() Limits { return d.limits }

// Policy returns the deliberation's effective policy.
func (d *Deliberation) Policy() Policy { return d.policy }

// ClosureLimits returns the closure verifier's limits for the
// deliberation: the charter's max_closure, max_depth and max_references
// where it sets them, the defaults otherwise.
func (d *Deliberation) ClosureLimits() closure.Limits {
	l := closure.DefaultLimits
	if d.limits.MaxClosure > 0 {
		l.MaxSize = d.limits.MaxClosure
	}
	if d.limits.MaxDepth > 0 {
		l.MaxDepth = d.limits.MaxDepth
	}
	if d.limits.MaxReferences > 0 {
		l.MaxFanout = d.limits.MaxReferences
	}
	return l
}
