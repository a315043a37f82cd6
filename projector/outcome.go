package projector

import (
	"errors"
	"strconv"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/wire"
)

// MessageOutcome is the verdict on the message at a stream position.
type MessageOutcome struct {
	Verdict      api.Verdict
	Deliberation string
	Position     uint64
	Participant  string         // an artifact message's token
	ArtifactID   canon.Digest   // zero when the bytes are no valid artifact
	ArtifactType events.Type    // accepted artifacts
	Op           string         // a control message's op, when it parses
	Rejection    *api.Rejection // VerdictRejected
	// Ordinal is the message's rank among the deliberation's messages
	// (Deliberation.Ordinal), 0 for a message outside its record (before
	// its open, or another's during its import).
	Ordinal uint64
	// Note explains unprojected and unknown verdicts.
	Note string
}

// Errors of OutcomeOf.
var (
	// ErrOtherDeliberation: the message is not one of the deliberation's.
	ErrOtherDeliberation = errors.New("projector: the message is not one of the deliberation's")
	// ErrArtifactMismatch: the message is not the artifact asked about.
	ErrArtifactMismatch = errors.New("projector: the message is another artifact")
)

// OutcomeOf says what the fold did with m, a message of deliberation id as
// read back from the stream at its position (m.Seq). When want is not
// nil, m must be that artifact (ErrArtifactMismatch otherwise). It reads
// the projection and changes nothing.
//
// Accepted artifacts, and the opening, cancelling or current suspending
// control messages are found in the state itself, whatever was evicted.
// A rejection or a late artifact is found among the kept ones; when some
// were evicted, a message found nowhere is VerdictUnknown rather than
// guessed.
func (p *Projection) OutcomeOf(id string, m Msg, want *canon.Digest) (MessageOutcome, error) {
	delib, kind, participant := wire.Parse(m.Subject)
	if delib != id || kind == "" {
		return MessageOutcome{}, ErrOtherDeliberation
	}
	if im := m.Import; kind == "art" && participant == wire.ImportToken && im != nil && wire.DeliberationOf(im.Subject) == delib {
		// An importer's message is judged as the message it restores.
		if _, k, pt := wire.Parse(im.Subject); k != "" {
			kind, participant = k, pt
		}
	}
	out := MessageOutcome{Deliberation: id, Position: m.Seq, Participant: participant}
	var a *events.Artifact
	ctlOK := false
	if kind == "art" {
		if v, err := p.opts.Validator.Validate(m.Data); err == nil {
			a = v
			out.ArtifactID = a.ID
		}
		if want != nil && a != nil && a.ID != *want {
			return out, ErrArtifactMismatch
		}
	} else if c, _, err := parseControl(m.Data); err == nil {
		ctlOK, out.Op = true, c.Op
	}
	if m.Seq > p.Position() {
		out.Verdict = api.VerdictUnprojected
		out.Note = "the projection is at position " + strconv.FormatUint(p.Position(), 10)
		return out, nil
	}
	d := p.delibs[id]
	if d == nil || m.Seq < d.OpenedAt {
		// Before the deliberation was opened (or it never was): the
		// message was recorded among the unrouted rejections.
		if r := findRejection(p.unrouted.list(), m.Seq); r != nil {
			out.Verdict, out.Rejection = api.VerdictRejected, r
			return out, nil
		}
		out.Verdict = api.VerdictUnknown
		out.Note = evictedNote(len(p.unrouted.list()), p.unroutedTotal, "messages of deliberations not open")
		return out, nil
	}
	out.Ordinal = d.Ordinal(m.Seq)
	if r := findRejection(d.rejects.list(), m.Seq); r != nil {
		out.Verdict, out.Rejection = api.VerdictRejected, r
		return out, nil
	}
	// Not part of the deliberation's record (another's message during its
	// import).
	if r := findRejection(d.foreign.list(), m.Seq); r != nil {
		out.Verdict, out.Rejection = api.VerdictRejected, r
		return out, nil
	}
	complete := len(d.rejects.list()) == d.rejTotal
	if kind == "art" && participant == wire.CheckpointToken {
		// Not an artifact: the engine's checkpoint of the log, admitted
		// unless rejected.
		out.ArtifactID, out.Op = canon.Digest{}, OpCheckpoint
		if complete {
			out.Verdict = api.VerdictApplied
		} else {
			out.Verdict = api.VerdictUnknown
			out.Note = evictedNote(len(d.rejects.list()), d.rejTotal, "rejections")
		}
		return out, nil
	}
	if kind == "art" {
		late := d.late.list()
		for i := len(late) - 1; i >= 0; i-- {
			if late[i].Position == m.Seq {
				out.Verdict = api.VerdictLate
				out.Note = "the deliberation had ended (" + string(d.Status) + "): the artifact is kept in the stream, outside the state"
				return out, nil
			}
		}
		if a != nil {
			if i, ok := d.index.get(d.nodeIDs, a.ID); ok && d.nodes[i].seq == m.Seq {
				out.Verdict, out.ArtifactType = api.VerdictAccepted, a.Type
				return out, nil
			}
		}
		out.Verdict = api.VerdictUnknown
		switch {
		case !complete:
			out.Note = evictedNote(len(d.rejects.list()), d.rejTotal, "rejections")
		case len(d.late.list()) < d.lateN:
			out.Note = evictedNote(len(d.late.list()), d.lateN, "late artifacts")
		default:
			out.Note = "the projection has no record of the message"
		}
		return out, nil
	}
	switch {
	case m.Seq == d.OpenedAt, m.Seq == d.CancelledAt, m.Seq == d.SuspendedAt:
		out.Verdict = api.VerdictApplied
	case ctlOK && complete:
		// Every rejection is kept, and a control message of an open
		// deliberation is either rejected or applied.
		out.Verdict = api.VerdictApplied
	default:
		out.Verdict = api.VerdictUnknown
		out.Note = evictedNote(len(d.rejects.list()), d.rejTotal, "rejections")
	}
	return out, nil
}

// findRejection returns the kept rejection at position seq, or nil.
func findRejection(list []api.Rejection, seq uint64) *api.Rejection {
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].Position == seq {
			r := list[i]
			return &r
		}
	}
	return nil
}

func evictedNote(kept, total int, what string) string {
	if kept < total {
		return "the projection keeps the most recent " + strconv.Itoa(kept) + " of " + strconv.Itoa(total) + " " + what + " in detail; this message's record is not among them"
	}
	return "the projection has no record of the message"
}
