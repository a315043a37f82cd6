package readmodel

import (
	"context"
	"errors"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
)

// Outcome says what the projector did with the message of deliberation id
// at stream position position. artifactID, when not empty, must be the
// artifact the message carries. The message is read back from the stream,
// so that a position of another deliberation is refused (not_found) rather than
// misreported; a deliberation never opened is answered from the rejections
// of messages that belong to no opened deliberation.
func (q *Queries) Outcome(ctx context.Context, id string, position uint64, artifactID string) (api.OutcomeReport, error) {
	out := api.OutcomeReport{Deliberation: id, Position: position}
	if position == 0 {
		return out, &api.Error{Kind: api.KindInvalid, Code: api.CodeBadRequest, Message: "position must be a stream position (1 or more)"}
	}
	if id != "" && !q.r.Holds(id) {
		return out, notHeld(id)
	}
	var want *canon.Digest
	if artifactID != "" {
		d, ok := canon.ParseDigest(artifactID)
		if !ok {
			return out, &api.Error{Kind: api.KindInvalid, Code: api.CodeBadRequest, Message: "artifact id is not sha256:<64 lowercase hex>"}
		}
		want = &d
	}
	msg, err := ledger.GetMsg(ctx, q.streams, position)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound) && position <= q.r.PositionAt(position):
		// The projection has applied the position, so the stream holds it:
		// the replica that answered the read (a direct get may be served
		// by any) has not caught up. Ask again, not "not found".
		return out, &api.Error{Kind: api.KindUnavailable, Code: api.CodeUnavailable,
			Message: "read position " + strconv.FormatUint(position, 10) + ": the stream's replica that answered has not reached it yet"}
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return out, notFound("message at position " + strconv.FormatUint(position, 10))
	case err != nil:
		return out, &api.Error{Kind: api.KindUnavailable, Code: api.CodeUnavailable, Message: "read position: " + err.Error()}
	}
	var mo projector.MessageOutcome
	out.Projected = q.r.PositionAt(position)
	// The subject as published (the partitioned layout stores it mapped).
	subject, _ := q.r.Layout().Original(msg.Subject)
	mo, err = q.r.Outcome(id, projector.Msg{Seq: position, Subject: subject, Data: msg.Data, Import: projector.ImportOf(subject, msg.Header.Get)}, want)
	switch {
	case errors.Is(err, projector.ErrOtherDeliberation):
		return out, &api.Error{Kind: api.KindNotFound, Code: api.CodeNotFound,
			Message: "the message at position " + strconv.FormatUint(position, 10) + " is not one of deliberation " + id + "'s"}
	case errors.Is(err, runner.ErrNotHeld):
		return out, notHeld(id)
	case errors.Is(err, projector.ErrArtifactMismatch):
		return out, &api.Error{Kind: api.KindConflict, Code: api.CodeArtifactMismatch,
			Message: "the message at position " + strconv.FormatUint(position, 10) + " is artifact " + mo.ArtifactID.String() + ", not " + artifactID}
	case err != nil:
		return out, err
	}
	out.Outcome, out.Participant, out.Op, out.Note = mo.Verdict, mo.Participant, mo.Op, mo.Note
	out.Ordinal = mo.Ordinal
	if mo.ArtifactID != (canon.Digest{}) {
		out.ArtifactID = mo.ArtifactID.String()
	}
	out.ArtifactType = string(mo.ArtifactType)
	if r := mo.Rejection; r != nil {
		out.ErrorClass, out.Code, out.Message = r.Class, r.Code, r.Message
		if out.ArtifactID == "" {
			out.ArtifactID = r.ArtifactID
		}
	}
	return out, nil
}
