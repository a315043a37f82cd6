package closure_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
)

// ordinalGraph is a MemGraph that knows ordinals: its deliberation's
// messages sit among other deliberations' in the stream, so position and
// ordinal differ.
type ordinalGraph struct {
	*closure.MemGraph
	ordinals map[uint64]uint64
}

func (g ordinalGraph) Ordinal(position uint64) uint64 { return g.ordinals[position] }

// A finding names the artifact by its ordinal ("#2") where the graph knows
// it, and carries both numbers in JSON; without ordinals it says
// "at position N".
func TestVerify_FindingsNameOrdinals(t *testing.T) {
	claim := fakeID(1)
	objection := fakeID(2)
	build := func() *closure.MemGraph {
		g := closure.NewMemGraph()
		g.AddNode(claim, closure.Info{Position: 40, Type: events.TypeClaim}, nil)
		g.AddNode(objection, closure.Info{Position: 57, Type: events.TypeObjection, Blocking: true},
			[]events.Reference{{Target: claim, Relation: events.ObjectsTo}})
		d, info, refs := decisionOver(claim)
		info.Position = 90
		g.AddNode(d, info, refs)
		return g
	}
	d, _, _ := decisionOver(claim)

	og := ordinalGraph{build(), map[uint64]uint64{40: 2, 57: 3, 90: 4}}
	r := closure.Verify(og, d, 0, closure.Limits{})
	wantFailure(t, r, closure.CodeHidden)
	f := r.Findings[0]
	if !strings.HasPrefix(f.Message, "blocking objection #3 ") || strings.Contains(f.Message, "57") {
		t.Errorf("message %q, want the objection named #3", f.Message)
	}
	if f.Position != 57 || f.Ordinal != 3 || r.Position != 90 || r.Ordinal != 4 {
		t.Errorf("finding at %d/#%d, result at %d/#%d; want 57/#3 and 90/#4", f.Position, f.Ordinal, r.Position, r.Ordinal)
	}
	b, _ := json.Marshal(r)
	for _, want := range []string{`"position":90`, `"ordinal":4`, `"position":57`, `"ordinal":3`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON %s lacks %s", b, want)
		}
	}

	// Verified at a later message: the result's ordinal is that message's.
	og.ordinals[95] = 6
	if r := closure.Verify(og, d, 95, closure.Limits{}); r.Position != 95 || r.Ordinal != 6 {
		t.Errorf("at 95: position %d, #%d; want 95, #6", r.Position, r.Ordinal)
	}

	r = closure.Verify(build(), d, 0, closure.Limits{})
	wantFailure(t, r, closure.CodeHidden)
	if f := r.Findings[0]; !strings.Contains(f.Message, "blocking objection at position 57 ") || f.Ordinal != 0 || r.Ordinal != 0 {
		t.Errorf("without ordinals: %+v", r)
	}
}
