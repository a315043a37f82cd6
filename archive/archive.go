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
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

// ErrNoDeliberation: the stream has no message of the deliberation.
var ErrNoDeliberation = errors.New("archive: no such deliberation in the stream")

// messages calls fn for every message of deliberation id in the stream, in
// order, with its original position and time when it was imported.
func messages(ctx context.Context, js jetstream.JetStream, id string, fn func(streamMsg) error) (int, error) {
	return messagesSeq(ctx, js, id, func(m streamMsg, _ uint64) error { return fn(m) })
}

// streamMsg is a message read from the stream: its recording form (the
// original position an import gave it, the stream time) and the time it
// claims to have had originally (zero: none).
type streamMsg struct {
	recording.Message
	Claimed time.Time
}

// fold applies m to p, re-verified with verify first as the live engine
// does (nil: none), and returns its recording form, with the time the fold
// gave it.
func (m streamMsg) fold(p *projector.Projection, verify provenance.Verifier) recording.Message {
	msg := projector.Msg{Seq: m.Position, Subject: m.Subject, Data: m.Data, Time: m.Time, Claimed: m.Claimed}
	p.Prepare(&msg, verify)
	out := p.Apply(msg)
	r := m.Message
	if !out.Time.IsZero() {
		r.Time = out.Time
	}
	return r
}

// messagesSeq is messages, with each message's position in this stream.
func messagesSeq(ctx context.Context, js jetstream.JetStream, id string, fn func(m streamMsg, seq uint64) error) (int, error) {
	s, err := js.Stream(ctx, wire.StreamName)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(projector.DeliberationFilter(id)))
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
	cons, err := js.OrderedConsumer(ctx, wire.StreamName, jetstream.OrderedConsumerConfig{FilterSubjects: []string{projector.DeliberationFilter(id)}})
	if err != nil {
		return 0, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return 0, err
	}
	defer it.Stop()
	for n := 0; n < total; n++ {
		m, err := it.Next()
		if err != nil {
			return n, err
		}
		meta, err := m.Metadata()
		if err != nil {
			return n, err
		}
		msg := streamMsg{Message: recording.Message{Position: meta.Sequence.Stream, Subject: m.Subject(), Time: meta.Timestamp, Data: m.Data()}}
		if h := m.Headers(); h != nil {
			if p, err := strconv.ParseUint(h.Get(wire.OriginalPositionHeader), 10, 64); err == nil && p > 0 {
				msg.Position = p
			}
			// The time a message claims is the fold's to judge
			// (projector.EffectiveTime): Export writes the time the fold
			// gave it.
			if t, err := time.Parse(time.RFC3339Nano, h.Get(wire.OriginalTimeHeader)); err == nil {
				msg.Claimed = t
			}
		}
		if err := fn(msg, meta.Sequence.Stream); err != nil {
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
			return rw.Write(m.fold(p, verify))
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
		if !in[m.Position] {
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
}

// BatchSize is the number of messages published before waiting for their
// acknowledgements.
const BatchSize = 1000

// Import republishes a stream recording into the stream, as deliberation
// as (or the recording's own id when empty). It refuses a deliberation that
// already has messages, unless they are the recording's first ones (an
// interrupted import), which it then skips. Every message keeps its
// original position and time in headers, so that an export gives the
// recording back. progress, when set, is called after every batch.
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
	if !projector.ValidDeliberation(to) {
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
	existing := 0
	var lastSeq uint64 // the deliberation's last position in this stream
	_, err := messagesSeq(ctx, js, to, func(m streamMsg, seq uint64) error {
		if existing >= len(recs) || m.Subject != recs[existing].Subject || !bytes.Equal(m.Data, recs[existing].Data) {
			return fmt.Errorf("archive: deliberation %s already exists in the stream and is not this recording (message %d differs); nothing was imported", to, existing+1)
		}
		existing++
		lastSeq = seq
		return nil
	})
	if err != nil {
		return res, err
	}
	res.Skipped = existing
	stream, err := js.Stream(ctx, wire.StreamName)
	if err != nil {
		return res, err
	}
	res.Atomic = stream.CachedInfo().Config.AllowAtomicPublish
	ids := wire.NewMsgIDs() // this import's own: nobody else can compute them
	for i := existing; i < len(recs); i += BatchSize {
		end := min(i+BatchSize, len(recs))
		msgs := make([]*nats.Msg, 0, end-i)
		for _, m := range recs[i:end] {
			msg := &nats.Msg{Subject: m.Subject, Data: m.Data, Header: nats.Header{}}
			msg.Header.Set(wire.OriginalPositionHeader, strconv.FormatUint(m.Position, 10))
			msg.Header.Set(wire.OriginalTimeHeader, m.Time.UTC().Format(time.RFC3339Nano))
			msg.Header.Set(jetstream.MsgIDHeader, ids.For("import", to, strconv.FormatUint(m.Position, 10)))
			msg.Header.Set(jetstream.ExpectedStreamHeader, wire.StreamName)
			msgs = append(msgs, msg)
		}
		if res.Atomic {
			seq, err := publishAtomic(ctx, js, to, msgs, lastSeq)
			if err != nil {
				return res, err
			}
			lastSeq = seq
		} else if err := publishAsync(ctx, js, msgs); err != nil {
			return res, err
		}
		res.Published = end - existing
		if progress != nil {
			progress(end, len(recs))
		}
	}
	return res, nil
}

// publishAtomic publishes one batch atomically (all of it or none), on
// condition that the deliberation's last message in the stream is still at
// last: an import never interleaves with other messages of the
// deliberation unnoticed. It returns the batch's last position.
func publishAtomic(ctx context.Context, js jetstream.JetStream, id string, msgs []*nats.Msg, last uint64) (uint64, error) {
	msgs[0].Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
	msgs[0].Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, projector.DeliberationFilter(id))
	ack, err := jetstreamext.PublishMsgBatch(ctx, js, msgs)
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return 0, fmt.Errorf("archive: deliberation %s received other messages during the import; nothing of this batch was published (%w)", id, err)
		}
		return 0, fmt.Errorf("archive: atomic batch publish: %w (nothing of this batch was published; run the import again to resume)", err)
	}
	return ack.Sequence, nil
}

// publishAsync publishes one batch with asynchronous acknowledgements, for
// a stream without atomic batch publish; a message the stream refused
// stops the import (run it again to resume; Msg-Id absorbs a retry).
func publishAsync(ctx context.Context, js jetstream.JetStream, msgs []*nats.Msg) error {
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	for _, msg := range msgs {
		f, err := js.PublishMsgAsync(msg, jetstream.WithStallWait(30*time.Second))
		if err != nil {
			return fmt.Errorf("archive: publish %s: %w", msg.Subject, err)
		}
		futures = append(futures, f)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, f := range futures {
		select {
		case err := <-f.Err():
			return fmt.Errorf("archive: publish: %w (run the import again to resume)", err)
		default:
		}
	}
	return nil
}

func rewrite(subject, from, to string) string {
	if from == to {
		return subject
	}
	return strings.Replace(subject, projector.SubjectPrefix+from+".", projector.SubjectPrefix+to+".", 1)
}
