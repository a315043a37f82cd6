package readmodel

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/wire"
)

// A verification through the yielding graph gives exactly the
// deliberation's own answer (projector.Deliberation.Verify), findings and
// their order included, over random DAGs with blocking objections,
// decisions disposing of some, and positions after them; and it offers to
// yield as it goes.
func TestYieldingGraph_SameAnswer(t *testing.T) {
	seeds := uint64(3)
	if testing.Short() {
		seeds = 1
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			r := runner.NewInMemory(1, projector.Options{})
			id := fmt.Sprintf("019ad3f0-0000-7000-8000-%012d", seed+1)
			var seq uint64
			apply := func(subject string, data []byte) {
				seq++
				out := r.ApplyInMemory(projector.Msg{Seq: seq, Subject: subject, Data: data, Time: time.Unix(1e9, 0)})
				if out.Rejection != nil {
					t.Fatalf("message %d refused: %+v", seq, out.Rejection)
				}
			}
			apply(wire.ControlSubject(id), []byte(`{"op":"open","charter":{"title":"t"}}`))
			var ids, objections []canon.Digest // ids: the claims
			type dec struct {
				id  canon.Digest
				pos uint64
			}
			var decisions []dec
			for i := range 1500 {
				var d events.Draft
				switch k := rng.IntN(20); {
				case i == 0 || k < 14:
					d = events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprint("claim ", i)}}
					// Each supports one or two of the last 30 claims:
					// closures of most of the DAG.
					for range min(len(ids), 1+rng.IntN(2)) {
						d.References = appendRef(d.References, ids[len(ids)-1-rng.IntN(min(len(ids), 30))], events.Supports)
					}
				case k < 17:
					d = events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: fmt.Sprint("objection ", i), Blocking: rng.IntN(3) > 0},
						References: []events.Reference{{Target: ids[rng.IntN(len(ids))], Relation: events.ObjectsTo}}}
				default:
					disp := []events.Disposition{}
					for _, o := range objections {
						if rng.IntN(2) == 0 {
							disp = append(disp, events.Disposition{Objection: o, Disposition: events.Addressed, Rationale: "answered"})
						}
					}
					d = events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: fmt.Sprint("decide ", i), Status: events.Final,
						ObjectionDispositions: disp, UnresolvedIssues: []events.Issue{}},
						References: []events.Reference{{Target: ids[len(ids)-1-rng.IntN(min(len(ids), 50))], Relation: events.Decides}}}
				}
				a := events.MustSeal(d)
				apply(wire.ArtifactSubject(id, "alice"), a.Canonical)
				switch d.Type {
				case events.TypeClaim:
					ids = append(ids, a.ID)
				case events.TypeObjection:
					objections = append(objections, a.ID)
				case events.TypeDecision:
					decisions = append(decisions, dec{a.ID, seq})
				}
			}
			if len(decisions) == 0 {
				t.Fatal("no decision")
			}
			offered, largest := 0, 0
			for _, dc := range decisions {
				for _, at := range []uint64{0, dc.pos, min(dc.pos+uint64(rng.IntN(500)), seq), seq} {
					var want, got closure.Result
					var final bool
					yields := 0
					r.ReadDeliberation(id, func(d *projector.Deliberation) {
						want = d.Verify(dc.id, at, d.ClosureLimits())
						final = closureFinal(d, dc.id, at, r.Position())
					})
					r.ReadDeliberationYielding(id, func(d *projector.Deliberation, yield func(time.Duration)) {
						g := &yieldingGraph{d: d, yield: func(rest time.Duration) { yields++; yield(rest) }}
						g.start()
						got = closure.Verify(g, dc.id, at, d.ClosureLimits())
					})
					x, _ := json.Marshal(want)
					y, _ := json.Marshal(got)
					if string(x) != string(y) {
						t.Fatalf("decision at %d, at %d: yielding %s, want %s", dc.pos, at, y, x)
					}
					if !final {
						t.Errorf("decision at %d, at %d: not final with every message applied and none pending", dc.pos, at)
					}
					offered += yields
					largest = max(largest, want.ClosureSize)
					if want.ClosureSize > yieldEvery && yields == 0 {
						t.Errorf("a closure of %d with no offer to yield", want.ClosureSize)
					}
				}
			}
			if offered == 0 {
				t.Errorf("%d decisions verified with no offer to yield (largest closure %d)", len(decisions), largest)
			}
			// Paid from a budget of a tenth of the time, a verification
			// rests nine times as long as it computes, a stretch at a
			// time (shortened here), with the same answer.
			rs := NewBudget(ReadBudget{Concurrent: 1, PerSecond: 100 * time.Millisecond})
			last := decisions[len(decisions)-1]
			var rested time.Duration
			var want, got closure.Result
			var work time.Duration
			const slice = 50 * time.Microsecond
			for work < 20*slice {
				r.ReadDeliberation(id, func(d *projector.Deliberation) { want = d.Verify(last.id, seq, d.ClosureLimits()) })
				r.ReadDeliberationYielding(id, func(d *projector.Deliberation, yield func(time.Duration)) {
					g := &yieldingGraph{d: d, t: &Ticket{r: rs}, slice: slice, yield: func(rest time.Duration) { rested += rest; yield(0) }}
					g.start()
					got = closure.Verify(g, last.id, seq, d.ClosureLimits())
					work += g.stop()
				})
				if x, y := fmt.Sprint(want), fmt.Sprint(got); x != y {
					t.Fatalf("paced: %s, want %s", y, x)
				}
			}
			// Each rest is 9 times the stretch before it; the last stretch
			// of each verification has none.
			if rested < 4*work || rested > 9*work {
				t.Errorf("paced: rested %v for %v of work", rested, work)
			}
		})
	}
}

func appendRef(refs []events.Reference, target canon.Digest, rel events.Relation) []events.Reference {
	for _, r := range refs {
		if r.Target == target && r.Relation == rel {
			return refs
		}
	}
	return append(refs, events.Reference{Target: target, Relation: rel})
}

// closureFinal: a position the deliberation has not reached, an unknown
// decision and a deliberation with a pending artifact are not final.
func TestClosureFinal(t *testing.T) {
	r := runner.NewInMemory(1, projector.Options{})
	const id = "019ad3f0-0000-7000-8000-0000000000aa"
	r.ApplyInMemory(projector.Msg{Seq: 1, Subject: wire.ControlSubject(id), Data: []byte(`{"op":"open","charter":{"title":"t"}}`)})
	claim := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "c"}})
	r.ApplyInMemory(projector.Msg{Seq: 2, Subject: wire.ArtifactSubject(id, "alice"), Data: claim.Canonical})
	dec := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "d", Status: events.Final,
		ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}}, References: []events.Reference{{Target: claim.ID, Relation: events.Decides}}})
	r.ApplyInMemory(projector.Msg{Seq: 3, Subject: wire.ArtifactSubject(id, "alice"), Data: dec.Canonical})
	unknown := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "not published"}})
	check := func(what string, decision canon.Digest, at, projected uint64, want bool) {
		t.Helper()
		r.ReadDeliberation(id, func(d *projector.Deliberation) {
			if got := closureFinal(d, decision, at, projected); got != want {
				t.Errorf("%s: final %v, want %v", what, got, want)
			}
		})
	}
	check("at the decision's own", dec.ID, 0, 3, true)
	check("at its position", dec.ID, 3, 3, true)
	check("ahead of the projection", dec.ID, 10, 3, false)
	check("ahead of the deliberation, reached by the projection", dec.ID, 10, 10, true)
	check("an unknown decision", unknown.ID, 0, 3, false)
	// An artifact referencing one not published is refused, not held:
	// nothing can enter the DAG at an earlier position, so the answer at
	// the decision's position stays final.
	waiting := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "o", Blocking: true},
		References: []events.Reference{{Target: unknown.ID, Relation: events.ObjectsTo}}})
	r.ApplyInMemory(projector.Msg{Seq: 4, Subject: wire.ArtifactSubject(id, "bob"), Data: waiting.Canonical})
	check("after an artifact referencing one not published", dec.ID, 3, 4, true)
}
