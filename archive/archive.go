// Package archive moves recorded deliberations in and out of a live
// engine's stream: Export writes a deliberation as a recording (package
// recording), Import republishes a stream recording into a stream, in
// batches, resumably.
package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/signing"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

// ErrNoDeliberation: the stream has no message of the deliberation.
var ErrNoDeliberation = errors.New("archive: no such deliberation in the stream")

// ErrTaken: an import's deliberation id is taken by a deliberation opened
// live in the stream.
var ErrTaken = errors.New("archive: the deliberation id is taken")

// messages calls fn for every message of deliberation id in the stream, in
// order, with its original position and time when it was imported.
func messages(ctx context.Context, js jetstream.JetStream, id string, fn func(streamMsg) error) (int, error) {
	return messagesSeq(ctx, js, id, func(m streamMsg, _ uint64) error { return fn(m) })
}

// streamMsg is a message read from the stream: its recording form (for an
// importer's message, the subject and position of the message it restores)
// and the message as the live engine folds it.
type streamMsg struct {
	recording.Message
	msg projector.Msg
}

// fold applies m to p as the live engine does, re-verified with verify
// first (nil: none), and returns its recording form, with the time the
// fold gave it, and whether it is part of the deliberation's record (not
// another's message during its import, nor an importer's message the fold
// refused: those stay in the stream, outside the recording).
func (m streamMsg) fold(p *projector.Projection, verify provenance.Verifier) (recording.Message, bool) {
	msg := m.msg
	p.Prepare(&msg, verify)
	out := p.Apply(msg)
	r := m.Message
	if !out.Time.IsZero() {
		r.Time = out.Time
	}
	if out.Control == projector.ImportEnd || out.Rejection != nil && projector.OutsideRecord(out.Rejection.Code) {
		return r, false
	}
	return r, true
}

// messagesSeq is messages, with each message's position in this stream.
//
// An imported deliberation's messages are given the positions they had in
// the recording; what others published under its id before the import
// began is left out (it was never part of the record), and what came
// after it is numbered on from the last original position by its distance
// in this stream, so that the positions of a recording always increase.
func messagesSeq(ctx context.Context, js jetstream.JetStream, id string, fn func(m streamMsg, seq uint64) error) (int, error) {
	// The record's stream and layout: the subjects are stored mapped in
	// the partitioned one, and the Reader gives them back as published.
	l, s, err := ledger.LocateFor(ctx, js, id)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(l.Filter(id)))
	if err != nil {
		return 0, err
	}
	total := 0
	for _, n := range info.State.Subjects {
		total += int(n)
	}
	if total == 0 {
		return 0, nil
	}
	imported := info.State.Subjects[l.Stored(wire.ImportSubject(id))] > 0
	begun := false                  // an importer's message was read
	var lastOrig, lastStream uint64 // the last imported message's original and stream positions
	// An ordered push consumer: whoever exports may be a participant, and
	// participants may not pull (ledger.Reader).
	rd, err := l.Read(ctx, js.Conn(), l.Filter(id), 0)
	if err != nil {
		return 0, err
	}
	defer rd.Stop()
	for n := 0; n < total; n++ {
		m, err := rd.Next(ctx)
		if err != nil {
			return n, err
		}
		meta, err := m.Metadata()
		if err != nil {
			return n, err
		}
		seq := ledger.MsgPosition(meta)
		msg := streamMsg{Message: recording.Message{Position: seq, Subject: m.Subject, Time: meta.Timestamp, Data: m.Data},
			msg: projector.Msg{Seq: seq, Subject: m.Subject, Data: m.Data, Time: meta.Timestamp}}
		// Only the importer's headers mean anything (projector.ImportOf);
		// its message is recorded as the one it restores. The time it
		// carries is the fold's to judge: Export writes the time the fold
		// gave it.
		if h := m.Header; h != nil {
			// An artifact's signature is recorded with it, for an audit
			// to verify again (an importer's message: the restored
			// artifact's, which the importer republished).
			msg.Signature = projector.SignatureOf(msg.msg.Subject, h)
			msg.msg.Signature = msg.Signature
			if im := projector.ImportOf(msg.msg.Subject, h.Get); im != nil {
				msg.msg.Import = im
				begun = true
				if wire.DeliberationOf(im.Subject) == id {
					msg.Subject = im.Subject
				}
				if im.Position > lastOrig && !im.End {
					msg.Position = im.Position
				} else {
					msg.Position = lastOrig + (seq - lastStream)
				}
				lastOrig, lastStream = msg.Position, seq
			}
		}
		switch {
		case imported && !begun:
			continue // before the import began: not part of the record
		case imported && msg.msg.Import == nil:
			msg.Position = lastOrig + (seq - lastStream)
		}
		if err := fn(msg, ledger.MsgPosition(meta)); err != nil {
			return n, err
		}
	}
	return total, nil
}

// Export writes deliberation id as a recording of format f and returns the
// number of lines written (messages for a stream recording, artifacts for
// an artifact log).
func Export(ctx context.Context, js jetstream.JetStream, id string, f recording.Format, w io.Writer) (int, error) {
	return ExportWith(ctx, js, id, f, w, nil)
}

// ExportWith is Export, folding with a provenance re-verifier (nil: none),
// which must be the live engine's (the same roots) for the trailer's
// state_digest to be the engine's where a charter requires admissible
// provenance.
func ExportWith(ctx context.Context, js jetstream.JetStream, id string, f recording.Format, w io.Writer, verify provenance.Verifier) (int, error) {
	rw, _ := recording.NewWriter(w, f, id)
	if f == recording.Stream {
		p := projector.New(projector.Options{Rules: termination.Rules{}})
		n, err := messages(ctx, js, id, func(m streamMsg) error {
			if r, ok := m.fold(p, verify); ok {
				return rw.Write(r)
			}
			return nil
		})
		if err == nil && n == 0 {
			err = ErrNoDeliberation
		}
		if err != nil {
			return n, err
		}
		if d := p.Deliberation(id); d != nil {
			rw.StateDigest = d.StateDigest().String()
		}
		return n, rw.Close()
	}
	// The artifact log: fold once to know the DAG, then write its
	// artifacts in stream order.
	p := projector.New(projector.Options{Rules: termination.Rules{}})
	n, err := messages(ctx, js, id, func(m streamMsg) error {
		m.fold(p, verify)
		return nil
	})
	if err == nil && n == 0 {
		err = ErrNoDeliberation
	}
	if err != nil {
		return 0, err
	}
	d := p.Deliberation(id)
	if d == nil {
		return 0, fmt.Errorf("%w: it was never opened", ErrNoDeliberation)
	}
	in := map[uint64]bool{}
	d.Nodes(func(_ canon.Digest, n projector.Node) { in[n.Seq] = true })
	written := 0
	_, err = messages(ctx, js, id, func(m streamMsg) error {
		if !in[m.msg.Seq] {
			return nil
		}
		b, err := canon.Canonicalize(canon.AMD, m.Data)
		if err != nil {
			return err
		}
		written++
		return rw.Write(recording.Message{Data: b})
	})
	if err != nil {
		return written, err
	}
	return written, rw.Close()
}

// ImportResult says what an import did.
type ImportResult struct {
	Deliberation string
	Messages     int // in the recording
	Skipped      int // already in the stream (a resumed import)
	Published    int
	Atomic       bool // published in atomic batches (the stream allows them)
	// Complete: the recording ended with its trailer, and its last
	// message, marked as the import's last, is in the stream: the
	// deliberation's import is complete. A recording without its trailer
	// (cut short) is imported without the mark, and its deliberation waits,
	// counting nobody else's messages, until the whole recording is.
	Complete bool
}

// BatchSize is the number of messages published before waiting for their
// acknowledgements.
const BatchSize = 1000

// Import republishes a stream recording into the stream, as deliberation
// as (or the recording's own id when empty), on the importer's subject
// (wire.ImportSubject: only an importer's credentials may publish there),
// each message with its original subject, position and time in headers, the
// last one marked: the fold applies them as the messages they restore, and
// an export gives the recording back. Until the last, nobody else's
// message counts in the deliberation, so what others publish meanwhile
// changes nothing. Messages of the deliberation already in the stream are
// the importer's of an interrupted import, which must be the recording's
// first ones (they are skipped: the import resumes), or anyone else's,
// which are ignored unless they opened the deliberation live: then the id
// is taken, and the import refuses (import under another id with as).
// progress, when set, is called after every batch.
func Import(ctx context.Context, js jetstream.JetStream, r *recording.Reader, as string, progress func(done, total int)) (ImportResult, error) {
	var res ImportResult
	if r.Format() != recording.Stream {
		return res, errors.New("archive: import needs a stream recording (an artifact log has no control messages)")
	}
	from := r.Header().Deliberation
	to := as
	if to == "" {
		to = from
	}
	if !wire.ValidDeliberation(to) {
		return res, fmt.Errorf("archive: %q is not a deliberation id", to)
	}
	res.Deliberation = to
	// Read the recording (messages are needed twice: to compare with what
	// the stream already holds, then to publish).
	var recs []recording.Message
	for {
		m, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return res, err
		}
		m.Data = slices.Clone(m.Data)
		m.Subject = rewrite(m.Subject, from, to)
		recs = append(recs, m)
	}
	res.Messages = len(recs)
	complete := r.Trailer() != nil
	existing := 0
	var lastSeq uint64 // the importer's last message of the deliberation in its stream (a sequence of that stream)
	p := projector.New(projector.Options{Rules: termination.Rules{}})
	_, err := messagesSeq(ctx, js, to, func(m streamMsg, seq uint64) error {
		m.fold(p, nil)
		if m.msg.Import == nil || m.msg.Import.End {
			return nil // anyone else's, judged below by what the fold made of it, or the end of the import
		}
		if existing >= len(recs) || m.Subject != recs[existing].Subject || !bytes.Equal(m.Data, recs[existing].Data) {
			return fmt.Errorf("archive: deliberation %s was imported from another recording (message %d differs); nothing was imported: import under another id with --as", to, existing+1)
		}
		existing++
		lastSeq = ledger.Sequence(seq)
		return nil
	})
	if err != nil {
		return res, err
	}
	d := p.Deliberation(to)
	if d != nil && !d.Imported() {
		return res, fmt.Errorf("%w: deliberation %s was opened live at position %d; nothing was imported: import under another id with --as", ErrTaken, to, d.OpenedAt)
	}
	ended := d != nil && !d.Importing()
	res.Skipped = existing
	l, stream, err := ledger.LocateFor(ctx, js, to)
	if err != nil {
		return res, err
	}
	res.Atomic = stream.CachedInfo().Config.AllowAtomicPublish
	ids := wire.NewMsgIDs() // this import's own: nobody else can compute them
	for i := existing; i < len(recs); i += BatchSize {
		end := min(i+BatchSize, len(recs))
		msgs := make([]*nats.Msg, 0, end-i)
		for _, m := range recs[i:end] {
			msg := &nats.Msg{Subject: wire.ImportSubject(to), Data: m.Data, Header: nats.Header{}}
			msg.Header.Set(wire.OriginalSubjectHeader, m.Subject)
			msg.Header.Set(wire.OriginalPositionHeader, strconv.FormatUint(m.Position, 10))
			msg.Header.Set(wire.OriginalTimeHeader, m.Time.UTC().Format(time.RFC3339Nano))
			// The restored artifact's signature, which the engine verifies
			// as its participant's (under another id, --as, it no longer
			// verifies: a signature names its deliberation).
			if k := m.Signature.Key; k != "" {
				msg.Header.Set(signing.KeyHeader, k)
			}
			if s := m.Signature.Signature; s != "" {
				msg.Header.Set(signing.SignatureHeader, s)
			}

			msg.Header.Set(jetstream.MsgIDHeader, ids.For("import", to, strconv.FormatUint(m.Position, 10)))
			msg.Header.Set(jetstream.ExpectedStreamHeader, l.StreamOf(to))
			msgs = append(msgs, msg)
		}
		if res.Atomic {
			seq, err := publishAtomic(ctx, js, l, to, msgs, lastSeq)
			if err != nil {
				return res, err
			}
			lastSeq = seq
		} else {
			seq, err := publishAsync(ctx, js, msgs)
			if err != nil {
				return res, err
			}
			lastSeq = seq
		}
		res.Published = end - existing
		if progress != nil {
			progress(end, len(recs))
		}
	}
	if !complete {
		return res, nil // cut short: the deliberation waits for the rest
	}
	if !ended {
		// The whole recording is in: end the import.
		end := &nats.Msg{Subject: wire.ImportSubject(to), Header: nats.Header{}}
		end.Header.Set(wire.ImportEndHeader, "true")
		end.Header.Set(jetstream.MsgIDHeader, ids.For("import-end", to))
		end.Header.Set(jetstream.ExpectedStreamHeader, l.StreamOf(to))
		end.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(lastSeq, 10))
		// The importer's subject as stored: the server does not map this
		// header (docs/SCALING.md).
		end.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, l.Stored(wire.ImportSubject(to)))
		if _, err := js.PublishMsg(ctx, end); err != nil {
			return res, fmt.Errorf("archive: end the import of %s: %w (every message is in; run the import again to end it)", to, err)
		}
	}
	res.Complete = true
	return res, nil
}

// publishAtomic publishes one batch atomically (all of it or none), on
// condition that the importer's last message of the deliberation in the
// stream is still at last: two imports of one deliberation never
// interleave. (Anyone else's messages may; they do not count until the
// import is complete.) It returns the batch's last position.
func publishAtomic(ctx context.Context, js jetstream.JetStream, l ledger.Layout, id string, msgs []*nats.Msg, last uint64) (uint64, error) {
	msgs[0].Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
	msgs[0].Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, l.Stored(wire.ImportSubject(id)))
	ack, err := jetstreamext.PublishMsgBatch(ctx, js, msgs)
	if err != nil {
		if ledger.IsWrongLastSequence(err) {
			return 0, fmt.Errorf("archive: deliberation %s received another import's messages during this one; nothing of this batch was published (%w)", id, err)
		}
		return 0, fmt.Errorf("archive: atomic batch publish: %w (nothing of this batch was published; run the import again to resume)", err)
	}
	return ack.Sequence, nil
}

// publishAsync publishes one batch with asynchronous acknowledgements, for
// a stream without atomic batch publish, and returns the position of its
// last message; a message the stream refused stops the import (run it
// again to resume; Msg-Id absorbs a retry).
func publishAsync(ctx context.Context, js jetstream.JetStream, msgs []*nats.Msg) (uint64, error) {
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	for _, msg := range msgs {
		f, err := js.PublishMsgAsync(msg, jetstream.WithStallWait(30*time.Second))
		if err != nil {
			return 0, fmt.Errorf("archive: publish %s: %w", msg.Subject, err)
		}
		futures = append(futures, f)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	var last uint64
	for _, f := range futures {
		select {
		case err := <-f.Err():
			return 0, fmt.Errorf("archive: publish: %w (run the import again to resume)", err)
		case ack := <-f.Ok():
			last = max(last, ack.Sequence)
		}
	}
	return last, nil
}

func rewrite(subject, from, to string) string {
	if from == to {
		return subject
	}
	return strings.Replace(subject, wire.SubjectPrefix+from+".", wire.SubjectPrefix+to+".", 1)
}
