package binding

import (
	"encoding/json"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
)

// Moment is a provisional DECISION that asks its principal, with where it
// stands: an item of the engine's GET .../bindings (the projector keeps
// them, projector.Deliberation.BindingMoments; the binding pages render
// them).
type Moment struct {
	Decision       canon.Digest      `json:"decision"`
	Decider        string            `json:"decider"`
	Principal      string            `json:"principal"` // the charter's: whose resolution alone counts
	Position       uint64            `json:"position"`
	Status         string            `json:"status"` // open, resolved, malformed
	EnvelopeDigest string            `json:"envelope_digest,omitempty"`
	Envelope       json.RawMessage   `json:"envelope,omitempty"`
	Findings       []Finding         `json:"findings,omitempty"` // of a malformed envelope: never rendered as a decision
	Suppressed     []string          `json:"hatches_suppressed,omitempty"`
	Resolution     *ResolutionRecord `json:"resolution,omitempty"`
	ResolvedBy     string            `json:"resolved_by,omitempty"`
	ResolvedIn     *canon.Digest     `json:"resolved_in,omitempty"`
}

// Resolved is the answer to a principal's resolution: what the engine
// published.
type Resolved struct {
	Verdict     Verdict      `json:"verdict"`
	ArtifactID  canon.Digest `json:"artifact_id"`
	Type        events.Type  `json:"artifact_type"`
	Participant string       `json:"participant"`
	Position    uint64       `json:"position"`
	// Ordinal is the message's rank within the deliberation (1 for its
	// open): the "#N" a person reads.
	Ordinal uint64 `json:"ordinal,omitempty"`
}

// Announcement is a binding moment the engine announces on
// wire.BindingSubject when the fold admits it: a provisional DECISION
// that asks its principal. The engine publishes it without Parsed;
// client.SubscribeBindings hands it on with its envelope checked and
// parsed.
type Announcement struct {
	Deliberation   string          `json:"deliberation"`
	Decision       canon.Digest    `json:"decision"`
	Decider        string          `json:"decider"`
	Principal      string          `json:"principal"`
	Position       uint64          `json:"position"`
	EnvelopeDigest string          `json:"envelope_digest"`
	Envelope       json.RawMessage `json:"envelope"`
	Suppressed     []string        `json:"hatches_suppressed,omitempty"`
	Parsed         *Envelope       `json:"-"`
}
