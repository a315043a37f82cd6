package projector

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/wire"
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
	// Provenance, when set, requires EVIDENCE of the named provenance
	// classes to be admissible under seed 003's discipline.
	Provenance *ProvenancePolicy `json:"provenance,omitempty"`
}

// ProvenancePolicy is a charter's provenance requirement: EVIDENCE whose
// provenance_class is in Require must carry a parley.provenance extension
// whose every assertion is admitted at floor K with window W, judged at
// the time the EVIDENCE reached the stream (and re-verified against the
// engine's roots when it has any). Inadmissible evidence is flagged in the
// projection; a decision that rests on it through supports does not
// verify (provenance.inadmissible_evidence).
type ProvenancePolicy struct {
	// Require: TRACE_VERIFIED_OBSERVATION and/or EXTERNAL_EVIDENCE
	// (default both).
	Require []events.ProvenanceClass `json:"require,omitempty"`
	// K is the floor (default 2).
	K int `json:"k,omitempty"`
	// Window is W, a Go duration (default 10m).
	Window string `json:"window,omitempty"`
	// MCPBriefRequeryable: substrate.mcp.brief observations pass the
	// re-queryability test (default false).
	MCPBriefRequeryable bool `json:"mcp_brief_requeryable,omitempty"`

	window time.Duration
}

// Defaults of a provenance policy.
const (
	DefaultProvenanceK      = 2
	DefaultProvenanceWindow = 10 * time.Minute
)

func (pp *ProvenancePolicy) parse() error {
	if len(pp.Require) == 0 {
		pp.Require = []events.ProvenanceClass{events.TraceVerifiedObservation, events.ExternalEvidence}
	}
	for _, c := range pp.Require {
		if !provenance.Observed(c) {
			return fmt.Errorf("policy.provenance.require: %q is not TRACE_VERIFIED_OBSERVATION or EXTERNAL_EVIDENCE", c)
		}
	}
	switch {
	case pp.K == 0:
		pp.K = DefaultProvenanceK
	case pp.K < 1 || pp.K > len(provenance.Classes):
		return fmt.Errorf("policy.provenance.k: %d is not a floor from 1 to %d", pp.K, len(provenance.Classes))
	}
	pp.window = DefaultProvenanceWindow
	if pp.Window != "" {
		d, err := time.ParseDuration(pp.Window)
		if err != nil || d <= 0 {
			return fmt.Errorf("policy.provenance.window: not a positive Go duration: %q", pp.Window)
		}
		pp.window = d
	}
	return nil
}

// Requires reports whether EVIDENCE of class c must be admissible.
func (pp *ProvenancePolicy) Requires(c events.ProvenanceClass) bool {
	return pp != nil && slices.Contains(pp.Require, c)
}

// Params are the discipline's parameters at time at.
func (pp *ProvenancePolicy) Params(at time.Time) provenance.Params {
	return provenance.Params{Window: pp.window, K: pp.K, At: at, MCPBriefRequeryable: pp.MCPBriefRequeryable}
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
func effective(ch *api.Charter, def Defaults) (Limits, Policy, error) {
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
	if p.Provenance == nil && def.Policy.Provenance != nil {
		pp := *def.Policy.Provenance
		p.Provenance = &pp
	}
	if p.Provenance != nil {
		if err := p.Provenance.parse(); err != nil {
			return l, p, err
		}
	}
	for _, t := range p.RequiredParticipants {
		if !wire.ValidToken(t) {
			return l, p, errors.New("policy.required_participants: " + t + " is not a participant token")
		}
	}
	return l, p, nil
}

// strictJSON decodes an object, refusing unknown members: a misspelt limit
// must not silently mean no limit.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
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
