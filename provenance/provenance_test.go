package provenance_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/parley-engine/parley/provenance"
)

var at = time.Date(2026, 5, 28, 12, 0, 0, 0, time.UTC)

func ts(d time.Duration) *time.Time { t := at.Add(-d); return &t }

func codes(v provenance.Verdict) []string {
	var c []string
	for _, r := range v.Reasons {
		c = append(c, r.Code)
	}
	return c
}

// §3: the eight identifiers and nothing else; §4: the two terminals.
func TestVocabulary(t *testing.T) {
	if len(provenance.Classes) != 8 || !slices.Contains(provenance.Classes, provenance.Unverified) {
		t.Fatal(provenance.Classes)
	}
	for _, c := range []string{"substrate.git.log", "substrate.grep", "substrate.code.read", "substrate.fs.mtime", "substrate.mcp.brief",
		"substrate.do.sse-count", "substrate.unix.peercred", "unverified-inference", "decayed-to-uncertainty"} {
		if !provenance.Known(c) || provenance.Effective(c, "1.0") != c {
			t.Errorf("%s not recognised", c)
		}
	}
	// Unknown identifiers are never silently interpreted: unverified-inference.
	for _, c := range []string{"substrate.http.get", "SUBSTRATE.GREP", "substrate.grep ", ""} {
		if provenance.Effective(c, "1.0") != provenance.Unverified {
			t.Errorf("%q was interpreted", c)
		}
	}
	// A newer minor adds classes only: known ones stay; a new major may
	// have removed some: everything fails closed.
	if provenance.Effective("substrate.grep", "1.3") != "substrate.grep" || provenance.Effective("substrate.new", "1.3") != provenance.Unverified ||
		provenance.Effective("substrate.grep", "2.0") != provenance.Unverified {
		t.Error("version anchors")
	}
}

func TestParse(t *testing.T) {
	s, err := provenance.ParseSet([]byte(`{"vocabulary":"1.0","annotations":[
		{"assertion":"CHANGELOG.md has an entry dated 2026-05-25","substrate_class":"substrate.code.read","observation_id":"sha256:e3b0","ts":"2026-05-28T11:40:00Z"},
		{"assertion":"x","substrate_class":"substrate.grep"}]}`))
	if err != nil || len(s.Annotations) != 2 || s.Annotations[0].TS == nil || s.Annotations[1].TS != nil || s.Annotations[1].ObservationID != "" {
		t.Fatalf("%+v %v", s, err)
	}
	for _, bad := range []string{`[]`, `{"vocabulary":"1","annotations":[]}`, `{"vocabulary":"1.0"}`, `{"vocabulary":"1.0","annotations":[],"x":1}`,
		`{"vocabulary":"1.0","annotations":[{"assertion":"a","substrate_class":"substrate.grep","ts":"yesterday"}]}`,
		`{"vocabulary":"1.0","annotations":[{"assertion":"a","substrate_class":"substrate.grep","confidence":"high"}]}`,
		`{"vocabulary":"1.0","annotations":[{"assertion":"","substrate_class":"substrate.grep"}]}`,
		`{"vocabulary":"1.0","vocabulary":"2.0","annotations":[]}`, `{"vocabulary":"1.0","annotations":[]} x`} {
		if _, err := provenance.ParseSet([]byte(bad)); !errors.Is(err, provenance.ErrMalformed) {
			t.Errorf("%s accepted (%v)", bad, err)
		}
	}
	// The in-line encoding of §5, the bracket spanning lines.
	anns, err := provenance.ParseInline("The file CHANGELOG.md contains an entry dated 2026-05-25.\n[substrate.code.read; observation-id=sha256:e3b0c4;\n ts=2026-05-28T11:40:00Z]\nIt is short. [unverified-inference]")
	if err != nil || len(anns) != 2 || anns[0].Class != "substrate.code.read" || anns[0].ObservationID != "sha256:e3b0c4" || anns[0].TS == nil ||
		anns[0].Assertion != "The file CHANGELOG.md contains an entry dated 2026-05-25." || anns[1].Class != provenance.Unverified {
		t.Fatalf("%+v %v", anns, err)
	}
	for _, bad := range []string{"no annotation", "x [substrate.grep", "[substrate.grep]", "x [substrate.grep; ts=now]", "x [substrate.grep; ts=2026-05-28T11:40:00Z; ts=2026-05-28T11:40:00Z]", "x [; ts=2026-05-28T11:40:00Z]", "x [substrate.grep; color=blue]"} {
		if _, err := provenance.ParseInline(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// §6 and §10, sentence by sentence.
func TestAdmit(t *testing.T) {
	p2 := provenance.Params{Window: 10 * time.Minute, K: 2, At: at}
	p3 := p2
	p3.K = 3
	ok := func(a provenance.Annotation) provenance.Verification {
		return provenance.Verification{Attempted: true, Verified: true}
	}
	set := func(anns ...provenance.Annotation) *provenance.Set {
		return &provenance.Set{Vocabulary: "1.0", Annotations: anns}
	}
	A := func(class, obs string, t *time.Time) provenance.Annotation {
		return provenance.Annotation{Assertion: "a", Class: class, ObservationID: obs, TS: t}
	}
	cases := []struct {
		name    string
		s       *provenance.Set
		p       provenance.Params
		v       provenance.Verifier
		admit   bool
		counted int
		code    string
	}{
		{"two distinct classes within W admit at k=2 without re-verification", set(A(provenance.CodeRead, "", ts(time.Minute)), A(provenance.GitLog, "", ts(2*time.Minute))), p2, nil, true, 2, ""},
		{"the same class twice counts once", set(A(provenance.CodeRead, "o1", ts(time.Minute)), A(provenance.CodeRead, "o2", ts(time.Minute))), p2, nil, false, 1, provenance.CodeDuplicateClass},
		{"an annotation without ts is never counted, k=2 included", set(A(provenance.CodeRead, "o", nil), A(provenance.GitLog, "o", ts(0))), p2, nil, false, 1, provenance.CodeNoTS},
		{"ts older than W is not counted", set(A(provenance.CodeRead, "", ts(11*time.Minute)), A(provenance.GitLog, "", ts(0))), p2, nil, false, 1, provenance.CodeOutsideWindow},
		{"ts after the evaluation time is not counted", set(A(provenance.CodeRead, "", ts(-time.Minute)), A(provenance.GitLog, "", ts(0))), p2, nil, false, 1, provenance.CodeOutsideWindow},
		{"unverified-inference is not admitted by virtue of the annotation", set(A(provenance.CodeRead, "", ts(0)), A(provenance.GitLog, "", ts(0)), A(provenance.Unverified, "", ts(0))), p2, nil, false, 2, provenance.CodeTerminal},
		{"decayed-to-uncertainty is not admitted either", set(A(provenance.DecayedToUncer, "", ts(0))), p2, nil, false, 0, provenance.CodeTerminal},
		{"an unknown class counts as unverified-inference", set(A(provenance.CodeRead, "", ts(0)), A(provenance.GitLog, "", ts(0)), A("substrate.web.fetch", "", ts(0))), p2, nil, false, 2, provenance.CodeUnknownClass},
		{"k=3: no observation id, not counted", set(A(provenance.CodeRead, "o", ts(0)), A(provenance.GitLog, "o", ts(0)), A(provenance.Grep, "", ts(0))), p3, ok, false, 2, provenance.CodeNoObservationID},
		{"k=3: sse-count never passes re-queryability", set(A(provenance.CodeRead, "o", ts(0)), A(provenance.GitLog, "o", ts(0)), A(provenance.SSECount, "o", ts(0))), p3, ok, false, 2, provenance.CodeNotRequeryable},
		{"k=3: peercred never passes re-queryability", set(A(provenance.CodeRead, "o", ts(0)), A(provenance.GitLog, "o", ts(0)), A(provenance.UnixPeercred, "o", ts(0))), p3, ok, false, 2, provenance.CodeNotRequeryable},
		{"k=3: mcp.brief fails unless configured stable", set(A(provenance.CodeRead, "o", ts(0)), A(provenance.GitLog, "o", ts(0)), A(provenance.MCPBrief, "o", ts(0))), p3, ok, false, 2, provenance.CodeNotRequeryable},
		{"k=3: unverified annotations do not count", set(A(provenance.CodeRead, "o", ts(0)), A(provenance.GitLog, "o", ts(0)), A(provenance.Grep, "o", ts(0))), p3, nil, false, 0, provenance.CodeNotReverified},
		{"k=3: three re-verified, re-queryable classes admit", set(A(provenance.CodeRead, "o", ts(0)), A(provenance.GitLog, "o", ts(0)), A(provenance.Grep, "o", ts(0))), p3, ok, true, 3, ""},
		{"sse-count still counts toward k=2", set(A(provenance.SSECount, "o", ts(0)), A(provenance.UnixPeercred, "", ts(0))), p2, nil, true, 2, ""},
		{"a fabricated annotation that re-verification rejects never counts", set(A(provenance.CodeRead, "sha256:forged", ts(0)), A(provenance.GitLog, "o", ts(0))), p2,
			func(a provenance.Annotation) provenance.Verification {
				return provenance.Verification{Attempted: true, Verified: a.ObservationID != "sha256:forged", Detail: "the bytes read hash to another id"}
			}, false, 1, provenance.CodeReverifyFailed},
	}
	for _, c := range cases {
		if c.p.K == 3 && c.name == "k=3: mcp.brief fails unless configured stable" {
			q := c.p
			q.MCPBriefRequeryable = true
			if v := provenance.Admit(c.s, q, c.v)[0]; !v.Admitted {
				t.Errorf("mcp.brief configured stable: %+v", v)
			}
		}
		vs := provenance.Admit(c.s, c.p, c.v)
		if len(vs) != 1 {
			t.Fatalf("%s: %d verdicts", c.name, len(vs))
		}
		v := vs[0]
		if v.Admitted != c.admit || len(v.Counted) != c.counted || (c.code != "" && !slices.Contains(codes(v), c.code)) {
			t.Errorf("%s: %+v", c.name, v)
		}
	}
	// Verdicts are per assertion, in order.
	s := &provenance.Set{Vocabulary: "1.0", Annotations: []provenance.Annotation{
		{Assertion: "b", Class: provenance.Grep, TS: ts(0)}, {Assertion: "a", Class: provenance.Grep, TS: ts(0)}, {Assertion: "b", Class: provenance.FSMtime, TS: ts(0)}}}
	vs := provenance.Admit(s, p2, nil)
	if len(vs) != 2 || vs[0].Assertion != "b" || !vs[0].Admitted || vs[1].Admitted {
		t.Errorf("%+v", vs)
	}
}
