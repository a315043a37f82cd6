package provenance_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/parley-engine/parley/provenance"
)

// The JSON-structured encoding of §5: one object or an array of them.
func TestParseStructured(t *testing.T) {
	s, err := provenance.ParseStructured([]byte(`{
	  "assertion": "the file CHANGELOG.md contains an entry dated 2026-05-25",
	  "provenance": {"substrate_class": "substrate.code.read", "observation_id": "sha256:e3b0c4", "ts": "2026-05-28T11:40:00Z"}}`))
	if err != nil || s.Vocabulary != provenance.Vocabulary || len(s.Annotations) != 1 || s.Annotations[0].Class != provenance.CodeRead ||
		s.Annotations[0].Assertion != "the file CHANGELOG.md contains an entry dated 2026-05-25" || s.Annotations[0].TS == nil {
		t.Fatalf("%+v %v", s, err)
	}
	s, err = provenance.ParseStructured([]byte(`[{"assertion":"a","provenance":{"substrate_class":"substrate.grep","locator":{"path":"x","pattern":"y"}}},
		{"assertion":"b","provenance":{"substrate_class":"decayed-to-uncertainty"}}]`))
	if err != nil || len(s.Annotations) != 2 || s.Annotations[0].Locator == nil || s.Annotations[0].Locator.Pattern != "y" {
		t.Fatalf("%+v %v", s, err)
	}
	for _, bad := range []string{`{"assertion":"a"}`, `{"assertion":"a","provenance":{"substrate_class":"substrate.grep"},"confidence":0}`,
		`{"provenance":{"substrate_class":"substrate.grep"}}`, `{"assertion":"a","provenance":{"substrate_class":"substrate.grep","assertion":"b"}}`,
		`[1]`, `{"assertion":"a","assertion":"b","provenance":{"substrate_class":"substrate.grep"}}`, `{"assertion":"a","provenance":{"substrate_class":"substrate.grep","ts":"noon"}}`} {
		if _, err := provenance.ParseStructured([]byte(bad)); !errors.Is(err, provenance.ErrMalformed) {
			t.Errorf("%s accepted (%v)", bad, err)
		}
	}
}

// Locators, in both encodings, parsed strictly.
func TestParseLocator(t *testing.T) {
	s, err := provenance.ParseSet([]byte(`{"vocabulary":"1.0","annotations":[{"assertion":"a","substrate_class":"substrate.code.read",
		"observation_id":"sha256:00","locator":{"path":"CHANGELOG.md","offset":3,"limit":2}}]}`))
	if err != nil || !reflect.DeepEqual(s.Annotations[0].Locator, &provenance.Locator{Path: "CHANGELOG.md", Offset: 3, Limit: 2}) {
		t.Fatalf("%+v %v", s, err)
	}
	for _, bad := range []string{`{"path":""}`, `{"offset":-1}`, `{"offset":1.5}`, `{"limit":"2"}`, `{"file":"x"}`, `[]`, `{"ref":7}`} {
		_, err := provenance.ParseSet([]byte(`{"vocabulary":"1.0","annotations":[{"assertion":"a","substrate_class":"substrate.grep","locator":` + bad + `}]}`))
		if !errors.Is(err, provenance.ErrMalformed) {
			t.Errorf("locator %s accepted (%v)", bad, err)
		}
	}
	anns, err := provenance.ParseInline("CHANGELOG.md has the entry. [substrate.git.log; observation-id=0123abcd; repo=.; ref=main; path=CHANGELOG.md;\n pattern=2026-05-25; ts=2026-05-28T11:40:00Z]")
	if err != nil || !reflect.DeepEqual(anns[0].Locator, &provenance.Locator{Repo: ".", Ref: "main", Path: "CHANGELOG.md", Pattern: "2026-05-25"}) {
		t.Fatalf("%+v %v", anns, err)
	}
	for _, bad := range []string{"x [substrate.code.read; offset=-1]", "x [substrate.code.read; limit=ten]", "x [substrate.code.read; path=a; path=b]"} {
		if _, err := provenance.ParseInline(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParse: no input panics or hangs any parser, and an accepted set
// survives a round trip through its JSON form unchanged.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"vocabulary":"1.0","annotations":[{"assertion":"a","substrate_class":"substrate.code.read","observation_id":"sha256:00","ts":"2026-05-28T11:40:00Z","locator":{"path":"x","offset":1,"limit":2}}]}`,
		`{"assertion":"a","provenance":{"substrate_class":"substrate.grep"}}`,
		"The file contains it. [substrate.code.read; observation-id=sha256:e3; ts=2026-05-28T11:40:00Z; path=a]",
		`[{"assertion":"a","provenance":{"substrate_class":"unverified-inference"}}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		provenance.ParseInline(string(b))
		provenance.ParseStructured(b)
		s, err := provenance.ParseSet(b)
		if err != nil {
			if !errors.Is(err, provenance.ErrMalformed) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := provenance.ParseSet(out)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", out, err)
		}
		if len(s2.Annotations) != len(s.Annotations) {
			t.Fatalf("round trip changed the set: %s", out)
		}
		for i := range s.Annotations {
			a, b := s.Annotations[i], s2.Annotations[i]
			if a.Assertion != b.Assertion || a.Class != b.Class || a.ObservationID != b.ObservationID || (a.TS == nil) != (b.TS == nil) ||
				(a.TS != nil && !a.TS.Equal(*b.TS)) || !reflect.DeepEqual(a.Locator, b.Locator) {
				t.Fatalf("round trip changed annotation %d: %+v %+v", i, a, b)
			}
		}
	})
}
