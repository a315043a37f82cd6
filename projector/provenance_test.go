package projector_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/gittest"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/substrate"
	supervisor "github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// timedFeed applies messages a second apart from t0, each prepared with
// verify first (Projection.Prepare), as a runner does ahead of the fold.
type timedFeed struct {
	t      testing.TB
	p      *projector.Projection
	seq    uint64
	verify provenance.Verifier
}

func (f *timedFeed) now() time.Time { return t0.Add(time.Duration(f.seq) * time.Second) }

func (f *timedFeed) raw(subject string, data []byte) projector.Outcome {
	f.seq++
	m := projector.Msg{Seq: f.seq, Subject: subject, Data: data, Time: f.now()}
	f.p.Prepare(&m, f.verify)
	return f.p.Apply(m)
}

func (f *timedFeed) art(a *events.Artifact) {
	f.t.Helper()
	if o := f.raw(wire.ArtifactSubject(delib, "a"), a.Canonical); o.Rejection != nil || len(o.Accepted) != 1 {
		f.t.Fatalf("%+v", o)
	}
}

// observedRepo is a directory with a committed CHANGELOG.md; it returns
// the directory and the commit.
func observedRepo(t *testing.T) (string, string) {
	dir := t.TempDir()
	return dir, gittest.Changelog(t, dir)
}

func evidence(class events.ProvenanceClass, supports canon.Digest, content string, set *provenance.Set) *events.Artifact {
	d := events.Draft{Type: events.TypeEvidence, Payload: events.Evidence{Content: content, ProvenanceClass: class},
		References: []events.Reference{{Target: supports, Relation: events.Supports}}}
	if set != nil {
		d.Extensions = map[string]any{provenance.Extension: set}
	}
	return events.MustSeal(d)
}

// annotated is the done-when evidence: a file read and a git commit,
// observed ts before at.
func annotated(t *testing.T, rv *substrate.Reverifier, head string, at time.Time, readID string) *provenance.Set {
	t.Helper()
	ts := at.Add(-time.Minute)
	read := provenance.Locator{Path: "CHANGELOG.md", Offset: 3, Limit: 2}
	if readID == "" {
		id, err := rv.Observe(provenance.CodeRead, read)
		if err != nil {
			t.Fatal(err)
		}
		readID = id
	}
	const as = "CHANGELOG.md has an entry dated 2026-05-25"
	return &provenance.Set{Vocabulary: "1.0", Annotations: []provenance.Annotation{
		{Assertion: as, Class: provenance.CodeRead, ObservationID: readID, TS: &ts, Locator: &read},
		{Assertion: as, Class: provenance.GitLog, ObservationID: head, TS: &ts, Locator: &provenance.Locator{Ref: "main", Path: "CHANGELOG.md", Pattern: "2026-05-25"}},
	}}
}

func codesOf(r closure.Result) []string {
	var c []string
	for _, f := range r.Findings {
		c = append(c, f.Code)
	}
	return c
}

// A charter that requires admissible observations: evidence re-verified
// against the engine's root is admitted at k = 2 and a final decision
// resting on it verifies; evidence whose file read the substrate does not
// confirm, or that carries no annotations, is flagged and a final decision
// resting on it through supports does not verify.
func TestProvenancePolicy(t *testing.T) {
	dir, head := observedRepo(t)
	rv, err := substrate.NewReverifier(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rv.Close()
	f := &timedFeed{t: t, p: projector.New(projector.Options{Rules: supervisor.Rules{}}), verify: rv.Verify}
	if o := f.raw(wire.ControlSubject(delib), []byte(`{"op":"open","charter":{"title":"t","policy":{"provenance":{"k":2,"window":"10m"}}}}`)); o.Rejection != nil {
		t.Fatal(o.Rejection)
	}
	d := f.p.Deliberation(delib)
	if pp := d.Policy().Provenance; pp == nil || pp.K != 2 || len(pp.Require) != 2 {
		t.Fatalf("policy %+v", pp)
	}

	// Admissible: re-verified, admitted at k = 2.
	c1 := claim("the changelog has an entry dated 2026-05-25")
	f.art(c1)
	e1 := evidence(events.TraceVerifiedObservation, c1.ID, "read and committed", annotated(t, rv, head, f.now(), ""))
	f.art(e1)
	n, _ := d.Node(e1.ID)
	if n.Provenance == nil || !n.Provenance.Admissible || n.Provenance.K != 2 || len(n.Provenance.Assertions) != 1 ||
		len(n.Provenance.Assertions[0].Reverification) != 2 || n.Provenance.Assertions[0].Reverification[1].Result != provenance.ResultVerified {
		t.Fatalf("%+v", n.Provenance)
	}
	d1 := decision(events.Final, c1.ID)
	f.art(d1)
	if r := d.Verify(d1.ID, 0, closure.Limits{}); !r.OK {
		t.Fatalf("%+v", r)
	}

	// Fabricated: the file read hashes to something else.
	c2 := claim("the changelog has an entry dated 2026-05-24")
	f.art(c2)
	e2 := evidence(events.TraceVerifiedObservation, c2.ID, "a reading that never happened",
		annotated(t, rv, head, f.now(), "sha256:0000000000000000000000000000000000000000000000000000000000000000"))
	f.art(e2)
	n, _ = d.Node(e2.ID)
	if n.Provenance == nil || n.Provenance.Admissible || !strings.Contains(n.Provenance.Problem, provenance.CodeBelowFloor) ||
		!slices.ContainsFunc(n.Provenance.Assertions[0].Reasons, func(r provenance.Reason) bool { return r.Code == provenance.CodeReverifyFailed }) {
		t.Fatalf("%+v", n.Provenance)
	}
	// A REVISION between: the decision rests on the evidence through the
	// revised claim.
	rev := events.MustSeal(events.Draft{Type: events.TypeRevision, Payload: events.RevisionPayload{Statement: "revised"},
		References: []events.Reference{{Target: c2.ID, Relation: events.Revises}}})
	f.art(rev)
	d2 := decision(events.Final, rev.ID)
	f.art(d2)
	r := d.Verify(d2.ID, 0, closure.Limits{})
	if r.OK || !slices.Equal(codesOf(r), []string{closure.CodeInadmissible}) || r.Findings[0].ArtifactID != e2.ID.String() ||
		!strings.Contains(r.Findings[0].Message, "CLAIM #") || r.Findings[0].Ordinal == 0 || r.Findings[0].Position == 0 {
		t.Fatalf("%+v", r)
	}
	// A provisional decision gets the finding as a warning.
	p2 := decision(events.Provisional, rev.ID)
	f.art(p2)
	if r := d.Verify(p2.ID, 0, closure.Limits{}); !r.OK || r.Findings[0].Severity != closure.Warning {
		t.Fatalf("%+v", r)
	}

	// No annotations at all; and evidence of a class the policy does not
	// concern is not judged.
	c3 := claim("three")
	f.art(c3)
	e3 := evidence(events.ExternalEvidence, c3.ID, "trust me", nil)
	f.art(e3)
	e4 := evidence(events.ModelGeneratedAnalysis, c3.ID, "my own arithmetic", nil)
	f.art(e4)
	if n, _ := d.Node(e3.ID); n.Provenance == nil || n.Provenance.Admissible || !strings.Contains(n.Provenance.Problem, "no parley.provenance") {
		t.Fatalf("%+v", n.Provenance)
	}
	if n, _ := d.Node(e4.ID); n.Provenance != nil {
		t.Fatalf("%+v", n.Provenance)
	}
	// Inadmissible evidence published after a decision does not change
	// that decision's own validity.
	f.art(evidence(events.ExternalEvidence, c1.ID, "later and unannotated", nil))
	if r := d.Verify(d1.ID, 0, closure.Limits{}); !r.OK {
		t.Fatalf("%+v", r)
	}
	if got := d.Inadmissible(); len(got) != 3 || got[0] != e2.ID || got[1] != e3.ID {
		t.Fatalf("inadmissible %v", got)
	}

	// The supervisor: a FAILURE for d2, the decision resting on e2... and
	// completion for d1, the first final decision that verifies.
	var codes []string
	for _, e := range supervisor.Decide(d, f.now()) {
		if fl, ok := e.Artifact.Payload.(*events.Failure); ok {
			codes = append(codes, fl.Code)
		}
		if tm := e.Artifact.TerminationPayload(); tm != nil && tm.State != events.Completed {
			t.Errorf("termination %+v", tm)
		}
	}
	if len(codes) != 0 {
		// d1 verifies first in stream order and completes the deliberation.
		t.Fatalf("failures %v before completion", codes)
	}

	// A snapshot keeps the judgements (they are not recomputed against
	// substrates that may have changed since).
	var buf bytes.Buffer
	if err := f.p.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	q, err := projector.ReadSnapshot(&buf, projector.Options{Rules: supervisor.Rules{}})
	if err != nil {
		t.Fatal(err)
	}
	qd := q.Deliberation(delib)
	if !slices.Equal(qd.Inadmissible(), d.Inadmissible()) || qd.Verify(d2.ID, 0, closure.Limits{}).OK {
		t.Fatal("the snapshot lost the provenance judgements")
	}
	if n, _ := qd.Node(e1.ID); n.Provenance == nil || !n.Provenance.Admissible {
		t.Fatal("the snapshot lost an admissible judgement")
	}
}

// The supervisor refuses to complete on a final decision that rests on
// unverifiable evidence: it writes a FAILURE naming the finding.
func TestProvenancePolicy_Supervisor(t *testing.T) {
	dir, head := observedRepo(t)
	rv, _ := substrate.NewReverifier(dir)
	defer rv.Close()
	f := &timedFeed{t: t, p: projector.New(projector.Options{Rules: supervisor.Rules{}}), verify: rv.Verify}
	f.raw(wire.ControlSubject(delib), []byte(`{"op":"open","charter":{"title":"t","policy":{"provenance":{"require":["TRACE_VERIFIED_OBSERVATION"]}}}}`))
	c := claim("c")
	f.art(c)
	// The file changes after the reading the annotation claims.
	set := annotated(t, rv, head, f.now(), "")
	os.WriteFile(filepath.Join(dir, "CHANGELOG.md"), []byte("# Changelog\n\n## 2026-05-25\n- first entry, rewritten\n"), 0o644)
	fresh, _ := substrate.NewReverifier(dir)
	defer fresh.Close()
	g := &timedFeed{t: t, p: projector.New(projector.Options{Rules: supervisor.Rules{}}), verify: fresh.Verify}
	g.raw(wire.ControlSubject(delib), []byte(`{"op":"open","charter":{"title":"t","policy":{"provenance":{"require":["TRACE_VERIFIED_OBSERVATION"]}}}}`))
	g.art(c)
	e := evidence(events.TraceVerifiedObservation, c.ID, "read", set)
	g.art(e)
	dec := decision(events.Final, c.ID)
	g.art(dec)
	d := g.p.Deliberation(delib)
	var failures []string
	for _, em := range supervisor.Decide(d, g.now()) {
		if fl, ok := em.Artifact.Payload.(*events.Failure); ok {
			failures = append(failures, fl.Code)
		} else {
			t.Errorf("unexpected %s", em.Artifact.Type)
		}
	}
	if !slices.Equal(failures, []string{closure.CodeInadmissible}) {
		t.Fatalf("failures %v", failures)
	}
}

// Window: judged at the time the EVIDENCE reached the stream, with the
// charter's W.
func TestProvenancePolicy_Window(t *testing.T) {
	f := &timedFeed{t: t, p: projector.New(projector.Options{Rules: supervisor.Rules{}})}
	f.raw(wire.ControlSubject(delib), []byte(`{"op":"open","charter":{"title":"t","policy":{"provenance":{"k":1,"window":"30s"}}}}`))
	c := claim("c")
	mk := func(age time.Duration, at time.Time) *events.Artifact {
		ts := at.Add(-age)
		return evidence(events.ExternalEvidence, c.ID, "seen "+age.String(), &provenance.Set{Vocabulary: "1.0", Annotations: []provenance.Annotation{
			{Assertion: "x", Class: provenance.MCPBrief, ObservationID: "brief", TS: &ts}}})
	}
	// Each is judged at its own stream time (positions 3 and 4), with the
	// window of the charter.
	f.raw(wire.ArtifactSubject(delib, "a"), c.Canonical)
	fresh, stale := mk(10*time.Second, t0.Add(3*time.Second)), mk(40*time.Second, t0.Add(4*time.Second))
	for _, e := range []*events.Artifact{fresh, stale} {
		if o := f.raw(wire.ArtifactSubject(delib, "a"), e.Canonical); len(o.Accepted) != 1 {
			t.Fatalf("%+v", o)
		}
	}
	d := f.p.Deliberation(delib)
	if n, _ := d.Node(fresh.ID); n.Provenance == nil || !n.Provenance.Admissible || !n.Provenance.JudgedAt.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("%+v", n.Provenance)
	}
	if n, _ := d.Node(stale.ID); n.Provenance == nil || n.Provenance.Admissible || !strings.Contains(n.Provenance.Problem, provenance.CodeBelowFloor) {
		t.Fatalf("%+v", n.Provenance)
	}
}

// The fold judges by the re-verification it is given (Msg.Reverified) and
// re-queries nothing itself: the same EVIDENCE is admitted by the
// discipline alone without results, refused when the results contradict a
// reading, and the judgement is kept across a snapshot.
func TestProvenancePolicy_ReverifiedInput(t *testing.T) {
	ts := t0.Add(-time.Minute)
	set := &provenance.Set{Vocabulary: "1.0", Annotations: []provenance.Annotation{
		{Assertion: "x", Class: provenance.CodeRead, ObservationID: "sha256:00", TS: &ts, Locator: &provenance.Locator{Path: "nowhere"}},
		{Assertion: "x", Class: provenance.GitLog, ObservationID: strings.Repeat("a", 40), TS: &ts, Locator: &provenance.Locator{Ref: "main"}}}}
	contradicted := []provenance.Verification{{Attempted: true, Detail: "the file says otherwise"}, {Attempted: true, Verified: true, Detail: "reachable"}}
	open := func() *projector.Projection {
		p := projector.New(projector.Options{Rules: supervisor.Rules{}})
		p.Apply(projector.Msg{Seq: 1, Subject: wire.ControlSubject(delib), Data: []byte(`{"op":"open","charter":{"title":"t","policy":{"provenance":{"k":2}}}}`), Time: t0})
		return p
	}
	art := func(seq uint64, a *events.Artifact, rs []provenance.Verification) projector.Msg {
		return projector.Msg{Seq: seq, Subject: wire.ArtifactSubject(delib, "a"), Data: a.Canonical, Time: t0.Add(time.Duration(seq) * time.Second), Reverified: rs}
	}
	judged := func(p *projector.Projection, id canon.Digest) *projector.Admissibility {
		t.Helper()
		n, ok := p.Deliberation(delib).Node(id)
		if !ok || n.Provenance == nil {
			t.Fatalf("not judged: %+v", n)
		}
		return n.Provenance
	}
	c := claim("c")
	e := evidence(events.TraceVerifiedObservation, c.ID, "read", set)

	p := open()
	p.Apply(art(2, c, nil))
	p.Apply(art(3, e, nil))
	if adm := judged(p, e.ID); !adm.Admissible || len(adm.Assertions[0].Reverification) != 0 {
		t.Fatalf("without results: %+v", adm)
	}
	p = open()
	p.Apply(art(2, c, nil))
	p.Apply(art(3, e, contradicted))
	if adm := judged(p, e.ID); adm.Admissible || !strings.Contains(adm.Assertions[0].Reverification[0].Detail, "otherwise") ||
		!slices.ContainsFunc(adm.Assertions[0].Reasons, func(r provenance.Reason) bool { return r.Code == provenance.CodeReverifyFailed }) {
		t.Fatalf("with contradicting results: %+v", adm)
	}

	// The judgement survives a snapshot.
	var buf bytes.Buffer
	if err := p.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	q, err := projector.ReadSnapshot(&buf, projector.Options{Rules: supervisor.Rules{}})
	if err != nil {
		t.Fatal(err)
	}
	if adm := judged(q, e.ID); adm.Admissible || !adm.JudgedAt.Equal(t0.Add(3*time.Second)) || len(adm.Assertions[0].Reverification) != 2 {
		t.Fatalf("restored from a snapshot: %+v", adm)
	}
}

// Prepare re-verifies, before the fold, exactly what the fold will judge:
// an annotated EVIDENCE of a class the deliberation's policy requires; not
// a claim, not the EVIDENCE of a deliberation without the policy or of a
// class it does not require, nor anything without a verifier.
func TestPrepare(t *testing.T) {
	ts := t0.Add(-time.Minute)
	set := &provenance.Set{Vocabulary: "1.0", Annotations: []provenance.Annotation{
		{Assertion: "x", Class: provenance.CodeRead, ObservationID: "sha256:00", TS: &ts, Locator: &provenance.Locator{Path: "f"}}}}
	calls := 0
	verify := func(provenance.Annotation) provenance.Verification {
		calls++
		return provenance.Verification{Attempted: true, Verified: true}
	}
	const plain = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c"
	p := projector.New(projector.Options{Rules: supervisor.Rules{}})
	p.Apply(projector.Msg{Seq: 1, Subject: wire.ControlSubject(delib), Data: []byte(`{"op":"open","charter":{"title":"t","policy":{"provenance":{"require":["EXTERNAL_EVIDENCE"]}}}}`), Time: t0})
	p.Apply(projector.Msg{Seq: 2, Subject: wire.ControlSubject(plain), Data: []byte(`{"op":"open","charter":{"title":"t"}}`), Time: t0})
	c := claim("c")
	for _, tc := range []struct {
		name, delib string
		a           *events.Artifact
		verify      provenance.Verifier
		want        int
	}{
		{"required evidence", delib, evidence(events.ExternalEvidence, c.ID, "seen", set), verify, 1},
		{"no verifier", delib, evidence(events.ExternalEvidence, c.ID, "seen", set), nil, -1},
		{"a class the policy does not require", delib, evidence(events.TraceVerifiedObservation, c.ID, "seen", set), verify, -1},
		{"a deliberation without the policy", plain, evidence(events.ExternalEvidence, c.ID, "seen", set), verify, -1},
		{"a claim", delib, c, verify, -1},
	} {
		calls = 0
		m := projector.Msg{Seq: 3, Subject: wire.ArtifactSubject(tc.delib, "a"), Data: tc.a.Canonical, Time: t0}
		p.Prepare(&m, tc.verify)
		if (tc.want < 0) != (m.Reverified == nil) || (tc.want >= 0 && (len(m.Reverified) != tc.want || calls != tc.want)) {
			t.Errorf("%s: %+v, %d calls", tc.name, m.Reverified, calls)
		}
		if tc.want >= 0 && (m.Artifact == nil || m.Artifact.ID != tc.a.ID) {
			t.Errorf("%s: not validated ahead", tc.name)
		}
	}
}

// A charter's provenance policy is checked: a misspelt member or a bad
// value must not silently mean no requirement.
func TestProvenancePolicy_Invalid(t *testing.T) {
	for _, pol := range []string{`{"provenance":{"require":["HYPOTHESIS"]}}`, `{"provenance":{"k":-1}}`, `{"provenance":{"k":9}}`,
		`{"provenance":{"window":"soon"}}`, `{"provenance":{"window":"-1m"}}`, `{"provenance":{"floor":3}}`, `{"provenance":[]}`} {
		f := &timedFeed{t: t, p: projector.New(projector.Options{Rules: supervisor.Rules{}})}
		o := f.raw(wire.ControlSubject(delib), []byte(`{"op":"open","charter":{"title":"t","policy":`+pol+`}}`))
		if o.Rejection == nil || o.Rejection.Code != projector.CodeControlInvalid {
			t.Errorf("%s: %+v", pol, o)
		}
	}
	// Engine-wide defaults apply where a charter is silent.
	f := &timedFeed{t: t, p: projector.New(projector.Options{Rules: supervisor.Rules{}, Defaults: projector.Defaults{Policy: projector.Policy{Provenance: &projector.ProvenancePolicy{K: 3}}}})}
	f.raw(wire.ControlSubject(delib), []byte(`{"op":"open","charter":{"title":"t"}}`))
	if pp := f.p.Deliberation(delib).Policy().Provenance; pp == nil || pp.K != 3 || pp.Window != "" {
		t.Fatalf("%+v", pp)
	}
}

// BenchmarkFoldProvenance: folding CLAIM + EVIDENCE pairs whose EVIDENCE
// carries a file read (each of a different line) and a git commit, in a
// deliberation whose charter requires admissible observations; beside the
// same messages under a charter without the policy. "none" and
// "provenance" time the fold alone (Apply, which validates): the
// re-verification was made before, by the engine's re-verifier
// (Msg.Reverified), as a runner does outside any lock.
// "provenance+reverify" adds that re-verification (Prepare with a cold
// cache) to each fold: the work the edge does. Reported per EVIDENCE.
func BenchmarkFoldProvenance(b *testing.B) {
	dir := b.TempDir()
	gittest.Init(b, dir)
	var text strings.Builder
	for i := range 1000 {
		text.WriteString("entry " + strconv.Itoa(i) + "\n")
	}
	gittest.Write(b, dir, "CHANGELOG.md", text.String())
	head := gittest.Commit(b, dir, "changelog")
	rv, err := substrate.NewReverifier(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer rv.Close()
	ts := t0.Add(-time.Minute)
	var msgs []projector.Msg
	for i := range 1000 {
		c := claim("entry " + strconv.Itoa(i))
		read := provenance.Locator{Path: "CHANGELOG.md", Offset: i + 1, Limit: 1}
		id, err := rv.Observe(provenance.CodeRead, read)
		if err != nil {
			b.Fatal(err)
		}
		set := &provenance.Set{Vocabulary: "1.0", Annotations: []provenance.Annotation{
			{Assertion: "x", Class: provenance.CodeRead, ObservationID: id, TS: &ts, Locator: &read},
			{Assertion: "x", Class: provenance.GitLog, ObservationID: head, TS: &ts, Locator: &provenance.Locator{Ref: "main"}}}}
		e := evidence(events.TraceVerifiedObservation, c.ID, "read "+strconv.Itoa(i), set)
		for _, a := range []*events.Artifact{c, e} {
			msgs = append(msgs, projector.Msg{Seq: uint64(len(msgs) + 2), Subject: wire.ArtifactSubject(delib, "a"), Data: a.Canonical, Time: t0,
				Reverified: provenance.Reverify(a, rv.Verify)})
		}
	}
	for _, mode := range []string{"none", "provenance", "provenance+reverify"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				p := projector.New(projector.Options{Rules: supervisor.Rules{}})
				pol := `{}`
				if mode != "none" {
					pol = `{"provenance":{"k":2}}`
				}
				p.Apply(projector.Msg{Seq: 1, Subject: wire.ControlSubject(delib), Data: []byte(`{"op":"open","charter":{"title":"t","policy":` + pol + `}}`), Time: t0})
				var cold *substrate.Reverifier
				if mode == "provenance+reverify" {
					cold, _ = substrate.NewReverifier(dir)
				}
				for _, m := range msgs {
					if cold != nil {
						m = projector.Msg{Seq: m.Seq, Subject: m.Subject, Data: m.Data, Time: m.Time}
						p.Prepare(&m, cold.Verify)
					}
					if o := p.Apply(m); len(o.Accepted) != 1 {
						b.Fatal(o)
					}
				}
				if mode != "none" && len(p.Deliberation(delib).Inadmissible()) != 0 {
					b.Fatal("inadmissible")
				}
				if cold != nil {
					cold.Close()
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)/2), "ns/evidence")
		})
	}
}
