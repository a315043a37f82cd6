package events

import (
	"encoding/json"
	"fmt"

	"github.com/parley-engine/parley/canon"
)

// Draft is an artifact before it has an id. Payload is marshalled with
// encoding/json: one of the payload types of this package, or any value
// that marshals to an object (a map, for payload members beyond the
// required ones). Extension values likewise.
type Draft struct {
	Type       Type
	Payload    any
	References []Reference
	Extensions map[string]any
}

type wireReference struct {
	ArtifactID canon.Digest `json:"artifact_id"`
	Relation   Relation     `json:"relation,omitempty"`
}

type wireArtifact struct {
	ProtocolVersion string          `json:"protocol_version"`
	ArtifactID      *canon.Digest   `json:"artifact_id,omitempty"`
	ArtifactType    Type            `json:"artifact_type"`
	Payload         any             `json:"payload"`
	References      []wireReference `json:"references"`
	Extensions      map[string]any  `json:"extensions,omitempty"`
}

// Seal computes the artifact id of d, then returns the validated artifact:
// Canonical holds the canonical bytes with artifact_id included, ready to
// publish. Seal never returns an artifact that Validate would reject.
func Seal(d Draft) (*Artifact, error) {
	w := wireArtifact{
		ProtocolVersion: ProtocolVersion,
		ArtifactType:    d.Type,
		Payload:         d.Payload,
		References:      make([]wireReference, len(d.References)),
		Extensions:      d.Extensions,
	}
	if w.Payload == nil {
		w.Payload = struct{}{}
	}
	if p, ok := w.Payload.(*Decision); ok {
		w.Payload = decisionWire(p)
	}
	if p, ok := w.Payload.(Decision); ok {
		w.Payload = decisionWire(&p)
	}
	for i, r := range d.References {
		w.References[i] = wireReference{r.Target, r.Relation}
	}
	body, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("events: seal: %w", err)
	}
	id, err := canon.ID(body)
	if err != nil {
		return nil, fmt.Errorf("events: seal: %w", err)
	}
	w.ArtifactID = &id
	full, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("events: seal: %w", err)
	}
	return Validate(full)
}

// decisionWire makes nil lists marshal as [] (both are required arrays).
func decisionWire(p *Decision) *Decision {
	c := *p
	if c.ObjectionDispositions == nil {
		c.ObjectionDispositions = []Disposition{}
	}
	if c.UnresolvedIssues == nil {
		c.UnresolvedIssues = []Issue{}
	}
	return &c
}

// MustSeal is Seal for drafts known to be valid (tests, examples); it
// panics on error.
func MustSeal(d Draft) *Artifact {
	a, err := Seal(d)
	if err != nil {
		panic(err)
	}
	return a
}
