package binding_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/parley-engine/parley/binding"
)

// FuzzEnvelope: any input is an envelope or a malformed one with findings,
// never a panic; an accepted envelope re-parses from its canonical form to
// the same digest, and a resolution parses or is refused the same way.
func FuzzEnvelope(f *testing.F) {
	for _, p := range []string{"testdata/envelopes.json", "testdata/resolutions.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		var s struct {
			Vectors []struct {
				Input    json.RawMessage
				InputRaw string `json:"input_raw"`
			}
		}
		json.Unmarshal(b, &s)
		for _, v := range s.Vectors {
			if v.InputRaw != "" {
				f.Add([]byte(v.InputRaw))
			} else {
				f.Add([]byte(v.Input))
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := binding.FromToolResult(b)
		if err != nil {
			if m, ok := err.(*binding.Malformed); !ok || len(m.Findings) == 0 {
				t.Fatalf("an error without findings: %v", err)
			}
		} else {
			e2, err := binding.ParseEnvelope(e.Canonical)
			if err != nil || e2.Digest != e.Digest {
				t.Fatalf("the canonical form does not re-parse to the same digest: %v", err)
			}
			if e.Question.RecommendedIdx >= len(e.Question.Options) || len(e.Question.Options) < 2 || len(e.Question.Options) > 4 {
				t.Fatalf("accepted %d options, recommended %d", len(e.Question.Options), e.Question.RecommendedIdx)
			}
		}
		if r, err := binding.ParseResolution(b); err == nil {
			r2, err := binding.ParseResolution(r.Wire())
			if err != nil || *r2 != *r {
				t.Fatalf("the wire form does not round-trip: %s %v", r.Wire(), err)
			}
		}
	})
}
