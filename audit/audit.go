// Package audit checks a recorded deliberation offline, with no NATS server
// and no model call: every artifact's id and rules, the projector's fold
// (the same state and state_digest as the live engine for the same
// messages), the closure of every decision at its own position, that every
// supervisor emission in the record is one the rules called for at that
// point and that none the rules call for at the end is missing, the
// recording's hash chain, and the rejections.
//
// The same recording gives the same report on every run and machine.
package audit

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

// Finding codes.
const (
	CodeChainBroken = "audit.chain_broken"
	CodeNoTrailer   = "audit.no_trailer"
	CodeCount       = "audit.count_mismatch"
	CodeDigest      = "audit.state_digest_mismatch"
	CodeOrder       = "audit.order"
	CodeForeign     = "audit.foreign_subject"
	CodeUnjustified = "audit.unjustified_emission"
	CodeMissing     = "audit.missing_emission"
	CodeInvalid     = "audit.invalid_artifact"
	CodeNotOpened   = "audit.never_opened"
	// CodeUnjustifiedEnd: a TERMINATION from someone without the authority
	// to end the deliberation, or one the record did not justify. The fold
	// refused it (it changed nothing), but the record holds a claim of an
	// end that is false.
	CodeUnjustifiedEnd = "audit.unjustified_end"
	// CodeFalseCompletion: the deliberation is completed, yet no
	// completed TERMINATION in it decides a final decision whose closure
	// verifies.
	CodeFalseCompletion = "audit.false_completion"
	// CodeUnjustifiedStatus: the deliberation's status is not the one
	// a TERMINATION or control message in the record justifies.
	CodeUnjustifiedStatus = "audit.unjustified_status"
)

// Codes lists the audit's finding codes (docs/ERRORS.md).
var Codes = []string{CodeChainBroken, CodeNoTrailer, CodeCount, CodeDigest, CodeOrder, CodeForeign, CodeUnjustified, CodeMissing,
	CodeInvalid, CodeNotOpened, CodeUnjustifiedEnd, CodeFalseCompletion, CodeUnjustifiedStatus,
	CodeUnsignedEmission, CodeBadCheckpoint, CodeUncovered, CodeReceipt, CodeSplitView}

// Finding is one thing the audit found.
type Finding struct {
	Code     string `json:"code"`
	Position uint64 `json:"position,omitempty"`
	// Ordinal is the message's rank within the deliberation (1 for its
	// open), the "#N" a person reads; stream recordings only (a log's
	// Position is its line).
	Ordinal    uint64 `json:"ordinal,omitempty"`
	ArtifactID string `json:"artifact_id,omitempty"`
	Message    string `json:"message"`
}

// Decision is the closure verification of one decision.
type Decision struct {
	ID       string `json:"id"`
	Position uint64 `json:"position"`
	// Ordinal is the decision's message's rank within the deliberation
	// (stream recordings only).
	Ordinal     uint64            `json:"ordinal,omitempty"`
	Status      string            `json:"status"`
	OK          bool              `json:"ok"`
	ClosureSize int               `json:"closure_size"`
	Findings    []closure.Finding `json:"findings"`
}

// Report is the audit's result.
type Report struct {
	Format       recording.Format    `json:"format"`
	Deliberation string              `json:"deliberation,omitempty"`
	Messages     int                 `json:"messages"`
	Artifacts    int                 `json:"artifacts"`
	Counts       map[events.Type]int `json:"counts"`
	Status       string              `json:"status,omitempty"`
	Rejections   map[string]int      `json:"rejections"`
	Decisions    []Decision          `json:"decisions"`
	Supervisor   int                 `json:"supervisor_emissions"`
	StateDigest  string              `json:"state_digest,omitempty"`
	// InadmissibleEvidence is the EVIDENCE the charter's provenance
	// policy holds inadmissible (docs/PROVENANCE.md).
	InadmissibleEvidence []string  `json:"inadmissible_evidence,omitempty"`
	Findings             []Finding `json:"findings"`
	NotChecked           []string  `json:"not_checked,omitempty"`
	// Signers are the keys that signed messages of the recording and what
	// rests on each; Log the deliberation's log (with trusted keys:
	// RunTrusted).
	Signers []Signer   `json:"signers,omitempty"`
	Log     *LogReport `json:"log,omitempty"`
	OK      bool       `json:"ok"`
}

// Run audits a recording.
func Run(r *recording.Reader) (*Report, error) { return RunWith(r, nil) }

// RunWith audits a recording, re-verifying provenance annotations with
// verify (nil: none is re-verified) where a charter requires admissible
// provenance.
func RunWith(r *recording.Reader, verify provenance.Verifier) (*Report, error) {
	return RunTrusted(r, verify, nil)
}

// RunTrusted audits a recording as RunWith does and, with trust, checks
// what rests on the engine's keys (docs/VERIFY.md): every supervisor
// emission signed by a trusted key; every checkpoint in the record
// verifying and signed by one; every judgment covered by such a
// checkpoint; every receipt and checkpoint given beside the recording
// reproduced by its log. It says which statements rest on which key.
func RunTrusted(r *recording.Reader, verify provenance.Verifier, trust *Trust) (*Report, error) {
	if r.Format() == recording.Log {
		return auditLog(r)
	}
	return auditStream(r, verify, trust)
}

func (rep *Report) find(code string, pos uint64, id, format string, a ...any) {
	rep.Findings = append(rep.Findings, Finding{Code: code, Position: pos, ArtifactID: id, Message: fmt.Sprintf(format, a...)})
}

func auditStream(r *recording.Reader, verify provenance.Verifier, trust *Trust) (*Report, error) {
	id := r.Header().Deliberation
	rep := &Report{Format: recording.Stream, Deliberation: id, Counts: map[events.Type]int{}, Rejections: map[string]int{}, Decisions: []Decision{}, Findings: []Finding{}}
	p := projector.New(projector.Options{Rules: termination.Rules{}})
	var tc *trustCheck
	if trust != nil {
		tc = newTrustCheck(trust)
	} else {
		rep.NotChecked = append(rep.NotChecked, "the engine's signatures and checkpoints, and receipts: give the engine's public key (--trusted-key) to check them")
	}
	var last uint64
	var lastTime time.Time
	for {
		m, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		rep.Messages++
		if m.Position <= last {
			rep.find(CodeOrder, m.Position, "", "message %d is at position %d, not after %d: the recording is out of order", rep.Messages, m.Position, last)
			continue // the fold ignores it too
		}
		if !strings.HasPrefix(m.Subject, wire.SubjectPrefix+id+".") {
			rep.find(CodeForeign, m.Position, "", "subject %s is not deliberation %s's", m.Subject, id)
		}
		last, lastTime = m.Position, m.Time
		if strings.HasSuffix(m.Subject, ".art."+wire.SupervisorToken) {
			rep.Supervisor++
		}
		// The fold judges every supervisor emission and every TERMINATION
		// against the supervisor's rules and the record at its position,
		// as the live engine does; the audit reports what it refused.
		// Re-verification, as live, comes before the fold.
		msg := projector.Msg{Seq: m.Position, Subject: m.Subject, Data: m.Data, Time: m.Time, Signature: m.Signature}
		p.Prepare(&msg, verify)
		before := len(rep.Findings)
		out := p.Apply(msg)
		if tc != nil {
			tc.add(rep, id, m, msg, out)
		}
		if r := out.Rejection; r != nil {
			switch r.Code {
			case projector.CodeSupervisorUnjustified:
				rep.find(CodeUnjustified, m.Position, r.ArtifactID, "a supervisor emission the rules did not call for at this point (refused: %s)", r.Message)
			case projector.CodeTerminationUnauthorized, projector.CodeTerminationUnjustified:
				rep.find(CodeUnjustifiedEnd, m.Position, r.ArtifactID, "%s's TERMINATION claims an end the record does not justify (refused, %s: %s)", r.Participant, r.Code, r.Message)
			}
		}
		if d := p.Deliberation(id); d != nil {
			for i := before; i < len(rep.Findings); i++ {
				rep.Findings[i].Ordinal = d.Ordinal(m.Position)
			}
		}
	}
	if b := r.ChainBroken(); b > 0 {
		rep.find(CodeChainBroken, 0, "", "the hash chain breaks at message %d: a byte changed there, or a line was removed or moved before it", b)
	}
	t := r.Trailer()
	switch {
	case t == nil:
		rep.find(CodeNoTrailer, 0, "", "the recording has no trailer: it was cut short")
	case t.Messages != r.Count():
		rep.find(CodeCount, 0, "", "the trailer counts %d messages, the recording has %d", t.Messages, r.Count())
	case t.Chain != r.Chain():
		rep.find(CodeChainBroken, 0, "", "the trailer's chain does not match the messages")
	}
	d := p.Deliberation(id)
	if d == nil {
		rep.find(CodeNotOpened, 0, "", "the recording never opens deliberation %s", id)
		rep.OK = false
		return rep, nil
	}
	rep.Status = string(d.Status)
	rep.Artifacts = d.Artifacts()
	rep.Counts = d.Counts()
	_, _, codes := d.Rejections()
	maps.Copy(rep.Rejections, codes)
	rep.StateDigest = d.StateDigest().String()
	for _, e := range d.Inadmissible() {
		rep.InadmissibleEvidence = append(rep.InadmissibleEvidence, e.String())
	}
	// A recording exported by an engine from before the rejection chains
	// carries the digest of the v2 rendering (the kept rejections in
	// detail): the same messages, folded here, give it too.
	legacy, hasLegacy := d.LegacyStateDigest()
	if t != nil && t.StateDigest != "" && t.StateDigest != rep.StateDigest && !(hasLegacy && t.StateDigest == legacy.String()) {
		rep.find(CodeDigest, 0, "", "the trailer's state_digest %s is not the fold's %s", t.StateDigest, rep.StateDigest)
	}
	for _, dec := range d.Decisions() {
		n, _ := d.Node(dec)
		res := d.Verify(dec, 0, d.ClosureLimits())
		rep.Decisions = append(rep.Decisions, Decision{ID: dec.String(), Position: n.Seq, Ordinal: d.Ordinal(n.Seq), Status: res.Status, OK: res.OK, ClosureSize: res.ClosureSize, Findings: res.Findings})
	}
	checkStatus(rep, d)
	if tc != nil {
		tc.finish(rep, id, d)
	}
	// Nothing the rules call for may be missing at the end of the record.
	for _, e := range termination.Decide(d, lastTime) {
		rep.find(CodeMissing, 0, e.Artifact.ID.String(), "the rules call for a supervisor %s (%s) that the record lacks", e.Artifact.Type, e.Reason)
	}
	rep.OK = len(rep.Findings) == 0
	return rep, nil
}

// checkStatus checks, apart from the fold's own rules, that the status is
// the one the record justifies: completed only through a completed
// TERMINATION deciding a final decision whose closure verifies; deadlock,
// exhausted and suspended only through a TERMINATION of that state;
// cancelled only through a cancel control message.
func checkStatus(rep *Report, d *projector.Deliberation) {
	var states []events.TerminationState
	completes := false
	for _, id := range d.Terminations() {
		n, _ := d.Node(id)
		states = append(states, n.Termination.State)
		if n.Termination.State == events.Completed && decidesVerified(d, n) {
			completes = true
		}
	}
	switch s := d.Status; {
	case s == api.StatusCompleted && !completes:
		rep.find(CodeFalseCompletion, 0, "", "the deliberation is completed, but no completed TERMINATION decides a final decision whose closure verifies")
	case s == api.StatusCancelled && d.CancelledAt == 0:
		rep.find(CodeUnjustifiedStatus, 0, "", "the deliberation is cancelled, but no cancel control message is in the record")
	case s == api.StatusDeadlock || s == api.StatusExhausted:
		if !slices.Contains(states, events.TerminationState(s)) {
			rep.find(CodeUnjustifiedStatus, 0, "", "the deliberation is %s, but no %s TERMINATION is in the record", s, s)
		}
	}
}

// decidesVerified reports whether the TERMINATION n decides a final
// decision whose closure verifies.
func decidesVerified(d *projector.Deliberation, n projector.Node) bool {
	for _, r := range n.References {
		if r.Relation != events.Decides {
			continue
		}
		if t, ok := d.Node(r.Target); ok && t.Decision != nil && t.Decision.Status == events.Final && d.Verify(r.Target, 0, d.ClosureLimits()).OK {
			return true
		}
	}
	return false
}

func auditLog(r *recording.Reader) (*Report, error) {
	rep := &Report{Format: recording.Log, Counts: map[events.Type]int{}, Rejections: map[string]int{}, Decisions: []Decision{}, Findings: []Finding{},
		NotChecked: []string{"the projector's fold and state_digest, supervisor emissions, who published each TERMINATION, rejections and the hash chain: an artifact log carries no control messages, subjects or times; audit a stream recording for those"}}
	g := closure.NewMemGraph()
	var decisions []canon.Digest
	type completion struct {
		ID         canon.Digest
		Position   uint64
		References []events.Reference
	}
	var terms []completion
	for {
		m, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		rep.Messages++
		a, err := events.Validate(m.Data)
		if err != nil {
			var c interface{ ErrorCode() string }
			code := "unknown"
			if errors.As(err, &c) {
				code = c.ErrorCode()
			}
			rep.find(CodeInvalid, m.Position, "", "line %d is not a valid artifact (%s): an artifact log holds only artifacts that entered the DAG", m.Position, code)
			continue
		}
		if _, dup := g.Lookup(a.ID); dup {
			rep.find(CodeInvalid, m.Position, a.ID.String(), "line %d repeats an artifact", m.Position)
			continue
		}
		for _, ref := range a.References {
			if _, ok := g.Lookup(ref.Target); !ok {
				rep.find(CodeOrder, m.Position, a.ID.String(), "line %d references %s, which no earlier line holds: a line is missing or out of order", m.Position, ref.Target)
			}
		}
		g.Add(a, m.Position)
		rep.Artifacts++
		rep.Counts[a.Type]++
		if a.Type == events.TypeDecision {
			decisions = append(decisions, a.ID)
		}
		if t := a.TerminationPayload(); t != nil && t.State == events.Completed {
			terms = append(terms, completion{a.ID, m.Position, a.References})
		}
	}
	// A completed TERMINATION must decide a final decision whose closure
	// verifies.
	for _, t := range terms {
		ok := false
		for _, ref := range t.References {
			if info, found := g.Lookup(ref.Target); ref.Relation == events.Decides && found && info.Decision != nil &&
				info.Decision.Status == events.Final && closure.Verify(g, ref.Target, 0, closure.DefaultLimits).OK {
				ok = true
			}
		}
		if !ok {
			rep.find(CodeFalseCompletion, t.Position, t.ID.String(), "line %d is a completed TERMINATION that decides no final decision whose closure verifies", t.Position)
		}
	}
	for _, dec := range decisions {
		info, _ := g.Lookup(dec)
		res := closure.Verify(g, dec, 0, closure.DefaultLimits)
		rep.Decisions = append(rep.Decisions, Decision{ID: dec.String(), Position: info.Position, Status: res.Status, OK: res.OK, ClosureSize: res.ClosureSize, Findings: res.Findings})
	}
	rep.OK = len(rep.Findings) == 0
	return rep, nil
}

// where names a message for people: "#N", its ordinal within the
// deliberation, in a stream recording; "line N" in an artifact log.
func (rep *Report) where(position, ordinal uint64) string {
	switch {
	case ordinal > 0:
		return "#" + strconv.FormatUint(ordinal, 10)
	case rep.Format == recording.Log:
		return "line " + strconv.FormatUint(position, 10)
	}
	return "at position " + strconv.FormatUint(position, 10)
}

// Text renders a report for people: messages are named by their ordinal
// within the deliberation ("#7"), the JSON report carries both.
func (rep *Report) Text() string {
	var b strings.Builder
	verdict := "OK"
	if !rep.OK {
		verdict = "FINDINGS"
	}
	fmt.Fprintf(&b, "audit        %s (%s recording)\n", verdict, rep.Format)
	if rep.Deliberation != "" {
		fmt.Fprintf(&b, "deliberation %s\nstatus       %s\n", rep.Deliberation, rep.Status)
	}
	fmt.Fprintf(&b, "messages     %d\nartifacts    %d\n", rep.Messages, rep.Artifacts)
	for _, t := range events.Types {
		if rep.Counts[t] > 0 {
			fmt.Fprintf(&b, "  %-12s %d\n", t, rep.Counts[t])
		}
	}
	if len(rep.Rejections) > 0 {
		b.WriteString("rejections\n")
		for _, c := range slices.Sorted(maps.Keys(rep.Rejections)) {
			fmt.Fprintf(&b, "  %-32s %d\n", c, rep.Rejections[c])
		}
	}
	for _, d := range rep.Decisions {
		v := "verifies"
		if !d.OK {
			v = "does not verify"
		}
		fmt.Fprintf(&b, "decision     %s %s (%s): %s, closure %d\n", rep.where(d.Position, d.Ordinal), d.ID, d.Status, v, d.ClosureSize)
		for _, f := range d.Findings {
			fmt.Fprintf(&b, "  %s %s: %s\n", f.Code, f.ArtifactID, f.Message)
		}
	}
	if rep.Format == recording.Stream {
		fmt.Fprintf(&b, "supervisor   %d emissions, each checked against the rules\n", rep.Supervisor)
	}
	for _, e := range rep.InadmissibleEvidence {
		fmt.Fprintf(&b, "provenance   EVIDENCE %s is inadmissible under the charter's policy\n", e)
	}
	if rep.StateDigest != "" {
		fmt.Fprintf(&b, "state_digest %s\n", rep.StateDigest)
	}
	rep.trustText(&b)
	for _, f := range rep.Findings {
		fmt.Fprintf(&b, "finding      %s", f.Code)
		if f.Position > 0 {
			fmt.Fprintf(&b, " %s", rep.where(f.Position, f.Ordinal))
		}
		fmt.Fprintf(&b, ": %s\n", f.Message)
	}
	for _, n := range rep.NotChecked {
		fmt.Fprintf(&b, "not checked  %s\n", n)
	}
	return b.String()
}
