package projector

import (
	"cmp"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/signing"
	"github.com/parley-engine/parley/tlog"
	"github.com/parley-engine/parley/wire"
)

// Msg is one stream message as the fold sees it: its stream position, its
// subject and its bytes. The runner builds it; the fold never sees a
// jetstream.Msg.
type Msg struct {
	Seq     uint64
	Subject string
	Data    []byte
	// Time is the message's stream timestamp. The fold records it (when a
	// deliberation opened, when it last accepted an artifact) for the
	// supervisor's time limits; it never reads a clock.
	Time time.Time
	// Import is what a message on the importer's subject
	// (parley.<deliberation>.art._import, wire.ImportSubject) says of the
	// message it restores: its headers, which the runner reads. The fold
	// ignores it on every other subject: anyone can set a header, and only
	// an importer's credentials may publish there.
	Import *Import
	// Artifact and Invalid are, for a message on an artifact subject,
	// Options.Validator's verdict on Data when the runner validated it
	// ahead of the fold (validation is pure, so a runner may do it in
	// parallel); both nil: the fold validates.
	Artifact *events.Artifact
	Invalid  error
	// Reverified is, for an EVIDENCE with a parley.provenance extension,
	// the relying party's re-verification of its annotations against
	// their substrates (provenance.Reverify, aligned with the set's
	// annotations), computed before Apply, outside any lock, as the time
	// is read before it; nil: no annotation was re-queried (the engine
	// has no roots), and a provenance policy judges it by the discipline
	// alone. The fold never re-queries a substrate: it reads no file and
	// runs no process.
	Reverified []provenance.Verification
	// Signature is, for a message on an artifact subject, its signature
	// headers (SignatureOf), which the fold checks against the charter's
	// key binding (docs/VERIFY.md); ignored in a deliberation whose charter
	// binds no keys.
	Signature signing.Headers
	// SignatureChecked and SignatureErr are the verdict of
	// PrepareSignature on Signature, when the runner verified it ahead of
	// the fold (an Ed25519 verification is costly, and needs no state of
	// the fold); not checked: the fold verifies.
	SignatureChecked bool
	SignatureErr     error
	// DataHash is SHA-256 of Data when DataHashed (PrepareLeaf, ahead of
	// the fold); otherwise the fold hashes Data for the message's leaf.
	DataHash   tlog.Hash
	DataHashed bool
}

// Import is an imported message's account of the message it restores
// (wire's import headers).
type Import struct {
	// Subject is the message's subject in the recording, its deliberation
	// the one imported into: a control or artifact subject of the same
	// deliberation as the import subject.
	Subject string
	// Position is its position in the recording (for export; the fold
	// orders by the stream's).
	Position uint64
	// Time is its time in the recording, zero when it says none.
	Time time.Time
	// End marks the importer's message that ends the import (it restores
	// no message: Subject is empty). The deliberation's import is
	// complete: from then on everyone's messages count.
	End bool
}

// ImportOf reads an importer's headers (wire.OriginalSubjectHeader, …)
// with get (a message header's Get), for a message on subject: nil unless
// subject is the importer's (wire.ImportSubject). A header that does not
// parse is left out; a message without its original subject is refused by
// the fold (import.invalid).
func ImportOf(subject string, get func(string) string) *Import {
	if _, kind, participant := wire.Parse(subject); kind != "art" || participant != wire.ImportToken || get == nil {
		return nil
	}
	im := &Import{Subject: get(wire.OriginalSubjectHeader), End: get(wire.ImportEndHeader) == "true"}
	if p, err := strconv.ParseUint(get(wire.OriginalPositionHeader), 10, 64); err == nil {
		im.Position = p
	}
	if t, err := time.Parse(time.RFC3339Nano, get(wire.OriginalTimeHeader)); err == nil {
		im.Time = t
	}
	return im
}

// EffectiveTime is the time the fold gives a message: its stream time, or,
// for an importer's message, the earlier original time it carries (an
// imported message keeps its original time), but never earlier than the
// previous message of its deliberation (prev) nor later than its stream
// time. Nobody else's claim of a time counts.
func EffectiveTime(m Msg, prev time.Time) time.Time {
	t := m.Time
	if m.Import != nil && !m.Import.Time.IsZero() && m.Import.Time.Before(t) {
		t = m.Import.Time
	}
	if t.Before(prev) {
		t = prev
	}
	return t
}

// ClassInvalidSubmission is the class of the rejections the projector
// itself makes (routing, deliberation state, attribution, duplicates,
// limits), beside the classes of canon and events.
const ClassInvalidSubmission = "invalid_submission"

// Codes of the projector's own rejections.
const (
	CodeSubjectInvalid      = "subject.invalid"
	CodeDeliberationInvalid = "subject.invalid_deliberation"
	CodeParticipantInvalid  = "subject.invalid_participant"
	CodeNotOpen             = "deliberation.not_open"
	CodeAlreadyOpen         = "deliberation.already_open"
	CodeSuspended           = "deliberation.suspended"
	CodeTerminal            = "deliberation.terminal"
	CodeControlInvalid      = "control.invalid"
	CodeNotInCharter        = "participant.not_in_charter"
	CodeDuplicate           = "artifact.duplicate"
	CodeLimitArtifactSize   = "limit.artifact_size"
	CodeLimitReferences     = "limit.references"
	CodeLimitGraphDepth     = "limit.graph_depth"
	CodeLimitParticipant    = "limit.participant_artifacts"
	CodeLimitArtifacts      = "limit.artifacts"
	// CodeControlTooLarge: a control message over MaxControlBytes.
	CodeControlTooLarge = "control.too_large"
	// CodeDeliberationLimit: an open past the number of deliberations the
	// projection holds (Options.MaxDeliberations). Kept among the messages
	// of no deliberation: the limit is the engine's, not the record's.
	CodeDeliberationLimit = "deliberation.limit"
	// CodeImporting: a message that is not the importer's, in a
	// deliberation whose import is not complete. It is kept among the
	// messages of no deliberation, outside the deliberation's record.
	CodeImporting = "deliberation.importing"
	// CodeImportInvalid: a message on the importer's subject whose headers
	// name no message of its deliberation, or that would restore a
	// message into a deliberation that was opened live (not imported) or
	// whose import is complete. Kept among the messages of no
	// deliberation.
	CodeImportInvalid = "import.invalid"
	// CodeUnknownTarget: the artifact references one that is not (yet) in
	// its deliberation's DAG. Nothing is held pending: an artifact takes
	// effect at its own position or not at all.
	CodeUnknownTarget = "reference.unavailable"
)

// Codes lists the projector's own rejection codes (docs/ERRORS.md).
var Codes = []string{CodeSubjectInvalid, CodeDeliberationInvalid, CodeParticipantInvalid, CodeNotOpen, CodeAlreadyOpen,
	CodeSuspended, CodeTerminal, CodeControlInvalid, CodeNotInCharter, CodeDuplicate,
	CodeLimitArtifactSize, CodeLimitReferences, CodeLimitGraphDepth, CodeLimitParticipant, CodeLimitArtifacts, CodeUnknownTarget, CodeImporting, CodeImportInvalid, CodeControlTooLarge, CodeDeliberationLimit,
	CodeSupervisorUnjustified, CodeTerminationUnauthorized, CodeTerminationUnjustified,
	CodeBindingNotPrincipal, CodeBindingInvalid, CodeBindingResolved,
	// The signature rejections (SignatureCodes), of class
	// signing.ClassSignature.
	signing.ErrNoSignature.Code, signing.ErrMalformed.Code, signing.ErrUnknownToken.Code, signing.ErrWrongKey.Code, signing.ErrBadSignature.Code}

// LimitCodes are the per-artifact limit breaches of a charter; the
// supervisor answers each with a FAILURE.
var LimitCodes = []string{CodeLimitArtifactSize, CodeLimitReferences, CodeLimitGraphDepth, CodeLimitParticipant, CodeLimitArtifacts}

// Late records a valid artifact that arrived after a terminal TERMINATION:
// it is kept, outside the state.
type Late struct {
	Position    uint64 `json:"position"`
	Participant string `json:"participant"`
	ArtifactID  string `json:"artifact_id"`
}

// Options of a Projection.
type Options struct {
	// MaxKept bounds, per deliberation, the detailed rejections and late
	// artifacts kept (the most recent ones); counts by code stay complete.
	MaxKept int
	// Validator validates artifacts (its canon options carry the size and
	// depth limits).
	Validator *events.Validator
	// Defaults are the engine-wide charter defaults.
	Defaults Defaults
	// MaxKeptBytes bounds the bytes of the summaries kept of rejected,
	// late and foreign messages across the projection (0:
	// DefaultMaxKeptBytes; negative: no bound): past it the oldest kept
	// anywhere is dropped first. Counts by code, totals and the state
	// digest cover every message whatever is dropped.
	MaxKeptBytes int64
	// MaxDeliberations bounds the deliberations the projection holds
	// (0: no bound). An open past it is refused (deliberation.limit),
	// among the messages of no deliberation.
	MaxDeliberations int
	// Rules are the supervisor's rules (termination.Rules). The fold
	// admits an artifact from _supervisor only when they call for it, and
	// a terminator's exhausted or deadlock TERMINATION only when they
	// justify it; without them, it admits neither.
	Rules Rules
}

// DefaultOptions are the defaults.
func DefaultOptions() Options {
	return Options{MaxKept: 10000, Validator: events.NewValidator()}
}

// Projection is the state of every deliberation at a stream position. Apply
// is a pure fold: the same messages in the same order always give the same
// state. A Projection is not safe for concurrent use; the runner guards it.
type Projection struct {
	opts     Options
	position atomic.Uint64 // the highest position applied (read by a deliberation's readers while another's messages are applied)
	delibs   map[string]*Deliberation
	// Messages that name no deliberation (or not one that was ever
	// opened) are recorded here, the most recent MaxKept of them.
	unrouted      kept[api.Rejection]
	unroutedTotal int
	// kl bounds the bytes of every kept list (Options.MaxKeptBytes).
	kl *keptLedger
}

// New returns an empty projection.
func New(opts Options) *Projection {
	d := DefaultOptions()
	if opts.MaxKept <= 0 {
		opts.MaxKept = d.MaxKept
	}
	if opts.Validator == nil {
		opts.Validator = d.Validator
	}
	kb := opts.MaxKeptBytes
	if kb == 0 {
		kb = DefaultMaxKeptBytes
	}
	return &Projection{opts: opts, delibs: map[string]*Deliberation{}, kl: &keptLedger{max: kb}}
}

// Position is the highest stream position applied.
func (p *Projection) Position() uint64 { return p.position.Load() }

// Advance records that every message up to position seq that concerns this
// projection has been applied (a runner that spreads the stream over
// several projections hands each only its own messages): its position
// moves there, and a snapshot of it resumes after seq.
func (p *Projection) Advance(seq uint64) { p.position.Store(max(p.position.Load(), seq)) }

// MaxKept is the number of detailed rejections kept per deliberation (and
// of unrouted ones).
func (p *Projection) MaxKept() int { return p.opts.MaxKept }

// Deliberation returns a deliberation by id, or nil.
func (p *Projection) Deliberation(id string) *Deliberation { return p.delibs[id] }

// Deliberations calls fn for each deliberation, in no particular order.
func (p *Projection) Deliberations(fn func(*Deliberation)) {
	for _, d := range p.delibs {
		fn(d)
	}
}

// Len returns the number of deliberations.
func (p *Projection) Len() int { return len(p.delibs) }

// Unrouted returns the kept rejections of messages that belong to no open
// deliberation, and their total.
func (p *Projection) Unrouted() ([]api.Rejection, int) { return p.unrouted.list(), p.unroutedTotal }

// Outcome says what Apply did with a message: everything the edges react
// to, so that none of them parses the message again.
type Outcome struct {
	Deliberation string
	Accepted     []canon.Digest // admitted to the DAG: the message's own artifact, or none
	// Admitted are the artifacts admitted, in the order of Accepted,
	// validated.
	Admitted  []Admission
	Rejection *api.Rejection
	Late      bool
	Control   string // the op of an applied control message
	// Time is the time the fold gave the message (EffectiveTime): what a
	// recording of it must carry for a fold of the recording to agree.
	Time time.Time
	// Logged says the message is a leaf of its deliberation's log (a
	// message of its record), LeafHash its leaf's hash.
	Logged   bool
	LeafHash tlog.Hash
	// CheckpointErr says why a checkpoint message does not verify
	// (Control is OpCheckpoint; nil: it does).
	CheckpointErr error
}

// Apply folds one message into the projection. Messages must come in
// stream order; one at or before the current position is ignored (a
// redelivery after a restart), so Apply is idempotent per position.
func (p *Projection) Apply(m Msg) Outcome {
	delib, kind, participant := wire.Parse(m.Subject)
	// Deliberations are independent: a message is ignored when its own
	// deliberation has applied its position, so that a runner may apply
	// the messages of different deliberations in any order (each
	// deliberation's in stream order), and a redelivery changes nothing.
	// Messages of no known deliberation are guarded by the position (the
	// highest applied): a runner hands them over in stream order.
	var prev time.Time
	d := p.delibs[delib]
	if d != nil {
		if m.Seq <= d.lastSeq() {
			return Outcome{}
		}
		prev = d.lastTime
	} else if m.Seq <= p.position.Load() {
		return Outcome{}
	}
	p.position.Store(max(p.position.Load(), m.Seq))
	p.kl.at = m.Time
	// An importer's message stands for the message it restores; nobody
	// else's headers mean anything.
	imported := kind == "art" && participant == wire.ImportToken
	if imported && m.Import != nil && m.Import.End && m.Import.Subject == "" {
		return p.endImport(d, m)
	}
	if imported {
		if m.Import == nil || m.Import.End || wire.DeliberationOf(m.Import.Subject) != delib || strings.HasSuffix(m.Import.Subject, "."+wire.ImportToken) {
			return p.foreign(d, m, CodeImportInvalid, "an importer's message names no message of deliberation "+delib)
		}
		_, kind, participant = wire.Parse(m.Import.Subject)
		if kind == "" {
			return p.foreign(d, m, CodeImportInvalid, "an importer's message names no message of deliberation "+delib)
		}
	} else {
		m.Import = nil
	}
	switch {
	case d != nil && d.importing && !imported:
		return p.foreign(d, m, CodeImporting, "deliberation "+delib+" is being imported: only the importer's messages count until the import is complete")
	case d != nil && !d.importing && imported:
		return p.foreign(d, m, CodeImportInvalid, "deliberation "+delib+" was not opened by an import, or its import is complete")
	}
	m.Time = EffectiveTime(m, prev)
	out := p.apply(m, delib, kind, participant)
	p.count(delib, m, &out)
	out.Time = m.Time
	if d := p.delibs[delib]; d != nil {
		d.lastTime = m.Time
	}
	return out
}

// ImportEnd is the op an Outcome names for the importer's end of an
// import.
const ImportEnd = "import_end"

// endImport applies the importer's end of deliberation d's import: from
// now on everyone's messages count. The marker is no message of the
// deliberation's record (nor of its ordinals): a deliberation imported
// whole folds as the original did.
func (p *Projection) endImport(d *Deliberation, m Msg) Outcome {
	if d == nil || !d.importing {
		return p.foreign(d, m, CodeImportInvalid, "the end of an import that is not under way")
	}
	d.importing = false
	d.foreignAt = m.Seq
	return Outcome{Deliberation: d.ID, Control: ImportEnd}
}

// OutsideRecord reports whether a rejection's code says the message is no
// part of its deliberation's record (nor of its ordinals): another's
// message during an import, or an importer's message the fold refused.
func OutsideRecord(code string) bool { return code == CodeImporting || code == CodeImportInvalid }

// foreign records a message that names deliberation d (nil: one not
// opened) but is not part of its record: among d's foreign messages (the
// most recent MaxKept; or, without d, among the messages of no
// deliberation), with nothing of d's record changed.
func (p *Projection) foreign(d *Deliberation, m Msg, code, msg string) Outcome {
	_, _, participant := wire.Parse(m.Subject)
	if d == nil {
		return p.unroutable(m, participant, code, msg)
	}
	r := api.Rejection{Position: m.Seq, Participant: summary(participant, maxTokenText), Class: ClassInvalidSubmission, Code: code, Message: summary(msg, MaxRejectionText)}
	d.foreignAt = m.Seq
	d.foreignN++
	d.foreign.add(r, p.opts.MaxKept, p.kl)
	return Outcome{Deliberation: d.ID, Rejection: &r}
}

func (p *Projection) apply(m Msg, delib, kind, participant string) Outcome {
	switch {
	case kind == "":
		return p.unroutable(m, "", CodeSubjectInvalid, "not parley.<deliberation>.art.<participant> or parley.<deliberation>.ctl: "+strconv.Quote(m.Subject))
	case !wire.ValidDeliberation(delib):
		return p.unroutable(m, participant, CodeDeliberationInvalid, "deliberation id is not a canonical UUID: "+strconv.Quote(delib))
	}
	d := p.delibs[delib]
	if kind == "ctl" {
		return p.control(d, delib, m)
	}
	if isCheckpoint(participant) {
		if d == nil {
			return p.unroutable(m, participant, CodeNotOpen, "deliberation "+delib+" was never opened")
		}
		return d.checkpoint(m)
	}
	if participant != wire.SupervisorToken && !wire.ValidToken(participant) {
		if d == nil {
			return p.unroutable(m, participant, CodeParticipantInvalid, "participant token "+strconv.Quote(participant))
		}
		return d.reject(m.Seq, participant, "", ClassInvalidSubmission, CodeParticipantInvalid, "participant token "+strconv.Quote(participant))
	}
	if d == nil {
		return p.unroutable(m, participant, CodeNotOpen, "deliberation "+delib+" was never opened")
	}
	return d.artifact(m, participant)
}

// count records that m belonged to deliberation delib's record: its
// position (the ordinals, the position-independent digest) and its leaf
// in the deliberation's log.
func (p *Projection) count(delib string, m Msg, out *Outcome) {
	if out.Control == OpCheckpoint {
		// A checkpoint is a statement about the record, not a message of
		// it: no ordinal, no leaf, nothing of the state digest, so that
		// the record reads the same whenever the engine's checkpoints
		// landed (a replay's, an import's, a second engine's).
		return
	}
	if d := p.delibs[delib]; d != nil && d.Position == m.Seq {
		d.seqs.add(m.Seq)
		d.appendLeaf(m, out)
	}
}

func (p *Projection) unroutable(m Msg, participant, code, msg string) Outcome {
	r := api.Rejection{Position: m.Seq, Participant: summary(participant, maxTokenText), Class: ClassInvalidSubmission, Code: code, Message: summary(msg, MaxRejectionText)}
	p.unroutedTotal++
	p.unrouted.add(r, p.opts.MaxKept, p.kl)
	delib, _, _ := wire.Parse(m.Subject)
	return Outcome{Deliberation: delib, Rejection: &r}
}

// kept is a list that keeps the most recent max items added, in order, at
// an amortized constant cost an item: it holds up to a quarter more before
// it drops the oldest at once, instead of shifting the whole list for each
// (which made every rejection past max cost a copy of the whole list).
// Its items also count against the projection's byte bound (keptLedger),
// which may drop its oldest before max does.
type kept[T keptItem] struct {
	buf   []T
	start int
}

// keptItem is what a kept list holds: a message's summary, with its
// position (a list's items are in position order) and about the bytes it
// holds (keptOf).
type keptItem interface {
	api.Rejection | Late
}

// keptOf returns the position of a kept item and about the bytes it
// holds: for a rejection, the struct, its strings, and its entry in the
// ledger's queue.
func keptOf[T keptItem](v *T) (pos uint64, size int64) {
	switch x := any(v).(type) {
	case *api.Rejection:
		return x.Position, 120 + int64(len(x.Participant)+len(x.ArtifactID)+len(x.Class)+len(x.Code)+len(x.Message))
	case *Late:
		return x.Position, 80 + int64(len(x.Participant)+len(x.ArtifactID))
	}
	panic("unreachable")
}

// add appends v, dropping the oldest item beyond max, and counts it in l
// (nil: no byte bound), which may drop the oldest items of any list.
func (k *kept[T]) add(v T, max int, l *keptLedger) {
	if len(k.buf)-k.start >= max {
		k.dropOldest(l)
	}
	if len(k.buf) >= max+max/4+1 && k.start > 0 {
		n := copy(k.buf, k.buf[k.start:])
		clear(k.buf[n:])
		k.buf, k.start = k.buf[:n], 0
	}
	k.buf = append(k.buf, v)
	if l != nil {
		pos, size := keptOf(&k.buf[len(k.buf)-1])
		l.added(k, pos, size)
	}
}

// dropOldest drops the oldest item, counting it out of l.
func (k *kept[T]) dropOldest(l *keptLedger) {
	if k.start >= len(k.buf) {
		return
	}
	if l != nil {
		_, size := keptOf(&k.buf[k.start])
		l.removed(size)
	}
	var zero T
	k.buf[k.start] = zero
	k.start++
}

// oldest is the position of the oldest item kept.
func (k *kept[T]) oldest() (uint64, bool) {
	if k.start >= len(k.buf) {
		return 0, false
	}
	pos, _ := keptOf(&k.buf[k.start])
	return pos, true
}

// list returns the kept items, oldest first (not to be modified; valid
// until the next add).
func (k *kept[T]) list() []T { return k.buf[k.start:] }

// set replaces the kept items (a snapshot's); the caller counts them in
// its ledger (keptLedger.rebuild).
func (k *kept[T]) set(items []T) { k.buf, k.start = items, 0 }

// dumpList is the kept items, for DumpState: two lists that keep the same
// items hold the same state, whatever they held before.
func (k *kept[T]) dumpList() any { return k.list() }

// DefaultMaxKeptBytes is the default bound on the bytes of the summaries
// an engine keeps of rejected, late and foreign messages, across every
// deliberation (Options.MaxKeptBytes; a runner spreads it over its
// shards).
const DefaultMaxKeptBytes = 64 << 20

// keptLedger bounds the bytes of every kept list of a projection (the
// rejections, late artifacts and foreign messages of each deliberation, and
// the messages of no deliberation): past max it drops the oldest item kept
// anywhere in the projection. What is dropped is only the detail: counts,
// totals and the state digest (its chains) cover every message. Which
// items are kept therefore depends on every deliberation of the projection
// and on the bound, and nothing that must agree between engines reads it.
type keptLedger struct {
	max  int64        // <= 0: no bound (nothing is dropped, no queue is kept)
	used atomic.Int64 // read by metrics while the fold goes on
	live int
	// queue names the items in the order they were added, by list and
	// position; an entry whose item its list has already dropped (past
	// MaxKept) is skipped, and such entries are swept out once they
	// outnumber the live ones.
	queue   []keptRef
	head    int
	dropped atomic.Uint64 // items dropped for the bound
	// at is the stream time of the message being applied, and lastDrop
	// (Unix nanoseconds) that of the last one whose summary made the
	// bound drop another's.
	at       time.Time
	lastDrop atomic.Int64
	// breachBytes and breachesDropped sum, over the projection's
	// deliberations, the bytes of the limit breaches waiting for a
	// supervisor FAILURE and the breaches not kept for their bounds
	// (MaxBreaches): for the metrics, nothing of the fold reads them.
	breachBytes     atomic.Int64
	breachesDropped atomic.Uint64
}

type keptRef struct {
	list keptList
	pos  uint64
}

type keptList interface {
	oldest() (uint64, bool)
	dropOldest(l *keptLedger)
}

func (l *keptLedger) removed(size int64) {
	l.used.Add(-size)
	l.live--
}

func (l *keptLedger) added(k keptList, pos uint64, size int64) {
	l.used.Add(size)
	l.live++
	if l.max <= 0 {
		return
	}
	l.queue = append(l.queue, keptRef{k, pos})
	for l.used.Load() > l.max && l.head < len(l.queue) {
		e := l.queue[l.head]
		l.queue[l.head] = keptRef{}
		l.head++
		if p, ok := e.list.oldest(); ok && p == e.pos {
			e.list.dropOldest(l)
			l.dropped.Add(1)
			l.lastDrop.Store(l.at.UnixNano())
		}
	}
	if stale := len(l.queue) - l.head - l.live; stale > l.live+64 || l.head > len(l.queue)/2 {
		l.sweep()
	}
}

// sweep removes the consumed and stale entries of the queue.
func (l *keptLedger) sweep() {
	q := l.queue[:0]
	for _, e := range l.queue[l.head:] {
		if e.list == nil {
			continue
		}
		if p, ok := e.list.oldest(); ok && e.pos >= p {
			q = append(q, e)
		}
	}
	clear(l.queue[len(q):])
	l.queue, l.head = q, 0
}

// rebuildLedger counts every item of the projection's lists (a
// snapshot's) in the order of their positions, which is the order they
// were added in, and drops what the bound does not hold.
func (p *Projection) rebuildLedger() {
	type item struct {
		list keptList
		pos  uint64
		size int64
	}
	var all []item
	rejections := func(k *kept[api.Rejection]) {
		for i := range k.list() {
			pos, size := keptOf(&k.list()[i])
			all = append(all, item{k, pos, size})
		}
	}
	rejections(&p.unrouted)
	for _, d := range p.delibs {
		rejections(&d.rejects)
		rejections(&d.foreign)
		for i := range d.late.list() {
			pos, size := keptOf(&d.late.list()[i])
			all = append(all, item{&d.late, pos, size})
		}
	}
	slices.SortStableFunc(all, func(a, b item) int { return cmp.Compare(a.pos, b.pos) })
	p.kl.used.Store(0)
	p.kl.live, p.kl.queue, p.kl.head = 0, nil, 0
	for _, it := range all {
		p.kl.added(it.list, it.pos, it.size)
	}
}

// Breaches reports the bytes of the limit breaches waiting for a
// supervisor FAILURE across the projection's deliberations, and how many
// breaches were not kept for the bounds (MaxBreaches, MaxBreachBytes)
// since the projection was opened or restored (a snapshot's count
// included). Safe to call while the fold goes on.
func (p *Projection) Breaches() (held int64, dropped uint64) {
	return p.kl.breachBytes.Load(), p.kl.breachesDropped.Load()
}

// KeptBytes reports the kept summaries' bytes, their bound (0 or less:
// none) and how many the bound has dropped since the projection was made
// or restored. Safe to call while the fold goes on.
func (p *Projection) KeptBytes() (used, max int64, dropped uint64, last time.Time) {
	if n := p.kl.lastDrop.Load(); n != 0 {
		last = time.Unix(0, n)
	}
	return p.kl.used.Load(), p.kl.max, p.kl.dropped.Load(), last
}

// Prepare does for a message what a runner does ahead of the fold: for an
// artifact of a deliberation whose provenance policy may judge it, it
// validates the artifact with the projection's validator (m.Artifact,
// m.Invalid) unless that is done, and, when the policy judges it
// (Deliberation.Judges), re-verifies its provenance annotations with
// verify (m.Reverified, provenance.Reverify). It reads the deliberation's
// policy, so call it just before Apply(m), once the messages before m are
// applied. verify may do IO (a substrate.Reverifier reads files and runs
// git): call Prepare outside any lock. With verify nil it does nothing. A
// fold of a recording that must agree with the live engine (an audit, an
// export's state digest, an offline closure) prepares each message with
// the engine's verifier.
func (p *Projection) Prepare(m *Msg, verify provenance.Verifier) {
	if verify == nil {
		return
	}
	delib, kind, _ := wire.Parse(m.Subject)
	d := p.delibs[delib]
	if kind != "art" || d == nil || d.policy.Provenance == nil {
		return
	}
	if m.Artifact == nil && m.Invalid == nil {
		m.Artifact, m.Invalid = p.opts.Validator.ValidateTransient(m.Data)
	}
	if m.Invalid == nil && d.Judges(m.Artifact) {
		m.Reverified = provenance.Reverify(m.Artifact, verify)
	}
}

// Admission is an artifact admitted to the DAG.
type Admission struct {
	Position    uint64 // its message's stream position
	Participant string
	Artifact    *events.Artifact // validated; Canonical may be nil (the bytes stay in the stream)
}

// Control is a control message on parley.<deliberation>.ctl.
type Control struct {
	Op      string          `json:"op"`
	Charter json.RawMessage `json:"charter,omitempty"`
	Reason  string          `json:"reason,omitempty"`
	Round   int             `json:"round,omitempty"`
}

// MaxControlBytes bounds a control message: an open's charter is kept for
// the deliberation's life, so what anyone may make the engine keep is
// bounded in bytes.
const MaxControlBytes = 4 << 10

// MaxTitleBytes bounds a charter's title (UTF-8 bytes), which every list of
// deliberations shows.
const MaxTitleBytes = 256

// MaxRejectionText bounds the message a rejection keeps (UTF-8 bytes, cut
// with "…"): rejections are kept for someone else's message, so they keep
// a bounded summary, never the message quoted whole.
const MaxRejectionText = 256

// maxTokenText bounds the participant a rejection keeps (an invalid token
// can be as long as a subject).
const maxTokenText = 80

// summary cuts s to at most max bytes at a UTF-8 boundary, marking the cut.
func summary(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func parseControl(data []byte) (Control, *api.Charter, error) {
	var c Control
	canonical, err := canon.Canonicalize(canon.AMD, data)
	if err != nil {
		return c, nil, err
	}
	if canonical[0] != '{' {
		return c, nil, errors.New("a control message is a JSON object")
	}
	if err := json.Unmarshal(canonical, &c); err != nil {
		return c, nil, err
	}
	switch c.Op {
	case "open":
		if len(c.Charter) == 0 || c.Charter[0] != '{' {
			return c, nil, errors.New("open needs a charter object")
		}
		var ch api.Charter
		// Strict: a misspelt "participants" must not open the
		// deliberation to anyone, nor a misspelt "terminators" go unseen.
		if err := strictJSON(c.Charter, &ch); err != nil {
			return c, nil, errors.New("charter: " + err.Error())
		}
		if len(ch.Title) > MaxTitleBytes {
			return c, nil, errors.New("charter: the title is " + strconv.Itoa(len(ch.Title)) + " bytes, over " + strconv.Itoa(MaxTitleBytes))
		}
		for _, t := range ch.Participants {
			if !wire.ValidToken(t) {
				return c, nil, errors.New("charter: participant token " + strconv.Quote(t))
			}
		}
		for _, t := range ch.Terminators {
			if !wire.ValidToken(t) {
				return c, nil, errors.New("charter: terminator token " + strconv.Quote(t))
			}
		}
		if err := checkPrincipal(&ch); err != nil {
			return c, nil, err
		}
		if err := checkKeys(&ch); err != nil {
			return c, nil, err
		}
		return c, &ch, nil
	case "suspend", "resume", "cancel", "round":
		return c, nil, nil
	}
	return c, nil, errors.New("unknown op " + strconv.Quote(c.Op))
}

func (p *Projection) control(d *Deliberation, id string, m Msg) Outcome {
	if len(m.Data) > MaxControlBytes {
		msg := strconv.Itoa(len(m.Data)) + " bytes, over " + strconv.Itoa(MaxControlBytes)
		if d == nil {
			return p.unroutable(m, "", CodeControlTooLarge, msg)
		}
		return d.reject(m.Seq, "", "", ClassInvalidSubmission, CodeControlTooLarge, msg)
	}
	c, charter, err := parseControl(m.Data)
	if err != nil {
		msg := err.Error()
		var ce *canon.Error
		if errors.As(err, &ce) {
			msg = ce.Code + ": " + ce.Msg
		}
		if d == nil {
			return p.unroutable(m, "", CodeControlInvalid, msg)
		}
		return d.reject(m.Seq, "", "", ClassInvalidSubmission, CodeControlInvalid, msg)
	}
	if d == nil {
		if c.Op != "open" {
			return p.unroutable(m, "", CodeNotOpen, c.Op+" on a deliberation that was never opened")
		}
		if n := p.opts.MaxDeliberations; n > 0 && len(p.delibs) >= n {
			return p.unroutable(m, "", CodeDeliberationLimit, "the engine holds its limit of "+strconv.Itoa(n)+" deliberations")
		}
		d = newDeliberation(id, p.opts)
		d.kl = p.kl
		l, pol, err := effective(charter, p.opts.Defaults)
		if err != nil {
			return p.unroutable(m, "", CodeControlInvalid, err.Error())
		}
		d.limits, d.policy = l, pol
		// Opened by an import: until the importer ends it, only the
		// importer's messages count.
		d.imported = m.Import != nil
		d.importing = d.imported
		p.delibs[id] = d
	}
	d.now = m.Time
	return d.control(m.Seq, c, charter)
}
