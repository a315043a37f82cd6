package closure_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
)

func fakeID(i int) canon.Digest {
	d, _ := canon.ID([]byte(fmt.Sprintf(`{"n":%d}`, i)))
	return d
}

// node of the naive model.
type rnode struct {
	id   canon.Digest
	info closure.Info
	refs []events.Reference
}

// naive is a slow, obviously correct reading of the closure rules (docs/ARCHITECTURE.md) over a list of
// nodes: repeated passes to a fixpoint, no cleverness.
func naive(nodes []rnode, byID map[canon.Digest]*rnode, d canon.Digest) (ok bool, size int, findings []string, missing []canon.Digest) {
	dn := byID[d]
	closureOf := func(start canon.Digest, set map[canon.Digest]bool) {
		set[start] = true
		for changed := true; changed; {
			changed = false
			for id := range set {
				n := byID[id]
				if n == nil {
					continue
				}
				for _, r := range n.refs {
					if !set[r.Target] {
						set[r.Target] = true
						changed = true
					}
				}
			}
		}
	}
	a := map[canon.Digest]bool{}
	closureOf(d, a)
	for changed := true; changed; {
		changed = false
		for _, n := range nodes {
			if a[n.id] || n.info.Type != events.TypeObjection || !n.info.Blocking || n.info.Position > dn.info.Position {
				continue
			}
			for _, r := range n.refs {
				if r.Relation == events.ObjectsTo && a[r.Target] && byID[r.Target] != nil {
					closureOf(n.id, a)
					changed = true
					break
				}
			}
		}
	}
	for id := range a {
		if byID[id] == nil {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		slices.SortFunc(missing, func(x, y canon.Digest) int { return slices.Compare(x[:], y[:]) })
		return false, 0, nil, missing
	}
	dec := dn.info.Decision
	sev := "E"
	if dec.Status != events.Final {
		sev = "W"
	}
	disp := map[canon.Digest]events.DispositionKind{}
	for _, x := range dec.ObjectionDispositions {
		disp[x.Objection] = x.Disposition
	}
	listed := map[canon.Digest]bool{}
	for _, u := range dec.UnresolvedIssues {
		if u.Objection != nil {
			listed[*u.Objection] = true
		}
	}
	ok = true
	for id := range a {
		n := byID[id]
		if n.info.Type != events.TypeObjection || !n.info.Blocking {
			continue
		}
		k, has := disp[id]
		switch {
		case !has && !listed[id]:
			findings = append(findings, closure.CodeHidden+" "+id.String()+" "+sev)
		case !has || !k.Public():
			findings = append(findings, closure.CodeUnresolved+" "+id.String()+" "+sev)
		}
	}
	for _, x := range dec.ObjectionDispositions {
		if !a[x.Objection] {
			findings = append(findings, closure.CodeForeign+" "+x.Objection.String()+" "+sev)
		}
	}
	for _, f := range findings {
		if f[len(f)-1] == 'E' {
			ok = false
		}
	}
	slices.Sort(findings)
	return ok, len(a), findings, nil
}

// Verify agrees with the naive model on random DAGs.
func TestVerify_AgainstNaive(t *testing.T) {
	kinds := []events.DispositionKind{events.Sustained, events.Overruled, events.Addressed, events.Withdrawn, events.Deferred}
	for seed := uint64(0); seed < 3000; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := 2 + rng.IntN(40)
		var nodes []rnode
		byID := map[canon.Digest]*rnode{}
		g := closure.NewMemGraph()
		ghosts := 0
		for i := 0; i < n; i++ {
			nd := rnode{id: fakeID(int(seed)*1000 + i), info: closure.Info{Position: uint64(i + 1)}}
			var refs []events.Reference
			pick := func(rel events.Relation) {
				if i == 0 {
					return
				}
				if rng.IntN(60) == 0 {
					ghosts++
					refs = append(refs, events.Reference{Target: fakeID(-1 - ghosts - int(seed)*100), Relation: rel})
					return
				}
				refs = append(refs, events.Reference{Target: nodes[rng.IntN(i)].id, Relation: rel})
			}
			switch k := rng.IntN(10); {
			case k < 3 || i == 0:
				nd.info.Type = events.TypeClaim
			case k < 6:
				nd.info.Type = events.TypeObjection
				nd.info.Blocking = rng.IntN(3) > 0
				pick(events.ObjectsTo)
				if rng.IntN(3) == 0 {
					pick(events.Considers)
				}
			case k < 8:
				nd.info.Type = events.TypeEvidence
				pick(events.Supports)
			default:
				nd.info.Type = events.TypeRevision
				pick(events.Revises)
				if rng.IntN(2) == 0 {
					pick(events.Supersedes)
				}
			}
			nd.refs = dedupe(refs)
			nodes = append(nodes, nd)
		}
		// The decision, last, with random references and dispositions.
		dec := &events.Decision{Outcome: "o", Status: events.Final}
		if rng.IntN(4) == 0 {
			dec.Status = events.Provisional
		}
		var refs []events.Reference
		for j := 0; j < 1+rng.IntN(3); j++ {
			refs = append(refs, events.Reference{Target: nodes[rng.IntN(n)].id, Relation: events.Decides})
		}
		seen := map[canon.Digest]bool{}
		for _, o := range nodes {
			if o.info.Type == events.TypeObjection && rng.IntN(2) == 0 && !seen[o.id] {
				seen[o.id] = true
				dec.ObjectionDispositions = append(dec.ObjectionDispositions, events.Disposition{Objection: o.id, Disposition: kinds[rng.IntN(len(kinds))], Rationale: "r"})
			} else if o.info.Type == events.TypeObjection && rng.IntN(4) == 0 {
				id := o.id
				dec.UnresolvedIssues = append(dec.UnresolvedIssues, events.Issue{Description: "u", Objection: &id})
			}
		}
		dn := rnode{id: fakeID(int(seed)*1000 + 999), info: closure.Info{Position: uint64(n + 1), Type: events.TypeDecision, Decision: dec}, refs: dedupe(refs)}
		nodes = append(nodes, dn)
		for i := range nodes {
			byID[nodes[i].id] = &nodes[i]
			g.AddNode(nodes[i].id, nodes[i].info, nodes[i].refs)
		}
		ok, size, want, missing := naive(nodes, byID, dn.id)
		got := closure.Verify(g, dn.id, 0, closure.Limits{})
		if len(missing) > 0 {
			var gotMissing []canon.Digest
			for _, f := range got.Findings {
				if f.Code != closure.CodeUnavailable {
					t.Fatalf("seed %d: finding %+v beside unavailable references", seed, f)
				}
				d, _ := canon.ParseDigest(f.ArtifactID)
				gotMissing = append(gotMissing, d)
			}
			if got.OK || !slices.Equal(gotMissing, missing) {
				t.Fatalf("seed %d: missing %v, want %v", seed, gotMissing, missing)
			}
			continue
		}
		var gotF []string
		for _, f := range got.Findings {
			sev := "E"
			if f.Severity == closure.Warning {
				sev = "W"
			}
			gotF = append(gotF, f.Code+" "+f.ArtifactID+" "+sev)
		}
		slices.Sort(gotF)
		if got.OK != ok || got.ClosureSize != size || !slices.Equal(gotF, want) {
			t.Fatalf("seed %d: got ok=%v size=%d %v\nwant ok=%v size=%d %v", seed, got.OK, got.ClosureSize, gotF, ok, size, want)
		}
		// Deterministic.
		again := closure.Verify(g, dn.id, 0, closure.Limits{})
		if fmt.Sprint(again) != fmt.Sprint(got) {
			t.Fatalf("seed %d: two verifications differ", seed)
		}
	}
}

func dedupe(refs []events.Reference) []events.Reference {
	var out []events.Reference
	for _, r := range refs {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

func decisionOver(targets ...canon.Digest) (canon.Digest, closure.Info, []events.Reference) {
	var refs []events.Reference
	for _, t := range targets {
		refs = append(refs, events.Reference{Target: t, Relation: events.Decides})
	}
	return fakeID(-999999), closure.Info{Type: events.TypeDecision, Decision: &events.Decision{Outcome: "o", Status: events.Final}}, refs
}

func wantFailure(t *testing.T, r closure.Result, code string) {
	t.Helper()
	if r.OK || len(r.Findings) == 0 || r.Findings[0].Code != code {
		t.Fatalf("result %+v, want %s", r, code)
	}
}

func heapMB() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc >> 20
}

// Adversarial graphs fail explicitly, in bounded time and memory.
func TestVerify_Adversarial(t *testing.T) {
	const big = 100_000
	t.Run("100000-deep chain", func(t *testing.T) {
		g := closure.NewMemGraph()
		prev := fakeID(0)
		g.AddNode(prev, closure.Info{Type: events.TypeClaim, Position: 1}, nil)
		for i := 1; i < big; i++ {
			id := fakeID(i)
			g.AddNode(id, closure.Info{Type: events.TypeRevision, Position: uint64(i + 1)}, []events.Reference{{Target: prev, Relation: events.Revises}})
			prev = id
		}
		d, info, refs := decisionOver(prev)
		info.Position = big + 1
		g.AddNode(d, info, refs)
		wantFailure(t, closure.Verify(g, d, 0, closure.Limits{}), closure.CodeLimitDepth)
		// With the limit raised it verifies, iteratively (no stack growth
		// with the depth).
		r := closure.Verify(g, d, 0, closure.Limits{MaxDepth: big + 10})
		if !r.OK || r.ClosureSize != big+1 {
			t.Fatalf("%+v", r.Findings)
		}
	})
	t.Run("100000-wide fan-out", func(t *testing.T) {
		g := closure.NewMemGraph()
		var refs []events.Reference
		for i := 0; i < big; i++ {
			g.AddNode(fakeID(i), closure.Info{Type: events.TypeClaim, Position: uint64(i + 1)}, nil)
			refs = append(refs, events.Reference{Target: fakeID(i), Relation: events.Considers})
		}
		r := fakeID(-5)
		g.AddNode(r, closure.Info{Type: events.TypeRevision, Position: big + 1}, refs)
		d, info, drefs := decisionOver(r)
		info.Position = big + 2
		g.AddNode(d, info, drefs)
		wantFailure(t, closure.Verify(g, d, 0, closure.Limits{}), closure.CodeLimitFanout)
	})
	t.Run("10000 missing references", func(t *testing.T) {
		g := closure.NewMemGraph()
		var refs []events.Reference
		for i := 0; i < 10_000; i++ {
			refs = append(refs, events.Reference{Target: fakeID(i), Relation: events.Considers})
		}
		r := fakeID(-5)
		g.AddNode(r, closure.Info{Type: events.TypeRevision, Position: 1}, refs)
		d, info, drefs := decisionOver(r)
		info.Position = 2
		g.AddNode(d, info, drefs)
		before := heapMB()
		res := closure.Verify(g, d, 0, closure.Limits{})
		wantFailure(t, res, closure.CodeUnavailable)
		if len(res.Findings) != 101 || res.ClosureSize != 0 {
			t.Fatalf("%d findings (want 100 listed and a total), size %d", len(res.Findings), res.ClosureSize)
		}
		if last := res.Findings[100]; last.Message[:6] != "10000 " {
			t.Errorf("total: %+v", last)
		}
		if after := heapMB(); after > before+16 {
			t.Errorf("heap grew from %d to %d MB", before, after)
		}
	})
	t.Run("size limit", func(t *testing.T) {
		g := closure.NewMemGraph()
		var refs []events.Reference
		for i := 0; i < 1000; i++ {
			g.AddNode(fakeID(i), closure.Info{Type: events.TypeClaim, Position: uint64(i + 1)}, nil)
			refs = append(refs, events.Reference{Target: fakeID(i), Relation: events.Decides})
		}
		d, info, _ := decisionOver()
		info.Position = 1001
		g.AddNode(d, info, refs)
		wantFailure(t, closure.Verify(g, d, 0, closure.Limits{MaxSize: 500}), closure.CodeLimitSize)
	})
	t.Run("cycle", func(t *testing.T) {
		// Content addressing makes a cycle impossible with honest ids; a
		// graph read from an untrusted source could still claim one.
		g := closure.NewMemGraph()
		a, b := fakeID(1), fakeID(2)
		g.AddNode(a, closure.Info{Type: events.TypeRevision, Position: 1}, []events.Reference{{Target: b, Relation: events.Revises}})
		g.AddNode(b, closure.Info{Type: events.TypeRevision, Position: 2}, []events.Reference{{Target: a, Relation: events.Revises}})
		d, info, refs := decisionOver(a)
		info.Position = 3
		g.AddNode(d, info, refs)
		wantFailure(t, closure.Verify(g, d, 0, closure.Limits{}), closure.CodeCycle)
	})
}
