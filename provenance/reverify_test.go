package provenance_test

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/provenance"
)

// fakeVerifier answers by observation id ("ok" verified, "bad" failed,
// anything else unavailable) and records what it was asked.
type fakeVerifier struct{ asked []string }

func (f *fakeVerifier) verify(a provenance.Annotation) provenance.Verification {
	f.asked = append(f.asked, a.Class+"/"+a.ObservationID)
	switch a.ObservationID {
	case "ok":
		return provenance.Verification{Attempted: true, Verified: true, Detail: "matches"}
	case "bad":
		return provenance.Verification{Attempted: true, Detail: "differs"}
	}
	return provenance.Verification{Detail: "cannot re-query " + a.Class}
}

// Judging with the re-verifications made ahead (Reverify, then
// AdmitReverified) gives the verdicts of judging with the verifier itself
// (Admit), for every floor, with and without a verifier; and ahead of the
// judgement only the annotations a judgement may re-query are re-queried.
func TestAdmitReverifiedAgreesWithAdmit(t *testing.T) {
	A := func(as, class, id string, ts *time.Time) provenance.Annotation {
		return provenance.Annotation{Assertion: as, Class: class, ObservationID: id, TS: ts}
	}
	set := &provenance.Set{Vocabulary: "1.0", Annotations: []provenance.Annotation{
		A("a", provenance.CodeRead, "ok", ts(time.Minute)),
		A("a", provenance.GitLog, "ok", ts(2*time.Minute)),
		A("a", provenance.Grep, "bad", ts(time.Minute)),
		A("a", provenance.FSMtime, "ok", ts(time.Hour)), // outside a 10-minute window
		A("b", provenance.MCPBrief, "brief", ts(time.Minute)),
		A("b", provenance.CodeRead, "", ts(time.Minute)), // no observation id
		A("b", provenance.GitLog, "ok", nil),             // no ts
		A("b", provenance.GitLog, "ok", ts(time.Minute)),
		A("b", provenance.GitLog, "ok", ts(3*time.Minute)), // a duplicate class
		A("c", "substrate.web.fetch", "ok", ts(time.Minute)),
		A("d", provenance.Unverified, "ok", ts(time.Minute)),
		A("e", provenance.SSECount, "n=4", ts(time.Minute)),
		A("e", provenance.CodeRead, "ok", ts(time.Minute)),
	}}
	ahead := &fakeVerifier{}
	rs := set.Reverify(ahead.verify)
	if len(rs) != len(set.Annotations) {
		t.Fatalf("%d results for %d annotations", len(rs), len(set.Annotations))
	}
	want := []string{"substrate.code.read/ok", "substrate.git.log/ok", "substrate.grep/bad", "substrate.fs.mtime/ok", "substrate.mcp.brief/brief",
		"substrate.git.log/ok", "substrate.git.log/ok", "substrate.do.sse-count/n=4", "substrate.code.read/ok"}
	if !reflect.DeepEqual(ahead.asked, want) {
		t.Errorf("re-queried ahead %q, want %q", ahead.asked, want)
	}
	for _, k := range []int{1, 2, 3} {
		for _, mcp := range []bool{false, true} {
			p := provenance.Params{Window: 10 * time.Minute, K: k, At: at, MCPBriefRequeryable: mcp}
			live := &fakeVerifier{}
			got, exp := provenance.AdmitReverified(set, p, rs), provenance.Admit(set, p, live.verify)
			if !reflect.DeepEqual(got, exp) {
				t.Errorf("k=%d: ahead\n%+v\nlive\n%+v", k, got, exp)
			}
			for _, q := range live.asked {
				found := false
				for _, w := range want {
					found = found || q == w
				}
				if !found {
					t.Errorf("Admit re-queried %s, which Reverify did not", q)
				}
			}
			if got, exp := provenance.AdmitReverified(set, p, nil), provenance.Admit(set, p, nil); !reflect.DeepEqual(got, exp) {
				t.Errorf("k=%d without a verifier: ahead\n%+v\nlive\n%+v", k, got, exp)
			}
		}
	}
	// The verdicts depend on the results: a contradicted grep is not
	// counted; contradict the file read as well and the assertion falls
	// below the floor.
	p := provenance.Params{Window: 10 * time.Minute, K: 2, At: at}
	if v := provenance.AdmitReverified(set, p, rs)[0]; !v.Admitted || !hasCode(v, provenance.CodeReverifyFailed) || len(v.Counted) != 2 {
		t.Errorf("%+v", v)
	}
	bad := slices.Clone(rs)
	bad[0] = provenance.Verification{Attempted: true, Detail: "differs"}
	if v := provenance.AdmitReverified(set, p, bad)[0]; v.Admitted || !hasCode(v, provenance.CodeBelowFloor) {
		t.Errorf("%+v", v)
	}
	// Results missing past the end are not re-queried, as without a
	// verifier: nothing is counted toward k = 3 for them.
	p.K = 3
	if v := provenance.AdmitReverified(set, p, rs[:0:0])[4]; v.Admitted || len(v.Reverification) != 0 || !hasCode(v, provenance.CodeNotReverified) {
		t.Errorf("%+v", v)
	}
	if set.Reverify(nil) != nil {
		t.Error("results without a verifier")
	}
}

func hasCode(v provenance.Verdict, code string) bool { return slices.Contains(codes(v), code) }

// Reverify re-verifies only annotated EVIDENCE of a class that claims an
// observation, whose extension parses.
func TestReverifyArtifact(t *testing.T) {
	set := &provenance.Set{Vocabulary: "1.0", Annotations: []provenance.Annotation{
		{Assertion: "a", Class: provenance.CodeRead, ObservationID: "ok", TS: ts(time.Minute)}}}
	ev := func(class events.ProvenanceClass, ext any) *events.Artifact {
		c := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "s"}})
		d := events.Draft{Type: events.TypeEvidence, Payload: events.Evidence{Content: "x", ProvenanceClass: class},
			References: []events.Reference{{Target: c.ID, Relation: events.Supports}}}
		if ext != nil {
			d.Extensions = map[string]any{provenance.Extension: ext}
		}
		return events.MustSeal(d)
	}
	f := &fakeVerifier{}
	for _, c := range []struct {
		name string
		a    *events.Artifact
		n    int
	}{
		{"observed", ev(events.TraceVerifiedObservation, set), 1},
		{"external", ev(events.ExternalEvidence, set), 1},
		{"a hypothesis claims no observation", ev(events.Hypothesis, set), -1},
		{"no extension", ev(events.TraceVerifiedObservation, nil), -1},
		{"malformed", ev(events.TraceVerifiedObservation, map[string]any{"vocabulary": "1.0", "annotations": "none"}), -1},
		{"not evidence", events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "s"}, Extensions: map[string]any{provenance.Extension: set}}), -1},
		{"nil", nil, -1},
	} {
		rs := provenance.Reverify(c.a, f.verify)
		if (c.n < 0) != (rs == nil) || (c.n >= 0 && len(rs) != c.n) {
			t.Errorf("%s: %+v", c.name, rs)
		}
		if (c.n > 0) != provenance.Annotated(c.a) && c.name != "malformed" {
			t.Errorf("%s: Annotated %v", c.name, provenance.Annotated(c.a))
		}
	}
	if len(f.asked) != 2 {
		t.Errorf("asked %q", f.asked)
	}
	if provenance.Reverify(ev(events.TraceVerifiedObservation, set), nil) != nil {
		t.Error("results without a verifier")
	}
}
