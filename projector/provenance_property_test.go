package projector_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/provenance"
	supervisor "github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

// provenancePolicies are the charters' policy.provenance sections the
// random streams open deliberations with (streamOf): the defaults, every
// floor, both required classes alone, short and long windows.
var provenancePolicies = []string{
	`{}`,
	`{"k":1}`,
	`{"k":2,"window":"5m"}`,
	`{"k":3,"window":"30m"}`,
	`{"require":["EXTERNAL_EVIDENCE"],"k":1,"window":"1h"}`,
	`{"require":["TRACE_VERIFIED_OBSERVATION"],"k":3,"mcp_brief_requeryable":true}`,
}

// fakeKey is what fakeVerify reads of an annotation.
func fakeKey(a provenance.Annotation) string { return a.Class + " " + a.ObservationID }

// fakeObservations is what the fake verifier answers, keyed by an
// annotation's substrate class and observation id: confirmed (some from a
// cache), contradicted, or not re-queryable here. An annotation it does
// not hold is unavailable.
var fakeObservations = func() map[string]provenance.Verification {
	t := map[string]provenance.Verification{}
	for _, c := range provenance.Classes {
		t[c+" ok"] = provenance.Verification{Attempted: true, Verified: true, Detail: "matches"}
		t[c+" cached"] = provenance.Verification{Attempted: true, Verified: true, Cached: true, Detail: "matches (cached)"}
		t[c+" bad"] = provenance.Verification{Attempted: true, Detail: "the substrate says otherwise"}
		t[c+" gone"] = provenance.Verification{Detail: "no root holds it"}
	}
	return t
}()

// fakeVerify is a pure provenance.Verifier: it answers from
// fakeObservations, so a fold prepared with it is deterministic.
func fakeVerify(a provenance.Annotation) provenance.Verification {
	if v, ok := fakeObservations[fakeKey(a)]; ok {
		return v
	}
	return provenance.Verification{Detail: "unknown observation " + a.ObservationID}
}

var (
	evidenceClasses = []events.ProvenanceClass{events.TraceVerifiedObservation, events.TraceVerifiedObservation, events.ExternalEvidence,
		events.ExternalEvidence, events.ModelGeneratedAnalysis, events.Hypothesis}
	substrateClasses = append(append([]string(nil), provenance.Classes...), "substrate.not.in.vocabulary")
	observationIDs   = []string{"ok", "ok", "cached", "bad", "gone", "never observed", ""}
)

// annotatedEvidence is an EVIDENCE supporting target, of a random class,
// that mostly carries a parley.provenance extension: one or two
// assertions, each annotated by a few substrate classes with observation
// ids fakeVerify confirms, contradicts or cannot answer, timestamps in
// the window, outside it, in the future or missing; or an extension that
// does not parse, or annotates nothing; or one that is well grounded.
func annotatedEvidence(r *rand.Rand, target canon.Digest, now time.Time) *events.Artifact {
	d := events.Draft{Type: events.TypeEvidence,
		Payload:    events.Evidence{Content: fmt.Sprint("ev ", r.IntN(1000)), ProvenanceClass: evidenceClasses[r.IntN(len(evidenceClasses))]},
		References: []events.Reference{{Target: target, Relation: events.Supports}}}
	switch k := r.IntN(10); {
	case k == 0: // none
	case k == 1:
		d.Extensions = map[string]any{provenance.Extension: map[string]any{"vocabulary": "1.0", "annotations": "none"}}
	case k == 2:
		d.Extensions = map[string]any{provenance.Extension: &provenance.Set{Vocabulary: "1.0", Annotations: []provenance.Annotation{}}}
	case k == 3:
		// Well grounded: three re-queryable classes, recent, confirmed
		// (the third not always).
		set := &provenance.Set{Vocabulary: "1.0"}
		for i, c := range []string{provenance.GitLog, provenance.CodeRead, provenance.Grep} {
			ts := now.Add(-time.Duration(r.IntN(4)) * time.Minute)
			id := observationIDs[r.IntN(3)]
			if i == 2 {
				id = observationIDs[r.IntN(6)]
			}
			set.Annotations = append(set.Annotations, provenance.Annotation{Assertion: "assertion 0", Class: c, ObservationID: id, TS: &ts})
		}
		d.Extensions = map[string]any{provenance.Extension: set}
	default:
		set := &provenance.Set{Vocabulary: []string{"1.0", "1.0", "1.0", "1.0", "1.0", "0.9"}[r.IntN(6)]}
		for range 1 + r.IntN(4) {
			a := provenance.Annotation{Assertion: fmt.Sprint("assertion ", r.IntN(4)/3), Class: substrateClasses[r.IntN(len(substrateClasses))]}
			if id := observationIDs[r.IntN(len(observationIDs))]; id != "" {
				a.ObservationID = id
			}
			if r.IntN(8) != 0 {
				ts := now.Add(-time.Duration(r.IntN(20)) * time.Minute)
				if r.IntN(10) == 0 {
					ts = now.Add(time.Minute) // after the judgement
				}
				a.TS = &ts
			}
			if r.IntN(2) == 0 {
				a.Locator = &provenance.Locator{Path: "CHANGELOG.md", Pattern: "2026"}
			}
			set.Annotations = append(set.Annotations, a)
		}
		d.Extensions = map[string]any{provenance.Extension: set}
	}
	return events.MustSeal(d)
}

// runnerPrepared is msgs prepared as the runner prepares them, without
// Projection.Prepare: every message on an artifact subject validated ahead
// of the fold (in parallel, in the runner), and the EVIDENCE its
// deliberation's policy judges (Deliberation.Judges, asked of the fold of
// the messages before) re-verified with verify (provenance.Reverify).
func runnerPrepared(opts projector.Options, msgs []projector.Msg, verify provenance.Verifier) []projector.Msg {
	v := events.NewValidator()
	out := make([]projector.Msg, len(msgs))
	for i, m := range msgs {
		if _, kind, _ := wire.Parse(m.Subject); kind == "art" {
			m.Artifact, m.Invalid = v.ValidateTransient(m.Data)
		}
		out[i] = m
	}
	p := projector.New(opts)
	for i := range out {
		m := &out[i]
		if d := p.Deliberation(wire.DeliberationOf(m.Subject)); d != nil && m.Artifact != nil && m.Invalid == nil && d.Judges(m.Artifact) {
			m.Reverified = provenance.Reverify(m.Artifact, verify)
		}
		p.Apply(*m)
	}
	return out
}

// foldPreparing folds msgs preparing each with verify just before it is
// applied (Projection.Prepare), as a fold of a recording that must agree
// with the live engine does.
func foldPreparing(p *projector.Projection, msgs []projector.Msg, verify provenance.Verifier) *projector.Projection {
	for _, m := range msgs {
		p.Prepare(&m, verify)
		p.Apply(m)
	}
	return p
}

// allDigests renders every deliberation's state digest, in a fixed order.
func allDigests(p *projector.Projection) string {
	var b strings.Builder
	for _, id := range delibs {
		if d := p.Deliberation(id); d != nil {
			fmt.Fprintf(&b, "%s %s\n", id, d.StateDigest())
		}
	}
	return b.String()
}

// The fold with provenance policies proven: on random streams whose
// deliberations open with provenance policies and whose EVIDENCE carries
// annotations, with a pure verifier, the fold of the messages the runner
// prepared ahead (validated, re-verified where the policy judges) is the
// same state and digests as the fold that prepares each message itself
// (Projection.Prepare) — preparing again what is prepared changes
// nothing — and as restoring a snapshot of any prefix and folding the
// rest, prepared ahead or prepared by the restored fold (the policy is in
// the snapshot). The verdicts matter: the fold without a verifier (an
// engine with no roots) differs on some streams.
func TestFold_ProvenancePreparedAhead(t *testing.T) {
	streams := 150
	if testing.Short() {
		streams = 80
	}
	opts := projector.Options{Rules: supervisor.Rules{}, MaxKept: 8}
	seen := map[string]int{}
	for seed := range uint64(streams) {
		r := rand.New(rand.NewPCG(seed, 13))
		msgs := streamOf(r, 40+r.IntN(160), fakeVerify)
		live := foldPreparing(projector.New(opts), msgs, fakeVerify)
		whole, digests := projector.DumpState(live), allDigests(live)
		if got := projector.DumpState(foldPreparing(projector.New(opts), msgs, fakeVerify)); got != whole {
			t.Fatalf("seed %d: the prepared fold is not deterministic: %s", seed, firstDifference(got, whole))
		}

		ready := runnerPrepared(opts, msgs, fakeVerify)
		ahead := fold(opts, ready)
		if got := projector.DumpState(ahead); got != whole {
			t.Fatalf("seed %d: prepared ahead by the runner, then folded: %s", seed, firstDifference(got, whole))
		}
		if got := allDigests(ahead); got != digests {
			t.Fatalf("seed %d: state digests %s prepared ahead, %s prepared by the fold", seed, got, digests)
		}
		if got := projector.DumpState(foldPreparing(projector.New(opts), ready, fakeVerify)); got != whole {
			t.Fatalf("seed %d: prepared twice: %s", seed, firstDifference(got, whole))
		}

		// A snapshot of a prefix, restored and folded on with the rest as
		// the runner prepared it, or preparing it with the restored fold.
		cut := r.IntN(len(msgs) + 1)
		prefix := fold(opts, ready[:cut])
		restored := roundTrip(t, prefix, opts)
		if got, want := projector.DumpState(restored), projector.DumpState(prefix); got != want {
			t.Fatalf("seed %d: the snapshot at %d does not restore the state: %s", seed, cut, firstDifference(got, want))
		}
		for _, m := range ready[cut:] {
			restored.Apply(m)
		}
		if got := projector.DumpState(restored); got != whole {
			t.Fatalf("seed %d: snapshot at %d of %d, then the rest prepared ahead: %s", seed, cut, len(msgs), firstDifference(got, whole))
		}
		resumed := foldPreparing(roundTrip(t, foldPreparing(projector.New(opts), msgs[:cut], fakeVerify), opts), msgs[cut:], fakeVerify)
		if got := projector.DumpState(resumed); got != whole {
			t.Fatalf("seed %d: snapshot at %d of %d, then the rest prepared by the restored fold: %s", seed, cut, len(msgs), firstDifference(got, whole))
		}
		if got := allDigests(resumed); got != digests {
			t.Fatalf("seed %d: state digests %s after a snapshot at %d, %s whole", seed, got, cut, digests)
		}

		// Restarts after restarts: snapshots at several cuts in turn.
		cuts := []int{r.IntN(len(msgs) + 1), r.IntN(len(msgs) + 1), r.IntN(len(msgs) + 1)}
		slices.Sort(cuts)
		chained, from := projector.New(opts), 0
		for _, c := range append(cuts, len(msgs)) {
			chained = roundTrip(t, foldPreparing(chained, msgs[from:c], fakeVerify), opts)
			from = c
		}
		if got := projector.DumpState(chained); got != whole {
			t.Fatalf("seed %d: snapshots at %v of %d: %s", seed, cuts, len(msgs), firstDifference(got, whole))
		}

		// What the stream exercised.
		if projector.DumpState(fold(opts, msgs)) != whole {
			seen["differs without a verifier"]++
		}
		for _, m := range ready {
			if m.Reverified != nil {
				seen["reverified messages"]++
			}
		}
		live.Deliberations(func(d *projector.Deliberation) {
			if pp := d.Policy().Provenance; pp != nil {
				seen[fmt.Sprint("policy k=", pp.K)]++
			}
			d.Judgements(func(_ canon.Digest, n projector.Node) {
				adm := n.Provenance
				switch {
				case adm.Admissible:
					seen["admissible"]++
				case strings.Contains(adm.Problem, "no "+provenance.Extension):
					seen["no extension"]++
				case strings.Contains(adm.Problem, "annotates no assertion"):
					seen["no annotations"]++
				default:
					seen["inadmissible"]++
				}
				for _, v := range adm.Assertions {
					for _, c := range v.Reverification {
						seen["check "+c.Result]++
					}
					for _, why := range v.Reasons {
						seen[why.Code]++
					}
				}
			})
		})
	}
	for _, must := range []string{"differs without a verifier", "reverified messages", "policy k=1", "policy k=2", "policy k=3",
		"admissible", "inadmissible", "no extension", "no annotations",
		"check " + provenance.ResultVerified, "check " + provenance.ResultFailed, "check " + provenance.ResultUnavailable,
		provenance.CodeReverifyFailed, provenance.CodeOutsideWindow, provenance.CodeNotReverified, provenance.CodeBelowFloor} {
		if seen[must] == 0 {
			t.Errorf("the random streams never reached %q: %v", must, seen)
		}
	}
	t.Logf("exercised: %v", seen)
}

// A judgement is made once: on random streams with provenance policies,
// prepared ahead as the runner does, an EVIDENCE's judgement never changes
// once it is in the DAG, whatever comes after it; and the runner may apply
// the deliberations' messages in any interleaving that keeps each
// deliberation's order (it holds back those a reader has locked), or each
// deliberation alone, and reach the same state.
func TestFold_ProvenanceJudgedOnce(t *testing.T) {
	streams := 100
	if testing.Short() {
		streams = 30
	}
	opts := projector.Options{Rules: supervisor.Rules{}, MaxKept: 8}
	judged := 0
	for seed := range uint64(streams) {
		r := rand.New(rand.NewPCG(seed, 17))
		ready := runnerPrepared(opts, streamOf(r, 40+r.IntN(160), fakeVerify), fakeVerify)
		p := projector.New(opts)
		first := map[canon.Digest]string{}
		for i, m := range ready {
			p.Apply(m)
			p.Deliberations(func(d *projector.Deliberation) {
				d.Judgements(func(id canon.Digest, n projector.Node) {
					got := fmt.Sprintf("%+v", *n.Provenance)
					if was, ok := first[id]; !ok {
						first[id] = got
						judged++
					} else if was != got {
						t.Fatalf("seed %d, message %d (%s): the judgement of %s was %s, now %s", seed, i+1, m.Subject, id, was, got)
					}
				})
			})
		}
		want := projector.DumpState(p)

		q := projector.New(opts)
		held := map[string][]projector.Msg{}
		for _, m := range ready {
			d := wire.DeliberationOf(m.Subject)
			if len(held[d]) > 0 || q.Deliberation(d) != nil && r.IntN(3) == 0 {
				held[d] = append(held[d], m)
			} else {
				q.Apply(m)
			}
			for d := range held {
				if r.IntN(4) == 0 {
					for _, m := range held[d] {
						q.Apply(m)
					}
					delete(held, d)
				}
			}
		}
		for _, ms := range held {
			for _, m := range ms {
				q.Apply(m)
			}
		}
		if got := projector.DumpState(q); got != want {
			t.Fatalf("seed %d: deliberations applied out of step: %s", seed, firstDifference(got, want))
		}
		for _, id := range delibs {
			var own []projector.Msg
			for _, m := range ready {
				if wire.DeliberationOf(m.Subject) == id {
					own = append(own, m)
				}
			}
			alone, together := fold(opts, own).Deliberation(id), p.Deliberation(id)
			if (alone == nil) != (together == nil) || alone != nil && alone.StateDigest() != together.StateDigest() {
				t.Fatalf("seed %d: deliberation %s folded alone is not the one folded among the others", seed, id)
			}
		}
	}
	if judged == 0 {
		t.Fatal("the streams judged no evidence")
	}
	t.Logf("%d judgements", judged)
}
