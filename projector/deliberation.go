package projector

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/signing"
	"github.com/parley-engine/parley/tlog"
	"github.com/parley-engine/parley/wire"
)

// typeIndex numbers the artifact types compactly; typeOf reverses it.
var typeIndex = map[events.Type]uint8{
	events.TypeClaim: 0, events.TypeEvidence: 1, events.TypeObjection: 2, events.TypeRevision: 3,
	events.TypeDecision: 4, events.TypeFailure: 5, events.TypeTermination: 6,
}

var typeOf = [7]events.Type{events.TypeClaim, events.TypeEvidence, events.TypeObjection, events.TypeRevision,
	events.TypeDecision, events.TypeFailure, events.TypeTermination}

var relIndex = map[events.Relation]uint8{
	events.NoRelation: 0, events.Supports: 1, events.ObjectsTo: 2, events.Revises: 3,
	events.Supersedes: 4, events.Considers: 5, events.Decides: 6,
}

var relOf = [7]events.Relation{events.NoRelation, events.Supports, events.ObjectsTo, events.Revises,
	events.Supersedes, events.Considers, events.Decides}

// ref is a reference kept compactly, in the deliberation's reference arena.
type ref struct {
	target canon.Digest
	rel    uint8
}

// node is an artifact in the DAG, kept without pointers so that a large
// projection costs the garbage collector nothing to scan: the body stays in
// the stream at seq, the references live in the deliberation's arena, and
// the rare payloads the fold needs later (DECISION, TERMINATION,
// extensions) live in a side table.
type node struct {
	seq      uint64
	depth    uint32 // references in a row down to a root
	refStart uint32
	refLen   uint32
	part     int32
	extra    int32 // index into Deliberation.extras, or -1
	typ      uint8
	blocking bool
}

// extra holds what a node keeps beyond the compact fields.
type extra struct {
	decision    *events.Decision
	termination *events.Termination
	extensions  map[string][]byte
	provenance  *Admissibility
}

// Node is the read-only view of an artifact in the DAG.
type Node struct {
	Seq         uint64
	Participant string
	Type        events.Type
	Blocking    bool                // a blocking OBJECTION
	Decision    *events.Decision    // a DECISION's payload
	Termination *events.Termination // a TERMINATION's payload
	Extensions  map[string][]byte
	References  []events.Reference
	// Provenance is an EVIDENCE's judgement under the charter's
	// provenance policy (nil when the policy does not concern it).
	Provenance *Admissibility
}

// candidate is an artifact on its way into the DAG: its message's
// position, participant, stream time and re-verification.
type candidate struct {
	art         *events.Artifact
	seq         uint64
	participant string
	time        time.Time // the message's stream time
	// reverified is the message's Msg.Reverified, for the judgement of an
	// EVIDENCE under a provenance policy.
	reverified []provenance.Verification
}

// Deliberation is the projected state of one deliberation.
type Deliberation struct {
	opts Options

	ID       string
	Title    string
	Status   api.Status
	Charter  *api.Charter
	OpenedAt uint64 // position of the open control message
	Position uint64 // position of the last message that touched it
	Round    int

	// Times from the stream (Msg.Time): when the deliberation opened, and
	// when it last accepted an artifact from a participant.
	OpenedTime     time.Time
	LastActivity   time.Time
	LastActivityAt uint64 // position of that artifact
	// Tokens and CostUSDMicros sum the parley.usage extensions of accepted
	// artifacts.
	Tokens        int64
	CostUSDMicros int64
	// Stall counts the accepted participant artifacts since the last one
	// that added a claim, revision or evidence or disposed of an objection.
	Stall int

	// SuspendedAt and CancelledAt are the positions of the control
	// messages that suspended or cancelled the deliberation (0: none), and
	// CancelReason the cancel's reason.
	SuspendedAt  uint64
	CancelledAt  uint64
	CancelReason string

	limits Limits
	policy Policy
	// imported: the deliberation was opened by an import; importing: its
	// import is not complete yet (only the importer's messages count).
	imported, importing bool
	// The messages that named the deliberation without being part of its
	// record (another's during its import, an importer's it refused): the
	// most recent MaxKept, their total, and the last one's position (for
	// the fold's guard against redelivery). Not in the state digest: they
	// are not the deliberation's.
	foreign   kept[api.Rejection]
	foreignN  int
	foreignAt uint64
	now       time.Time // the time of the message being applied
	lastTime  time.Time // the time the fold gave the deliberation's last message

	index    idIndex                  // artifact id -> nodes (keys in nodeIDs)
	closures closureCache             // verifications at the current state (graph.go)
	objTo    map[canon.Digest][]int32 // target -> blocking objections (nodes) that object to it
	nodes    []node
	refs     []ref
	extras   []extra
	nodeIDs  []canon.Digest // node -> id
	seqs     positions      // the positions of the deliberation's messages, in order
	// log is the frontier of the deliberation's log (log.go): a leaf for
	// every message of seqs. judgedSize is its size after the last
	// judgment (an accepted DECISION, FAILURE or TERMINATION, or the
	// end), ckptSize the size the last admitted checkpoint covers, ckptN
	// the checkpoints admitted; ended: the status was terminal at the
	// last leaf.
	log        *tlog.Frontier
	judgedSize uint64
	ckptSize   uint64
	ckptN      int
	ckptBad    int
	ckptAt     uint64 // the position of the last checkpoint message
	ended      bool
	superN     int // nodes published by the supervisor
	// What the supervisor has answered: decisions its FAILUREs consider,
	// and the rejections (by message ordinal) its FAILUREs name (parley.message).
	judged   map[canon.Digest]bool
	answered map[uint64]bool
	// breaches are the limit-breach rejections no supervisor FAILURE has
	// answered yet, oldest first, kept apart from the list of rejections
	// (which keeps the most recent) so that the oldest is never forgotten
	// however many follow it: at most MaxBreaches of them and
	// MaxBreachBytes (breachBytes), a breach past either not kept
	// (breachesDropped counts them).
	breaches []api.Rejection
	tips     map[canon.Digest]struct{}
	open     map[canon.Digest]struct{} // blocking objections without a public disposition
	decs     []canon.Digest
	terms    []canon.Digest
	counts   [7]int
	parts    []string
	partIdx  map[string]int32
	perPart  []int
	allowed  map[string]bool // nil: anyone may take part
	rejects  kept[api.Rejection]
	rejCodes map[string]int
	rejTotal int
	late     kept[Late]
	lateN    int
	// rejChain and lateChain hash every rejection and late artifact, in
	// order (chain): the state digest covers them all, whatever the
	// kept lists still hold.
	rejChain, lateChain canon.Digest
	// kl is the projection's bound on the bytes of kept lists.
	kl *keptLedger
	// breachBytes is about the bytes breaches hold (keptOf), and
	// breachesDropped counts the breaches not kept for the bounds.
	breachBytes     int64
	breachesDropped int
	// The EVIDENCE the provenance policy judged (nodes, in stream
	// order), and the inadmissible ones by the targets of their supports
	// references.
	judgedEv []int32
	inadm    map[canon.Digest][]int32
	// digest caches StateDigest for the state it was computed in.
	digest atomic.Pointer[cachedDigest]
}

func newDeliberation(id string, opts Options) *Deliberation {
	return &Deliberation{
		opts: opts, ID: id,
		objTo: map[canon.Digest][]int32{}, tips: map[canon.Digest]struct{}{},
		open: map[canon.Digest]struct{}{}, partIdx: map[string]int32{},
		rejCodes: map[string]int{},
	}
}

func (d *Deliberation) reject(seq uint64, participant, id, class, code, msg string) Outcome {
	r := api.Rejection{Position: seq, Participant: summary(participant, maxTokenText), ArtifactID: id, Class: class, Code: code, Message: summary(msg, MaxRejectionText)}
	d.Position = seq
	d.rejTotal++
	d.rejCodes[code]++
	d.rejects.add(r, d.opts.MaxKept, d.kl)
	d.rejChain = chain(d.rejChain, "rejection", d.newOrdinal(seq), r.Code, r.ArtifactID, r.Participant)
	if slices.Contains(LimitCodes, code) {
		d.keepBreach(r)
	}
	return Outcome{Deliberation: d.ID, Rejection: &r}
}

func (d *Deliberation) rejectErr(seq uint64, participant, id string, err error) Outcome {
	var c interface {
		ErrorClass() string
		ErrorCode() string
	}
	if !errors.As(err, &c) {
		return d.reject(seq, participant, id, ClassInvalidSubmission, "internal", err.Error())
	}
	msg := err.Error()
	var ce *canon.Error
	var ee *events.Error
	var se *signing.Error
	var te *tlog.Error
	switch {
	case errors.As(err, &te):
		msg = te.Msg
	case errors.As(err, &ce):
		msg = ce.Msg
	case errors.As(err, &se):
		msg = se.Msg
	case errors.As(err, &ee):
		msg = ee.Msg
		if ee.Path != "" {
			msg += " (at " + ee.Path + ")"
		}
	}
	return d.reject(seq, participant, id, c.ErrorClass(), c.ErrorCode(), msg)
}

func (d *Deliberation) control(seq uint64, c Control, charter *api.Charter) Outcome {
	if d.Status.Terminal() {
		return d.reject(seq, "", "", ClassInvalidSubmission, CodeTerminal, c.Op+" after the deliberation ended ("+string(d.Status)+")")
	}
	switch c.Op {
	case "open":
		if d.Status != "" {
			return d.reject(seq, "", "", ClassInvalidSubmission, CodeAlreadyOpen, "the deliberation is already open")
		}
		d.Status, d.Charter, d.Title, d.OpenedAt, d.OpenedTime, d.LastActivity = api.StatusOpen, charter, charter.Title, seq, d.now, d.now
		if len(charter.Participants) > 0 {
			d.allowed = map[string]bool{}
			for _, t := range charter.Participants {
				d.allowed[t] = true
			}
		}
	case "suspend":
		d.Status, d.SuspendedAt = api.StatusSuspended, seq
	case "resume":
		d.Status, d.SuspendedAt = api.StatusOpen, 0
	case "cancel":
		d.Status, d.CancelledAt, d.CancelReason = api.StatusCancelled, seq, c.Reason
	case "round":
		if c.Round <= d.Round {
			return d.reject(seq, "", "", ClassInvalidSubmission, CodeControlInvalid, "round must increase")
		}
		d.Round = c.Round
	}
	d.Position = seq
	return Outcome{Deliberation: d.ID, Control: c.Op}
}

func (d *Deliberation) artifact(m Msg, participant string) Outcome {
	d.now = m.Time
	a, err := m.Artifact, m.Invalid
	if a == nil && err == nil {
		a, err = d.opts.Validator.ValidateTransient(m.Data)
	}
	if err != nil {
		return d.rejectErr(m.Seq, participant, "", err)
	}
	id := func() string { return a.ID.String() }
	// Who published it comes first: an artifact whose signature the
	// charter's binding refuses is nobody's (not even late).
	if err := d.signatureRule(m, participant, a); err != nil {
		return d.rejectErr(m.Seq, participant, id(), err)
	}
	super := participant == wire.SupervisorToken
	// A TERMINATION from one of the charter's terminators (authorize
	// judges whether the record justifies it).
	term := a.Type == events.TypeTermination && d.terminator(participant)
	switch {
	case (super || term) && d.Status.Terminal() && d.recordsEnd(a):
		// The TERMINATION recording an end that a control message decided.
	case d.Status.Terminal():
		d.Position = m.Seq
		d.lateN++
		l := Late{Position: m.Seq, Participant: participant, ArtifactID: id()}
		d.late.add(l, d.opts.MaxKept, d.kl)
		d.lateChain = chain(d.lateChain, "late", d.newOrdinal(m.Seq), l.ArtifactID, l.Participant)
		return Outcome{Deliberation: d.ID, Late: true}
	case d.Status == api.StatusSuspended && !super && !term:
		return d.reject(m.Seq, participant, id(), ClassInvalidSubmission, CodeSuspended, "the deliberation is suspended")
	case !super && !term && d.allowed != nil && !d.allowed[participant]:
		return d.reject(m.Seq, participant, id(), ClassInvalidSubmission, CodeNotInCharter, participant+" is not a participant of the charter")
	}
	if d.index.has(d.nodeIDs, a.ID) {
		return d.reject(m.Seq, participant, id(), ClassInvalidSubmission, CodeDuplicate, "the artifact is already in the deliberation")
	}
	// Only the record justifies an end, and only the rules a supervisor
	// artifact.
	if code, msg := d.authorize(m, a, participant); code != "" {
		return d.reject(m.Seq, participant, id(), ClassInvalidSubmission, code, msg)
	}
	// Only the principal resolves a binding moment (binding.go).
	if code, msg := d.bindingRule(a, participant); code != "" {
		return d.reject(m.Seq, participant, id(), ClassInvalidSubmission, code, msg)
	}
	if !super {
		if code, msg := d.breach(m, a, participant); code != "" {
			return d.reject(m.Seq, participant, id(), ClassInvalidSubmission, code, msg)
		}
	}
	// Every reference must already be in the DAG: an artifact takes effect
	// at its own position, never at an earlier one, so nothing waits for
	// what comes later (fail closed on an unavailable reference). An
	// artifact held until its references came would be admitted into a
	// record that others had already judged: a blocking objection that
	// considers the supervisor's coming TERMINATION would enter the DAG at
	// its earlier position after the end.
	for _, r := range a.References {
		if !d.index.has(d.nodeIDs, r.Target) {
			return d.reject(m.Seq, participant, id(), events.ClassInvalidArtifact, CodeUnknownTarget,
				"references "+r.Target.String()+", which is not in the deliberation")
		}
	}
	out := Outcome{Deliberation: d.ID}
	d.admit(&candidate{art: a, seq: m.Seq, participant: participant, time: d.now, reverified: m.Reverified}, &out)
	return out
}

// admit checks relation applicability and limits at the DAG and, when they
// hold, appends the artifact to it.
func (d *Deliberation) admit(p *candidate, out *Outcome) {
	a := p.art
	for _, r := range a.References {
		t := &d.nodes[d.node(r.Target)]
		tv := events.Target{ID: r.Target, Type: typeOf[t.typ]}
		if t.extra >= 0 {
			if dp := d.extras[t.extra].decision; dp != nil && dp.Status == events.Final {
				tv.FinalDecision = true
			}
		}
		if err := events.CheckRelation(a, r.Relation, tv, true); err != nil {
			out.Rejection = d.rejectErr(p.seq, p.participant, a.ID.String(), err).Rejection
			return
		}
	}
	var depth uint32
	for _, r := range a.References {
		depth = max(depth, d.nodes[d.node(r.Target)].depth+1)
	}
	if l := d.limits.MaxDepth; l > 0 && int(depth) > l && p.participant != wire.SupervisorToken {
		out.Rejection = d.reject(p.seq, p.participant, a.ID.String(), ClassInvalidSubmission, CodeLimitGraphDepth,
			"graph depth "+strconv.Itoa(int(depth))+" exceeds max_depth "+strconv.Itoa(l)).Rejection
		return
	}
	d.Position = p.seq
	n := node{seq: p.seq, depth: depth, part: d.participant(p.participant), typ: typeIndex[a.Type], extra: -1,
		refStart: uint32(len(d.refs)), refLen: uint32(len(a.References))}
	if p.participant != wire.SupervisorToken {
		d.LastActivity, d.LastActivityAt = d.now, p.seq
		d.account(a)
	} else {
		d.superN++
		d.noteSupervisor(a)
	}
	for _, r := range a.References {
		d.refs = append(d.refs, ref{r.Target, relIndex[r.Relation]})
		delete(d.tips, r.Target)
	}
	var ex extra
	switch p := a.Payload.(type) {
	case *events.Objection:
		n.blocking = p.Blocking
		if p.Blocking {
			d.open[a.ID] = struct{}{}
			for _, r := range a.References {
				if r.Relation == events.ObjectsTo {
					d.objTo[r.Target] = append(d.objTo[r.Target], int32(len(d.nodes)))
				}
			}
		}
	case *events.Decision:
		ex.decision = p
		d.decs = append(d.decs, a.ID)
		for _, disp := range p.ObjectionDispositions {
			if disp.Disposition.Public() {
				delete(d.open, disp.Objection)
			}
		}
	case *events.Termination:
		ex.termination = p
		d.terms = append(d.terms, a.ID)
		d.Status = api.Status(p.State)
		if p.State == events.Suspended {
			d.Status = api.StatusSuspended
		}
	}
	if len(a.Extensions) > 0 {
		ex.extensions = a.Extensions
	}
	if a.Type == events.TypeEvidence && d.policy.Provenance != nil && p.participant != wire.SupervisorToken {
		ex.provenance = d.judge(a, p.time, p.reverified)
	}
	if ex.decision != nil || ex.termination != nil || ex.extensions != nil || ex.provenance != nil {
		n.extra = int32(len(d.extras))
		d.extras = append(d.extras, ex)
	}
	d.nodes = append(d.nodes, n)
	d.nodeIDs = append(d.nodeIDs, a.ID)
	d.index.put(d.nodeIDs, int32(len(d.nodes)-1))
	d.noteAdmissibility(int32(len(d.nodes)-1), ex.provenance)
	d.tips[a.ID] = struct{}{}
	d.counts[n.typ]++
	d.perPart[n.part]++
	out.Accepted = append(out.Accepted, a.ID)
	out.Admitted = append(out.Admitted, Admission{Position: p.seq, Participant: p.participant, Artifact: a})
}

func (d *Deliberation) participant(token string) int32 {
	if i, ok := d.partIdx[token]; ok {
		return i
	}
	i := int32(len(d.parts))
	d.parts = append(d.parts, token)
	d.perPart = append(d.perPart, 0)
	d.partIdx[token] = i
	return i
}

// view builds the read-only view of a node.
func (d *Deliberation) view(n *node) Node {
	v := Node{Seq: n.seq, Participant: d.parts[n.part], Type: typeOf[n.typ], Blocking: n.blocking}
	if n.extra >= 0 {
		e := d.extras[n.extra]
		v.Decision, v.Termination, v.Extensions, v.Provenance = e.decision, e.termination, e.extensions, e.provenance
	}
	v.References = make([]events.Reference, n.refLen)
	for i, r := range d.refs[n.refStart : n.refStart+n.refLen] {
		v.References[i] = events.Reference{Target: r.target, Relation: relOf[r.rel]}
	}
	return v
}

// Node returns the artifact id's node in the DAG.
func (d *Deliberation) Node(id canon.Digest) (Node, bool) {
	i, ok := d.index.get(d.nodeIDs, id)
	if !ok {
		return Node{}, false
	}
	return d.view(&d.nodes[i]), true
}

// Position returns the stream position of an artifact in the DAG, or 0.
func (d *Deliberation) PositionOf(id canon.Digest) uint64 {
	if i, ok := d.index.get(d.nodeIDs, id); ok {
		return d.nodes[i].seq
	}
	return 0
}

// Artifacts returns the number of artifacts in the DAG.
func (d *Deliberation) Artifacts() int { return len(d.nodes) }

// ids returns the artifact ids in node order (not to be modified).
func (d *Deliberation) ids() []canon.Digest { return d.nodeIDs }

// node returns the node of id, which the caller knows is one.
func (d *Deliberation) node(id canon.Digest) int32 {
	i, _ := d.index.get(d.nodeIDs, id)
	return i
}

// Nodes calls fn for every artifact in the DAG, in order of admission.
func (d *Deliberation) Nodes(fn func(canon.Digest, Node)) {
	ids := d.ids()
	for i := range d.nodes {
		fn(ids[i], d.view(&d.nodes[i]))
	}
}

// Counts returns the number of artifacts by type.
func (d *Deliberation) Counts() map[events.Type]int {
	m := make(map[events.Type]int, len(events.Types))
	for _, t := range events.Types {
		m[t] = d.counts[typeIndex[t]]
	}
	return m
}

// ParticipantCounts returns the accepted artifacts by participant.
func (d *Deliberation) ParticipantCounts() map[string]int {
	m := make(map[string]int, len(d.parts))
	for i, t := range d.parts {
		m[t] = d.perPart[i]
	}
	return m
}

// Tips returns the artifacts no accepted artifact references, sorted.
func (d *Deliberation) Tips() []canon.Digest { return sortedKeys(d.tips) }

// OpenBlockingObjections returns the blocking objections no DECISION has
// given a public disposition, sorted.
func (d *Deliberation) OpenBlockingObjections() []canon.Digest { return sortedKeys(d.open) }

// Decisions returns the DECISIONs in stream order.
func (d *Deliberation) Decisions() []canon.Digest { return d.decs }

// Terminations returns the TERMINATIONs in stream order.
func (d *Deliberation) Terminations() []canon.Digest { return d.terms }

// Rejections returns the kept rejections (the most recent), their total,
// and the complete counts by code.
func (d *Deliberation) Rejections() ([]api.Rejection, int, map[string]int) {
	return d.rejects.list(), d.rejTotal, d.rejCodes
}

// Late returns the kept late artifacts and their total.
func (d *Deliberation) Late() ([]Late, int) { return d.late.list(), d.lateN }

func sortedKeys(m map[canon.Digest]struct{}) []canon.Digest {
	out := make([]canon.Digest, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b canon.Digest) int { return compareDigest(a, b) })
	return out
}

func compareDigest(a, b canon.Digest) int {
	for i := range a {
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return 0
}

// recordsEnd reports whether a, from the supervisor, is the TERMINATION
// that records the end a control message decided (cancel): it enters the
// DAG instead of being late.
func (d *Deliberation) recordsEnd(a *events.Artifact) bool {
	t := a.TerminationPayload()
	return t != nil && api.Status(t.State) == d.Status && !d.Recorded(t.State)
}

// breach checks a participant's artifact against the charter's
// per-artifact limits.
func (d *Deliberation) breach(m Msg, a *events.Artifact, participant string) (string, string) {
	l := d.limits
	itoa := strconv.Itoa
	switch {
	case l.MaxArtifactBytes > 0 && len(m.Data) > l.MaxArtifactBytes:
		return CodeLimitArtifactSize, itoa(len(m.Data)) + " bytes exceed max_artifact_bytes " + itoa(l.MaxArtifactBytes)
	case l.MaxReferences > 0 && len(a.References) > l.MaxReferences:
		return CodeLimitReferences, itoa(len(a.References)) + " references exceed max_references " + itoa(l.MaxReferences)
	case l.MaxArtifacts > 0 && d.ParticipantArtifacts() >= l.MaxArtifacts:
		return CodeLimitArtifacts, "the deliberation already holds max_artifacts " + itoa(l.MaxArtifacts)
	case l.MaxArtifactsPerParticipant > 0:
		if i, ok := d.partIdx[participant]; ok && d.perPart[i] >= l.MaxArtifactsPerParticipant {
			return CodeLimitParticipant, participant + " already has max_artifacts_per_participant " + itoa(l.MaxArtifactsPerParticipant)
		}
	}
	return "", ""
}

// Usage is the parley.usage extension.
type Usage struct {
	InputTokens   int64 `json:"input_tokens"`
	OutputTokens  int64 `json:"output_tokens"`
	CostUSDMicros int64 `json:"cost_usd_micros"`
}

// UsageExtension is the extension name of token and cost accounting.
const UsageExtension = "parley.usage"

// account sums usage and tracks the stall window for an accepted
// participant artifact.
func (d *Deliberation) account(a *events.Artifact) {
	if raw, ok := a.Extensions[UsageExtension]; ok {
		var u Usage
		if json.Unmarshal(raw, &u) == nil && u.InputTokens >= 0 && u.OutputTokens >= 0 && u.CostUSDMicros >= 0 {
			d.Tokens += u.InputTokens + u.OutputTokens
			d.CostUSDMicros += u.CostUSDMicros
		}
	}
	progress := false
	switch p := a.Payload.(type) {
	case *events.Claim, *events.RevisionPayload, *events.Evidence:
		progress = true
	case *events.Decision:
		for _, x := range p.ObjectionDispositions {
			if x.Disposition.Public() {
				progress = true
			}
		}
	}
	if progress {
		d.Stall = 0
	} else {
		d.Stall++
	}
}

// Has reports whether an artifact is in the DAG.
func (d *Deliberation) Has(id canon.Digest) bool { return d.index.has(d.nodeIDs, id) }

// Recorded reports whether a TERMINATION with state s is in the DAG.
func (d *Deliberation) Recorded(s events.TerminationState) bool {
	for _, id := range d.terms {
		if n := d.nodes[d.node(id)]; n.extra >= 0 && d.extras[n.extra].termination.State == s {
			return true
		}
	}
	return false
}

// HasFinalDecision reports whether a final DECISION is in the DAG.
func (d *Deliberation) HasFinalDecision() bool {
	for _, id := range d.decs {
		if n := d.nodes[d.node(id)]; d.extras[n.extra].decision.Status == events.Final {
			return true
		}
	}
	return false
}

// ParticipantArtifacts counts the participants' artifacts in the DAG (the
// supervisor's do not count against max_artifacts).
func (d *Deliberation) ParticipantArtifacts() int { return len(d.nodes) - d.superN }

// MessageExtension names the message a supervisor FAILURE answers, by its
// ordinal among the deliberation's messages (see Ordinal).
const MessageExtension = "parley.message"

// noteSupervisor records what a supervisor FAILURE answers.
func (d *Deliberation) noteSupervisor(a *events.Artifact) {
	if a.Type != events.TypeFailure {
		return
	}
	if d.judged == nil {
		d.judged, d.answered = map[canon.Digest]bool{}, map[uint64]bool{}
	}
	for _, r := range a.References {
		if r.Relation == events.Considers {
			d.judged[r.Target] = true
		}
	}
	if raw, ok := a.Extensions[MessageExtension]; ok {
		if p, err := strconv.ParseUint(string(raw), 10, 64); err == nil {
			d.answered[p] = true
			d.breaches = slices.DeleteFunc(d.breaches, func(r api.Rejection) bool {
				if d.Ordinal(r.Position) != p {
					return false
				}
				_, size := keptOf(&r)
				d.breachBytes -= size
				if d.kl != nil {
					d.kl.breachBytes.Add(-size)
				}
				return true
			})
		}
	}
}

// Judged reports whether a supervisor FAILURE already considers decision.
func (d *Deliberation) Judged(decision canon.Digest) bool { return d.judged[decision] }

// MaxBreaches and MaxBreachBytes bound, per deliberation, the limit-breach
// rejections kept for the supervisor to answer (Breaches): a breach that
// finds MaxBreaches unanswered, or whose summary would take their bytes
// (as the kept lists count them) past MaxBreachBytes, is not kept, and no
// FAILURE answers it. It is still rejected, counted by code and chained
// into the state digest like every rejection, and counted among the
// deliberation's dropped breaches (BreachesDropped). The bounds are part
// of the fold, not settings: the fold admits a supervisor FAILURE only
// for a breach it keeps, so every fold of a stream must keep the same
// ones. They are per deliberation (never across the projection, whose
// deliberations differ between an engine's shards and an audit of one
// deliberation), so the most the engine keeps for them is
// max-deliberations × MaxBreachBytes.
const (
	MaxBreaches    = 32
	MaxBreachBytes = 8 << 10
)

// keepBreach keeps r among the breaches to answer, unless the bounds are
// reached: the oldest unanswered are kept, the newest are dropped.
func (d *Deliberation) keepBreach(r api.Rejection) {
	_, size := keptOf(&r)
	if len(d.breaches) >= MaxBreaches || d.breachBytes+size > MaxBreachBytes {
		d.breachesDropped++
		if d.kl != nil {
			d.kl.breachesDropped.Add(1)
		}
		return
	}
	d.breaches = append(d.breaches, r)
	d.breachBytes += size
	if d.kl != nil {
		d.kl.breachBytes.Add(size)
	}
}

// Breaches returns the limit-breach rejections no supervisor FAILURE has
// answered yet, oldest first (not to be modified). Unlike the kept
// rejections, which are the most recent MaxKept, none is dropped once it
// is kept: a breach is kept unless MaxBreaches or MaxBreachBytes of them
// already wait, and the supervisor answers each kept one.
func (d *Deliberation) Breaches() []api.Rejection { return d.breaches }

// BreachBytes reports about the bytes the unanswered breaches hold (at
// most MaxBreachBytes) and how many breaches were not kept for the bounds
// (BreachesDropped): no FAILURE answers those.
func (d *Deliberation) BreachBytes() (held int64, dropped int) {
	return d.breachBytes, d.breachesDropped
}

// Answered reports whether a supervisor FAILURE already names the
// rejection at stream position position.
func (d *Deliberation) Answered(position uint64) bool { return d.answered[d.Ordinal(position)] }

// OpenBlockingCount returns the number of open blocking objections.
func (d *Deliberation) OpenBlockingCount() int { return len(d.open) }

// Ordinal returns the rank of the message at stream position seq among the
// deliberation's messages (1 for its first), or 0 if it is not one of them.
// Ordinals do not depend on what else the stream holds: a deliberation
// imported elsewhere, or read from a recording, has the same ones.
func (d *Deliberation) Ordinal(seq uint64) uint64 {
	i, ok := d.seqs.index(seq)
	if !ok {
		return 0
	}
	return uint64(i + 1)
}

// newOrdinal is the ordinal of the message at seq as it is applied: the
// next one, until the fold counts it (Projection.count).
func (d *Deliberation) newOrdinal(seq uint64) uint64 {
	if n := d.seqs.len(); n > 0 && d.seqs.lastPos() == seq {
		return uint64(n)
	}
	return uint64(d.seqs.len() + 1)
}

// lastSeq is the position of the last message of the deliberation the
// fold has seen, part of its record or not.
func (d *Deliberation) lastSeq() uint64 {
	return max(d.foreignAt, d.seqs.lastPos(), d.ckptAt)
}

// Foreign returns the kept messages that named the deliberation without
// being part of its record (deliberation.importing, import.invalid), the
// most recent first kept last, and their total.
func (d *Deliberation) Foreign() ([]api.Rejection, int) { return d.foreign.list(), d.foreignN }

// Imported reports whether the deliberation was opened by an import (its
// messages came from the importer's subject, wire.ImportSubject).
func (d *Deliberation) Imported() bool { return d.imported }

// Importing reports whether the deliberation's import is not complete:
// until the importer ends it, no other message counts, and the supervisor
// does not judge it.
func (d *Deliberation) Importing() bool { return d.importing }

// Messages returns the number of messages of the deliberation applied.
func (d *Deliberation) Messages() int { return d.seqs.len() }
