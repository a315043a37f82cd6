package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/wire"
)

// ReplayOptions configure a replay.
type ReplayOptions struct {
	NATS string // a running engine; empty: an embedded one in Dir/engine
	// NATSOptions configure the connection to the engine at NATS. A
	// recording holds the principal's resolutions, which a participant of
	// the embedded default may not publish: give the operator user of the
	// engine's credentials file. The embedded engine's own is used by
	// default.
	NATSOptions []nats.Option
	Dir         string
	// Speed scales the recording's pacing: 2 replays twice as fast; 0 as
	// fast as possible.
	Speed float64
	// As is the deliberation id to replay under (default: a new one).
	As       string
	Progress io.Writer
	// Wait, when set, keeps an embedded engine up this long after the
	// replay (for a demo to be looked at).
	Wait time.Duration
	// ProvenanceRoots are the embedded engine's re-verification roots, for
	// a recorded charter with a provenance policy.
	ProvenanceRoots []string
	// Partitioned runs the embedded engine with the record partitioned
	// (engine serve --partitioned, docs/SCALING.md).
	Partitioned bool
}

// ReplayResult says what a replay did.
type ReplayResult struct {
	Deliberation string `json:"deliberation"`
	Published    int    `json:"published"`
	Skipped      int    `json:"skipped_supervisor"`
	Status       string `json:"status"`
	StateDigest  string `json:"state_digest"`
}

// Replay re-publishes a stream recording into an engine as a new
// deliberation, with its original pacing scaled by Speed: for demos and
// load. The supervisor's emissions are not re-published: the live
// supervisor judges the replayed messages again (with a different pacing,
// its clock-based judgments can differ).
func Replay(ctx context.Context, rec *recording.Reader, opts ReplayOptions) (*ReplayResult, error) {
	if rec.Format() != recording.Stream {
		return nil, fmt.Errorf("relay: replay needs a stream recording (engine export --format stream), and this is an artifact log or not a recording")
	}
	eng, err := startEngine(ctx, engineSpec{URL: opts.NATS, Participant: opts.NATSOptions, Dir: opts.Dir, Roots: opts.ProvenanceRoots, Partitioned: opts.Partitioned})
	if err != nil {
		return nil, err
	}
	defer eng.Close(opts.Wait)
	// A replay republishes the principal's messages: connected to the
	// embedded engine as its operator.
	as := eng.Participant
	if eng.Embedded() {
		as = eng.Operator
	}
	refused := newRefusal(ctx)
	nc, err := eng.connect("", as, refused.option())
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	from, to := rec.Header().Deliberation, opts.As
	if to == "" {
		to = uuid.Must(uuid.NewV7()).String()
	}
	res := &ReplayResult{Deliberation: to}
	var prev time.Time
	var last uint64
	ended := false // the recording holds a supervisor TERMINATION
	for {
		m, err := rec.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if strings.HasSuffix(m.Subject, ".art."+wire.SupervisorToken) {
			ended = ended || bytes.Contains(m.Data, []byte(`"artifact_type":"TERMINATION"`))
			res.Skipped++
			continue
		}
		if strings.HasSuffix(m.Subject, ".art."+wire.CheckpointToken) {
			// The recorded engine's checkpoints: the replaying engine
			// checkpoints its own record (and a checkpoint is no message
			// of it: the state digest is the same without).
			continue
		}
		if opts.Speed > 0 && !prev.IsZero() && m.Time.After(prev) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(float64(m.Time.Sub(prev)) / opts.Speed)):
			}
		}
		prev = m.Time
		subject := strings.Replace(m.Subject, wire.SubjectPrefix+from+".", wire.SubjectPrefix+to+".", 1)
		ack, err := refused.publish(js, subject, m.Data)
		if err != nil {
			_, tok, _ := strings.Cut(subject, ".art.")
			return nil, fmt.Errorf("relay: replay message %d: %w%s", m.Position, err, reservedHint(tok))
		}
		last = ack.Sequence
		res.Published++
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "replayed %d: %s\n", m.Position, subject)
		}
	}
	v, err := waitState(ctx, nc, to, last)
	if err != nil {
		return nil, err
	}
	if ended && v.Status == api.StatusOpen {
		// The recorded deliberation was ended by the supervisor: give the
		// live one the time to judge the replay the same way (it settles
		// a burst before judging).
		c, _ := clientFor(nc)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_ = c.Watch(wctx, to, func(w api.View) bool { v = w; return w.Status == api.StatusOpen })
		cancel()
	}
	res.Status, res.StateDigest = string(v.Status), v.StateDigest.String()
	return res, nil
}

// refusal turns a permission violation the server reports on a
// connection into the end of its publishes: a refused publish gets no
// answer, and would otherwise fail only at its timeout, without a reason.
type refusal struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	layout  ledger.Layout // the record's layout, once found (ledger.Locate)
	located bool
}

func newRefusal(ctx context.Context) *refusal {
	r := &refusal{}
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	return r
}

// option is the connection's error handler.
func (r *refusal) option() nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			r.cancel(err)
		}
	})
}

// publish publishes data on subject into the stream of the record that
// holds its deliberation (ledger.Locate), failing with the server's
// permission violation when there is one. The acknowledgement's Sequence
// is the message's position in the record.
func (r *refusal) publish(js jetstream.JetStream, subject string, data []byte) (*jetstream.PubAck, error) {
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	if !r.located {
		l, _, err := ledger.Locate(ctx, js)
		if err != nil {
			return nil, err
		}
		r.layout, r.located = l, true
	}
	stream := r.layout.StreamOf(wire.DeliberationOf(subject))
	ack, err := js.Publish(ctx, subject, data, jetstream.WithExpectStream(stream))
	if err != nil && context.Cause(r.ctx) != nil {
		err = context.Cause(r.ctx)
	}
	if err == nil {
		// The position of the message (the stream's sequence, with the
		// stream's index over several streams).
		p, _ := r.layout.PositionOf(ack.Stream, ack.Sequence)
		ack.Sequence = p
	}
	return ack, err
}

func waitState(ctx context.Context, nc *nats.Conn, id string, seq uint64) (api.View, error) {
	c, err := clientFor(nc)
	if err != nil {
		return api.View{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return c.WaitPosition(wctx, id, seq)
}

// prefix reads the messages of a stream recording up to message at (an
// ordinal within the recorded deliberation) or, when at is 0, up to stream
// position atPos, for a fork: the participants' artifacts only (not the
// control messages nor the supervisor's emissions), with their participant
// tokens. Ordinals are counted as the engine counts them: the recording is
// folded, and a message is one of the deliberation's from its applied open
// on.
func prefix(rec *recording.Reader, at, atPos uint64) ([]recording.Message, []string, error) {
	if rec.Format() != recording.Stream {
		return nil, nil, fmt.Errorf("relay: fork needs a stream recording (engine export --format stream), and this is an artifact log or not a recording")
	}
	if (at == 0) == (atPos == 0) {
		return nil, nil, errors.New("relay: fork: give the message to fork after, as an ordinal (--at) or a stream position (--at-position)")
	}
	id := rec.Header().Deliberation
	fold := projector.New(projector.DefaultOptions())
	var out []recording.Message
	var parts []string
	var messages uint64 // the deliberation's messages read
	for {
		m, err := rec.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if atPos > 0 && m.Position > atPos {
			break
		}
		fold.Apply(projector.Msg{Seq: m.Position, Subject: m.Subject, Data: m.Data, Time: m.Time, Signature: m.Signature})
		if at > 0 {
			d := fold.Deliberation(id)
			if d == nil || d.Ordinal(m.Position) == 0 {
				continue // not (yet) one of the deliberation's messages
			}
			if d.Ordinal(m.Position) > at {
				break
			}
			messages = d.Ordinal(m.Position)
		}
		_, tok, ok := strings.Cut(m.Subject, ".art.")
		if !ok || tok == wire.SupervisorToken {
			continue
		}
		m.Data = slices.Clone(m.Data)
		out = append(out, m)
		if !slices.Contains(parts, tok) {
			parts = append(parts, tok)
		}
	}
	if at > 0 && messages < at {
		return nil, nil, fmt.Errorf("relay: fork: --at %d: the recorded deliberation has only %d messages", at, messages)
	}
	return out, parts, nil
}

// forkPoint says where a fork forked, for people.
func forkPoint(o Options) string {
	if o.ForkAt > 0 {
		return fmt.Sprintf("message %d of the recorded deliberation", o.ForkAt)
	}
	return fmt.Sprintf("stream position %d of the recording", o.ForkAtPosition)
}

func clientFor(nc *nats.Conn) (*client.Client, error) { return client.New(nc, "relay") }
