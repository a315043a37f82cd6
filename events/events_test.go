package events_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
)

func TestSeal_RoundTrip(t *testing.T) {
	claim := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The cache halves p99 latency."}})
	evidence := events.MustSeal(events.Draft{
		Type:       events.TypeEvidence,
		Payload:    events.Evidence{Content: "p99 80 -> 41 ms over 10k requests", ProvenanceClass: events.TraceVerifiedObservation},
		References: []events.Reference{{Target: claim.ID, Relation: events.Supports}},
		Extensions: map[string]any{"parley.round": 1},
	})
	objection := events.MustSeal(events.Draft{
		Type:       events.TypeObjection,
		Payload:    events.Objection{Statement: "One workload only.", Blocking: true},
		References: []events.Reference{{Target: claim.ID, Relation: events.ObjectsTo}},
	})
	decision := events.MustSeal(events.Draft{
		Type: events.TypeDecision,
		Payload: &events.Decision{Outcome: "Adopt the cache.", Status: events.Final,
			ObjectionDispositions: []events.Disposition{{Objection: objection.ID, Disposition: events.Addressed, Rationale: "Second workload measured.", By: []canon.Digest{evidence.ID}}}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}, {Target: objection.ID, Relation: events.Considers}},
	})
	for _, a := range []*events.Artifact{claim, evidence, objection, decision} {
		// The sealed bytes are canonical and verify.
		again, err := events.Validate(a.Canonical)
		if err != nil {
			t.Fatalf("%s: %v", a.Type, err)
		}
		if again.ID != a.ID || !bytes.Equal(again.Canonical, a.Canonical) {
			t.Errorf("%s: round trip changed the artifact", a.Type)
		}
		c, err := canon.Canonicalize(canon.AMD, a.Canonical)
		if err != nil || !bytes.Equal(c, a.Canonical) {
			t.Errorf("%s: sealed bytes are not canonical", a.Type)
		}
	}
	d := decision.DecisionPayload()
	if d == nil || len(d.ObjectionDispositions) != 1 || d.ObjectionDispositions[0].By[0] != evidence.ID || d.UnresolvedIssues == nil {
		t.Errorf("decision payload %+v", d)
	}
	if string(evidence.Extensions["parley.round"]) != "1" {
		t.Errorf("extensions %v", evidence.Extensions)
	}
	if !objection.Blocking() || claim.Blocking() {
		t.Error("Blocking")
	}
	// Nil lists are written as [] and the decision is valid.
	empty := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "x", Status: events.Provisional}})
	if !bytes.Contains(empty.Canonical, []byte(`"objection_dispositions":[]`)) {
		t.Errorf("%s", empty.Canonical)
	}
}

func TestSeal_Rejects(t *testing.T) {
	_, err := events.Seal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "  "}})
	if !errors.Is(err, events.ErrInvalidStatement) {
		t.Errorf("blank statement: %v", err)
	}
	_, err = events.Seal(events.Draft{Type: events.TypeEvidence, Payload: events.Evidence{Content: "x", ProvenanceClass: events.Hypothesis}})
	if !errors.Is(err, events.ErrMissingSupports) {
		t.Errorf("no supports: %v", err)
	}
	_, err = events.Seal(events.Draft{Type: events.TypeClaim, Payload: map[string]any{"statement": "x", "ratio": 0.5}})
	if !errors.Is(err, canon.ErrFraction) {
		t.Errorf("fraction: %v", err)
	}
	_, err = events.Seal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "x"}, Extensions: map[string]any{"round": 1}})
	if !errors.Is(err, events.ErrExtensionNamespace) {
		t.Errorf("extension: %v", err)
	}
}

func TestValidator_CompatibleVersion(t *testing.T) {
	body := `{"protocol_version":"0.2","artifact_type":"CLAIM","payload":{"statement":"x"},"references":[]}`
	id, _ := canon.ID([]byte(body))
	raw := []byte(strings.Replace(body, `{`, `{"artifact_id":"`+id.String()+`",`, 1))
	if _, err := events.Validate(raw); !errors.Is(err, events.ErrVersionUnsupportedMinor) {
		t.Fatalf("default: %v", err)
	}
	a, err := events.NewValidator(events.WithCompatibleVersion("0.2")).Validate(raw)
	if err != nil || a.Version != "0.2" {
		t.Fatalf("registered rule: %v", err)
	}
	// The canon limits are the Validator's to set.
	small := events.NewValidator(events.WithCanonOptions(canon.WithMaxSize(32)))
	if _, err := small.Validate(raw); !errors.Is(err, canon.ErrSize) {
		t.Errorf("size: %v", err)
	}
}

func TestValidate_ErrorShape(t *testing.T) {
	_, err := events.Validate([]byte(`{"a":1,"a":2}`))
	var ce *canon.Error
	if !errors.As(err, &ce) || ce.Class != canon.MalformedInput {
		t.Fatalf("%v", err)
	}
	raw := sealRaw(t, `{"protocol_version":"0.1","artifact_type":"CLAIM","payload":{"statement":1},"references":[]}`)
	_, err = events.Validate(raw)
	var e *events.Error
	if !errors.As(err, &e) || e.Path != "/payload/statement" || e.Class != events.ClassInvalidArtifact {
		t.Fatalf("%v", err)
	}
	if got := e.Error(); got != "events: payload.statement must be a string with a non-space character: not a string (semantic.invalid_statement at /payload/statement)" {
		t.Errorf("message %q", got)
	}
}

func sealRaw(tb testing.TB, body string) []byte {
	tb.Helper()
	id, err := canon.ID([]byte(body))
	if err != nil {
		tb.Fatal(err)
	}
	return []byte(strings.Replace(body, `{`, `{"artifact_id":"`+id.String()+`",`, 1))
}

func TestCodes_Unique(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range events.Codes {
		if seen[e.Code] || !strings.Contains(e.Code, ".") {
			t.Errorf("code %q", e.Code)
		}
		seen[e.Code] = true
		if e.Class != events.ClassInvalidArtifact && e.Class != events.ClassUnsupportedVersion {
			t.Errorf("%s: class %q", e.Code, e.Class)
		}
	}
}

func ExampleSeal() {
	claim, err := events.Seal(events.Draft{
		Type:    events.TypeClaim,
		Payload: events.Claim{Statement: "The cache halves p99 latency."},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(claim.ID)
	fmt.Println(string(claim.Canonical))
	// Output:
	// sha256:67dab5f0af498f8192b44a71fe17f7197db2164dff7b21bec6fbecbec6bd7a5c
	// {"artifact_id":"sha256:67dab5f0af498f8192b44a71fe17f7197db2164dff7b21bec6fbecbec6bd7a5c","artifact_type":"CLAIM","payload":{"statement":"The cache halves p99 latency."},"protocol_version":"0.1","references":[]}
}

func ExampleValidate() {
	_, err := events.Validate([]byte(`{"artifact_id":"sha256:0000000000000000000000000000000000000000000000000000000000000000","artifact_type":"CLAIM","payload":{"statement":"x"},"protocol_version":"0.1","references":[]}`))
	var c interface {
		ErrorClass() string
		ErrorCode() string
	}
	if errors.As(err, &c) {
		fmt.Println(c.ErrorClass(), c.ErrorCode())
	}
	// Output:
	// artifact_identifier_mismatch id.mismatch
}
