package events_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
)

func FuzzValidate(f *testing.F) {
	s := loadSemantic(f)
	for _, v := range s.Vectors {
		f.Add([]byte(v.Input))
	}
	for _, r := range s.Relations {
		f.Add([]byte(r.Source))
		f.Add([]byte(r.Target))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := events.Validate(data)
		if err != nil {
			var c classified
			if !errors.As(err, &c) || c.ErrorClass() == "" || c.ErrorCode() == "" {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		// An accepted artifact's bytes are canonical, verify, and validate
		// to the same artifact.
		c, err := canon.Canonicalize(canon.AMD, a.Canonical)
		if err != nil || !bytes.Equal(c, a.Canonical) {
			t.Fatalf("not canonical: %v", err)
		}
		b, err := events.Validate(a.Canonical)
		if err != nil || b.ID != a.ID || b.Type != a.Type || len(b.References) != len(a.References) {
			t.Fatalf("revalidation differs: %v", err)
		}
		if !a.Type.Valid() || a.Payload == nil || a.Version != events.ProtocolVersion {
			t.Fatalf("accepted %+v", a)
		}
		for _, r := range a.References {
			if !r.Relation.Valid() {
				t.Fatalf("relation %q", r.Relation)
			}
		}
	})
}
