package events_test

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
)

type semanticSuite struct {
	Count   int
	Vectors []struct {
		Name       string
		Input      string
		ArtifactID string `json:"artifact_id"`
		ErrorClass string `json:"error_class"`
		Code       string
	}
	RelationCount int `json:"relation_count"`
	Relations     []struct {
		Name             string
		Source, Target   string
		Relation         events.Relation
		SameDeliberation bool   `json:"same_deliberation"`
		ErrorClass       string `json:"error_class"`
		Code             string
	}
}

func loadSemantic(tb testing.TB) semanticSuite {
	tb.Helper()
	b, err := os.ReadFile("../testdata/vectors/semantic.json")
	if err != nil {
		tb.Fatal(err)
	}
	var s semanticSuite
	if err := json.Unmarshal(b, &s); err != nil {
		tb.Fatal(err)
	}
	if s.Count != len(s.Vectors) || s.RelationCount != len(s.Relations) {
		tb.Fatal("counts do not match")
	}
	return s
}

// classified is what both canon and events errors implement.
type classified interface {
	ErrorClass() string
	ErrorCode() string
}

func TestSemanticVectors(t *testing.T) {
	s := loadSemantic(t)
	if len(s.Vectors) < 60 {
		t.Fatalf("%d vectors", len(s.Vectors))
	}
	for _, v := range s.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			a, err := events.Validate([]byte(v.Input))
			if v.Code == "" {
				if err != nil {
					t.Fatal(err)
				}
				if a.ID.String() != v.ArtifactID {
					t.Errorf("id %s, want %s", a.ID, v.ArtifactID)
				}
				return
			}
			var c classified
			if !errors.As(err, &c) {
				t.Fatalf("err = %v, want %s", err, v.Code)
			}
			if c.ErrorCode() != v.Code || c.ErrorClass() != v.ErrorClass {
				t.Errorf("got %s/%s, want %s/%s (%v)", c.ErrorClass(), c.ErrorCode(), v.ErrorClass, v.Code, err)
			}
		})
	}
}

func TestRelationVectors(t *testing.T) {
	s := loadSemantic(t)
	for _, v := range s.Relations {
		t.Run(v.Name, func(t *testing.T) {
			src, err := events.Validate([]byte(v.Source))
			if err != nil {
				t.Fatal(err)
			}
			tgt, err := events.Validate([]byte(v.Target))
			if err != nil {
				t.Fatal(err)
			}
			err = events.CheckRelation(src, v.Relation, events.TargetOf(tgt), v.SameDeliberation)
			if v.Code == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var e *events.Error
			if !errors.As(err, &e) || e.Code != v.Code || e.Class != v.ErrorClass {
				t.Errorf("err = %v, want %s", err, v.Code)
			}
		})
	}
}

// Every code a vector names is a known code, and every semantic code has at
// least one vector.
func TestSemanticVectors_Coverage(t *testing.T) {
	s := loadSemantic(t)
	named := map[string]bool{}
	for _, v := range s.Vectors {
		named[v.Code] = true
	}
	for _, v := range s.Relations {
		named[v.Code] = true
	}
	known := map[string]bool{"": true}
	for _, e := range events.Codes {
		known[e.Code] = true
		if !named[e.Code] {
			t.Errorf("no vector for %s", e.Code)
		}
	}
	for _, e := range canon.Codes {
		known[e.Code] = true
	}
	for c := range named {
		if !known[c] {
			t.Errorf("vector names unknown code %q", c)
		}
	}
}
