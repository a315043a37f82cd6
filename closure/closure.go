// Package closure verifies that a DECISION is closed over its public
// record (docs/ARCHITECTURE.md, closure), as a pure function over a graph of artifacts.
//
//   - C(D), the closure, is every artifact reachable from the decision D
//     through references, D included. An unavailable reference fails the
//     verification with the missing ids (there is no partial result); so
//     does a cycle, and so does a closure past the size, depth or fan-out
//     limit.
//   - A(D), the audited set, is C(D) plus every blocking OBJECTION known at
//     D's own position that objects to a member of A(D), with its own
//     closure, to a fixpoint: a decider cannot hide an objection by not
//     referencing it.
//   - A final D must give every blocking objection in A(D) a public
//     disposition (sustained, overruled, addressed or withdrawn; not
//     deferred): closure.hidden_blocking_objection when D does not mention
//     it, closure.unresolved_blocking_objection when D lists it as
//     unresolved or defers it. A disposition naming an objection outside
//     A(D) is closure.foreign_disposition. A provisional D gets the same
//     findings as warnings.
//   - When the graph is an EvidenceGraph (a deliberation whose charter
//     requires admissible provenance), every inadmissible EVIDENCE known at
//     D's position that supports a member of C(D) is
//     provenance.inadmissible_evidence: D rests on it.
//   - Verified at a later position, the result also reports, as
//     closure.challenged warnings apart from D's own validity, the blocking
//     objections raised since D that object to A(D).
//
// The result names the position it was computed at, and the same graph
// prefix always gives the same result. Votes and scores never enter it.
package closure

import (
	"slices"
	"strconv"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
)

// Info is what the verifier reads of an artifact.
type Info struct {
	Position uint64
	Type     events.Type
	Blocking bool             // a blocking OBJECTION
	Decision *events.Decision // a DECISION's payload
	Refs     int              // number of references (the fan-out)
}

// Graph is a deliberation's artifacts as the verifier sees them.
type Graph interface {
	// Lookup returns an artifact, ok=false when it is unknown.
	Lookup(id canon.Digest) (Info, bool)
	// References calls fn for each reference of a known artifact.
	References(id canon.Digest, fn func(target canon.Digest, rel events.Relation))
	// Objections calls fn for each blocking OBJECTION that objects to id
	// (an objects-to reference), whatever its position.
	Objections(id canon.Digest, fn func(objection canon.Digest))
}

// EvidenceGraph is a Graph that also knows which EVIDENCE its provenance
// policy holds inadmissible.
type EvidenceGraph interface {
	Graph
	// InadmissibleSupport calls fn for each inadmissible EVIDENCE with a
	// supports reference to id, with the reason in one line.
	InadmissibleSupport(id canon.Digest, fn func(evidence canon.Digest, problem string))
}

// Limits bound a verification; past one it fails explicitly.
type Limits struct {
	MaxSize   int // artifacts in A(D)
	MaxDepth  int // references followed in a row from D
	MaxFanout int // references of one artifact
}

// DefaultLimits are the engine's defaults (a charter's max_closure,
// max_depth and max_references override them).
var DefaultLimits = Limits{MaxSize: 2_000_000, MaxDepth: 10_000, MaxFanout: 10_000}

// maxListed bounds the missing ids a result lists (all are counted).
const maxListed = 100

// Finding codes.
const (
	CodeHidden           = "closure.hidden_blocking_objection"
	CodeUnresolved       = "closure.unresolved_blocking_objection"
	CodeForeign          = "closure.foreign_disposition"
	CodeChallenged       = "closure.challenged"
	CodeUnavailable      = "closure.unavailable_reference"
	CodeCycle            = "closure.cycle"
	CodeLimitSize        = "closure.limit_size"
	CodeLimitDepth       = "closure.limit_depth"
	CodeLimitFanout      = "closure.limit_fanout"
	CodeUnknownDecision  = "closure.unknown_decision"
	CodeNotADecision     = "closure.not_a_decision"
	CodePositionTooEarly = "closure.position_before_decision"
	CodeInadmissible     = "provenance.inadmissible_evidence"
)

// Codes lists the finding codes (docs/ERRORS.md).
var Codes = []string{CodeHidden, CodeUnresolved, CodeForeign, CodeChallenged, CodeUnavailable, CodeCycle,
	CodeLimitSize, CodeLimitDepth, CodeLimitFanout, CodeUnknownDecision, CodeNotADecision, CodePositionTooEarly, CodeInadmissible}

// Severity of a finding.
const (
	Error   = "error"
	Warning = "warning"
)

// Finding is one thing the verifier found.
type Finding struct {
	Code       string `json:"code"`
	ArtifactID string `json:"artifact_id,omitempty"`
	Message    string `json:"message"`
	Severity   string `json:"severity"`
	// Position and Ordinal locate the artifact the finding names: its
	// stream position, and its message's rank within the deliberation
	// (1 for its open; the "#N" of the message), when the graph knows it.
	Position uint64 `json:"position,omitempty"`
	Ordinal  uint64 `json:"ordinal,omitempty"`
}

// Result of a verification (the shape of engine closure and the closure API, README).
type Result struct {
	OK       bool   `json:"ok"`
	Decision string `json:"decision"`
	Status   string `json:"status,omitempty"`
	Position uint64 `json:"position"`
	// Ordinal is the rank within the deliberation (1 for its open) of the
	// message at Position, the decision's own by default, when the graph
	// knows it (an OrdinalGraph; 0 for a position that holds no message
	// of the deliberation).
	Ordinal     uint64    `json:"ordinal,omitempty"`
	ClosureSize int       `json:"closure_size"`
	Findings    []Finding `json:"findings"`
}

// Verify verifies decision over g at position at (0: the decision's own
// position).
func Verify(g Graph, decision canon.Digest, at uint64, lim Limits) Result {
	if lim.MaxSize <= 0 {
		lim.MaxSize = DefaultLimits.MaxSize
	}
	if lim.MaxDepth <= 0 {
		lim.MaxDepth = DefaultLimits.MaxDepth
	}
	if lim.MaxFanout <= 0 {
		lim.MaxFanout = DefaultLimits.MaxFanout
	}
	r := Result{Decision: decision.String(), Position: at, Findings: []Finding{}}
	info, ok := g.Lookup(decision)
	if !ok {
		return r.fail(CodeUnknownDecision, decision, "the decision is not in the deliberation")
	}
	if info.Type != events.TypeDecision || info.Decision == nil {
		return r.fail(CodeNotADecision, decision, "the artifact is a "+string(info.Type))
	}
	r.Status = string(info.Decision.Status)
	if at == 0 {
		r.Position = info.Position
	} else if at < info.Position {
		return r.fail(CodePositionTooEarly, decision, "position "+strconv.FormatUint(at, 10)+" is before the decision's own, "+strconv.FormatUint(info.Position, 10))
	}

	r.Ordinal = ordinal(g, r.Position)
	w := newWalker(g, lim)
	// A(D) at the decision's own position.
	w.audit(decision, info.Position)
	if f := w.failure(); f != nil {
		r.Findings = append(r.Findings, f...)
		return r
	}
	audited := w.members()
	r.ClosureSize = len(audited)

	sev := Error
	if info.Decision.Status != events.Final {
		sev = Warning
	}
	disp := map[canon.Digest]events.DispositionKind{}
	for _, d := range info.Decision.ObjectionDispositions {
		disp[d.Objection] = d.Disposition
	}
	listed := map[canon.Digest]bool{}
	for _, u := range info.Decision.UnresolvedIssues {
		if u.Objection != nil {
			listed[*u.Objection] = true
		}
	}
	inA := make(map[canon.Digest]bool, len(audited))
	for _, id := range audited {
		inA[id] = true
		n, _ := g.Lookup(id)
		if n.Type != events.TypeObjection || !n.Blocking {
			continue
		}
		k, has := disp[id]
		switch {
		case !has && !listed[id]:
			r.Findings = append(r.Findings, located(g, n, Finding{Code: CodeHidden, ArtifactID: id.String(), Message: "blocking objection " + name(g, n.Position) + " is in the audited set, and the decision does not dispose of it", Severity: sev}))
		case !has:
			r.Findings = append(r.Findings, located(g, n, Finding{Code: CodeUnresolved, ArtifactID: id.String(), Message: "blocking objection " + name(g, n.Position) + " is listed as unresolved", Severity: sev}))
		case !k.Public():
			r.Findings = append(r.Findings, located(g, n, Finding{Code: CodeUnresolved, ArtifactID: id.String(), Message: "blocking objection " + name(g, n.Position) + " is " + string(k) + ", which is not a public disposition", Severity: sev}))
		}
	}
	if eg, ok := g.(EvidenceGraph); ok {
		seen := map[canon.Digest]bool{}
		for _, id := range audited[:w.closureN] {
			eg.InadmissibleSupport(id, func(e canon.Digest, problem string) {
				n, ok := g.Lookup(e)
				if seen[e] || !ok || n.Position > info.Position {
					return
				}
				seen[e] = true
				t, _ := g.Lookup(id)
				r.Findings = append(r.Findings, located(g, n, Finding{Code: CodeInadmissible, ArtifactID: e.String(), Message: "EVIDENCE " + name(g, n.Position) + " supports the " +
					string(t.Type) + " " + name(g, t.Position) + " on which the decision rests, and is inadmissible under the charter's provenance policy: " + problem, Severity: sev}))
			})
		}
	}
	for _, d := range info.Decision.ObjectionDispositions {
		if !inA[d.Objection] {
			r.Findings = append(r.Findings, Finding{Code: CodeForeign, ArtifactID: d.Objection.String(), Message: "the decision disposes of an artifact outside its audited set", Severity: sev})
		}
	}
	// Challenges: blocking objections raised after D, up to the position
	// asked, against the audited set.
	if r.Position > info.Position {
		w2 := newWalker(g, lim)
		w2.audit(decision, r.Position)
		if f := w2.failure(); f != nil {
			r.Findings = append(r.Findings, f...)
			return r
		}
		for _, id := range w2.members() {
			if inA[id] {
				continue
			}
			n, _ := g.Lookup(id)
			if n.Type == events.TypeObjection && n.Blocking && n.Position > info.Position {
				r.Findings = append(r.Findings, located(g, n, Finding{Code: CodeChallenged, ArtifactID: id.String(), Message: "blocking objection " + name(g, n.Position) + " raised after the decision, against its audited set", Severity: Warning}))
			}
		}
	}
	r.OK = true
	for _, f := range r.Findings {
		if f.Severity == Error {
			r.OK = false
		}
	}
	return r
}

// OrdinalGraph is a Graph that knows the rank of each message within the
// deliberation (1 for its open), the number a person reads ("#7"); the
// findings then name artifacts by it, and carry it beside the position.
type OrdinalGraph interface {
	Graph
	Ordinal(position uint64) uint64
}

// ordinal returns the ordinal of the message at position, 0 when g does
// not know it.
func ordinal(g Graph, position uint64) uint64 {
	if og, ok := g.(OrdinalGraph); ok {
		return og.Ordinal(position)
	}
	return 0
}

// name is how a finding's message names the artifact at position: "#N",
// its ordinal, or "at position P" when g knows no ordinal.
func name(g Graph, position uint64) string {
	if o := ordinal(g, position); o > 0 {
		return "#" + strconv.FormatUint(o, 10)
	}
	return "at position " + strconv.FormatUint(position, 10)
}

// located sets where f's artifact, n, is.
func pos(p uint64) string { return strconv.FormatUint(p, 10) }

func located(g Graph, n Info, f Finding) Finding {
	f.Position, f.Ordinal = n.Position, ordinal(g, n.Position)
	return f
}

func (r Result) fail(code string, id canon.Digest, msg string) Result {
	r.OK = false
	r.Findings = append(r.Findings, Finding{Code: code, ArtifactID: id.String(), Message: msg, Severity: Error})
	return r
}

func newWalker(g Graph, lim Limits) walker {
	hint := 64
	if l, ok := g.(interface{ Len() int }); ok {
		hint = min(l.Len(), lim.MaxSize, 1<<22)
	}
	w := walker{g: g, lim: lim, set: make(map[canon.Digest]uint8, hint), order: make([]canon.Digest, 0, hint)}
	return w
}

// refAdder appends to the walker's buffer; made once per walk, not per
// artifact.
func (w *walker) refAdder() func(canon.Digest, events.Relation) {
	return func(t canon.Digest, _ events.Relation) { w.buf = append(w.buf, t) }
}

// walker computes A(D).
type walker struct {
	g   Graph
	lim Limits
	// set: 1 on the current DFS path, 2 done (member of A(D)), 3 missing.
	set   map[canon.Digest]uint8
	order []canon.Digest
	// closureN: order[:closureN] is C(D), the rest joined by the fixpoint.
	closureN int
	missing  []canon.Digest
	nMiss    int
	fail     *Finding
	stack    []frame
	buf      []canon.Digest // the references of the frames on the path
	addRef   func(canon.Digest, events.Relation)
}

// frame is a node on the walk's path; its references are refs[start:end]
// of the walker's shared buffer (frames are popped in LIFO order).
type frame struct {
	id         canon.Digest
	start, end int
	next       int
}

// audit computes A(D) with the objections known at cutoff.
func (w *walker) audit(decision canon.Digest, cutoff uint64) {
	w.addRef = w.refAdder()
	w.closure(decision)
	w.closureN = len(w.order)
	// Fixpoint: every member's blocking objections (known at cutoff) join
	// with their closures; their own members are examined in turn.
	for i := 0; i < len(w.order) && w.fail == nil; i++ {
		w.g.Objections(w.order[i], func(o canon.Digest) {
			if w.fail != nil || w.set[o] != 0 {
				return
			}
			if n, ok := w.g.Lookup(o); ok && n.Position <= cutoff {
				w.closure(o)
			}
		})
	}
}

// closure adds the closure of root by an iterative depth-first walk (a
// 100,000-deep chain must not exhaust the stack), detecting cycles and
// enforcing the limits.
func (w *walker) closure(root canon.Digest) {
	if w.set[root] != 0 {
		return
	}
	stack := w.stack[:0]
	defer func() { w.stack = stack[:0] }()
	push := func(id canon.Digest) bool {
		n, ok := w.g.Lookup(id)
		if !ok {
			w.set[id] = 3 // missing: counted once
			w.nMiss++
			if len(w.missing) < maxListed {
				w.missing = append(w.missing, id)
			}
			return false
		}
		if n.Refs > w.lim.MaxFanout {
			w.fail = &Finding{Code: CodeLimitFanout, ArtifactID: id.String(), Message: pos(uint64(n.Refs)) + " references, limit " + pos(uint64(w.lim.MaxFanout)), Severity: Error}
			return false
		}
		if len(stack)+1 > w.lim.MaxDepth {
			w.fail = &Finding{Code: CodeLimitDepth, ArtifactID: id.String(), Message: "more than " + pos(uint64(w.lim.MaxDepth)) + " references in a row from the decision", Severity: Error}
			return false
		}
		if len(w.order)+1 > w.lim.MaxSize {
			w.fail = &Finding{Code: CodeLimitSize, ArtifactID: id.String(), Message: "the audited set exceeds " + pos(uint64(w.lim.MaxSize)) + " artifacts", Severity: Error}
			return false
		}
		f := frame{id: id, start: len(w.buf)}
		w.g.References(id, w.addRef)
		f.end, f.next = len(w.buf), f.start
		w.set[id] = 1
		w.order = append(w.order, id)
		stack = append(stack, f)
		return true
	}
	push(root)
	for len(stack) > 0 && w.fail == nil {
		top := &stack[len(stack)-1]
		if top.next == top.end {
			w.set[top.id] = 2
			w.buf = w.buf[:top.start]
			stack = stack[:len(stack)-1]
			continue
		}
		t := w.buf[top.next]
		top.next++
		switch w.set[t] {
		case 1:
			w.fail = &Finding{Code: CodeCycle, ArtifactID: t.String(), Message: "a reference cycle passes through this artifact", Severity: Error}
		case 0:
			push(t)
		}
	}
}

// failure returns the findings that fail the walk, if any.
func (w *walker) failure() []Finding {
	if w.fail != nil {
		return []Finding{*w.fail}
	}
	if w.nMiss > 0 {
		out := make([]Finding, 0, len(w.missing)+1)
		ids := slices.Clone(w.missing)
		slices.SortFunc(ids, func(a, b canon.Digest) int { return compare(a, b) })
		for _, id := range ids {
			out = append(out, Finding{Code: CodeUnavailable, ArtifactID: id.String(), Message: "referenced, and not available", Severity: Error})
		}
		if w.nMiss > len(ids) {
			out = append(out, Finding{Code: CodeUnavailable, ArtifactID: "", Message: pos(uint64(w.nMiss)) + " unavailable references in all; the first " + pos(uint64(len(ids))) + " are listed", Severity: Error})
		}
		return out
	}
	return nil
}

// members returns A(D) in the walk's order, which is a function of the
// graph (references in their order, objections in stream order), so that
// the same graph always gives the same findings in the same order.
func (w *walker) members() []canon.Digest { return w.order }

func compare(a, b canon.Digest) int {
	for i := range a {
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return 0
}
