// Package bindwrite is the query API's one write, a principal's resolution
// of a binding moment (seed 002 §7.3; docs/BINDING.md): verified against
// the moment's envelope, then published as the principal's artifact on
// condition that the deliberation did not move meanwhile. And the
// announcement of binding moments as the fold admits them
// (wire.BindingSubject), with their counts by decider. The HTTP API and
// web's binding pages reach the write through Writer (a web.BindingAPI);
// it reads through Reads, which readmodel.Queries is.
package bindwrite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/signing"
	"github.com/parley-engine/parley/wire"
)

// Reads is what the write reads of the read model (readmodel.Queries is
// one): a deliberation's binding moments, and an artifact's canonical
// bytes.
type Reads interface {
	Bindings(ctx context.Context, id string) ([]binding.Moment, error)
	Artifact(ctx context.Context, id, artifactID string) ([]byte, error)
}

// Writes is told the result of a write published around the JetStream
// the writer was given (a declined resolution's batch); health.Watch is
// one.
type Writes interface {
	Wrote(err error)
}

// Writer publishes principals' resolutions. With Bindings it is what web's
// binding pages need of the API (web.BindingAPI).
type Writer struct {
	q      Reads
	r      *runner.Runner
	js     jetstream.JetStream // whose PublishMsg the writes are told of
	writes Writes              // nil: none
	// Key is the engine's key (nil: none): a resolution the engine
	// publishes for a principal is signed with it, unless the charter
	// binds the principal's token to another key (then the engine cannot
	// speak for the principal, and says so) or binds keys without
	// requiring signatures and none to the principal (then it goes
	// unsigned, as the fold admits it).
	Key nkeys.KeyPair
}

// New returns a writer that reads from q and r, and publishes with js.
func New(q Reads, r *runner.Runner, js jetstream.JetStream, writes Writes) *Writer {
	return &Writer{q: q, r: r, js: js, writes: writes}
}

// Bindings returns the binding moments of a deliberation
// (readmodel.Queries.Bindings).
func (wr *Writer) Bindings(ctx context.Context, id string) ([]binding.Moment, error) {
	return wr.q.Bindings(ctx, id)
}

// Resolve applies a principal's resolution (the body, seed 002 §7.3) to the
// open binding moment of deliberation id whose envelope has digest
// envDigest: verified, then published as the principal's artifact
// (binding.Record), on condition that nothing else arrived in the
// deliberation since it was read, so that two resolutions can never both
// land. A resolution naming an unknown or resolved envelope is discarded.
func (wr *Writer) Resolve(ctx context.Context, id, envDigest string, body []byte, principal string) (*binding.Resolved, error) {
	if !wire.ValidToken(principal) {
		return nil, &api.Error{Kind: api.KindInvalid, Code: api.CodeBadRequest, Message: "as: " + strconv.Quote(principal) + " is not a participant token"}
	}
	res, err := binding.ParseResolution(body)
	if err != nil {
		var mal *binding.Malformed
		errors.As(err, &mal)
		return nil, &api.Error{Kind: api.KindInvalid, Code: "resolution.malformed", Message: err.Error(), Findings: mal.Findings}
	}
	if res.EnvelopeDigest.String() != envDigest {
		return nil, &api.Error{Kind: api.KindInvalid, Code: binding.CodeEnvelopeMismatch, Message: "the resolution names " + res.EnvelopeDigest.String() + ", the path " + envDigest}
	}
	var last uint64
	var moments []binding.Moment
	var keys map[string]string
	if !wr.r.ReadDeliberation(id, func(d *projector.Deliberation) {
		last, moments = d.Position, d.BindingMoments()
		if d.Charter != nil {
			keys = d.Charter.Keys
		}
	}) {
		return nil, &api.Error{Kind: api.KindNotFound, Code: api.CodeNotFound, Message: "deliberation " + id + " not found"}
	}
	var m *binding.Moment
	for i := range moments {
		if moments[i].EnvelopeDigest == envDigest {
			m = &moments[i]
		}
	}
	switch {
	case m == nil:
		return nil, &api.Error{Kind: api.KindNotFound, Code: binding.CodeUnknownEnvelope, Message: "no binding moment of " + id + " has envelope " + envDigest + ": the resolution is discarded"}
	case m.Principal != principal:
		// The fold would refuse it (binding.not_principal): publish nothing.
		return nil, &api.Error{Kind: api.KindForbidden, Code: projector.CodeBindingNotPrincipal,
			Message: "this token resolves as " + strconv.Quote(principal) + ", and only the deliberation's principal, " + strconv.Quote(m.Principal) + ", resolves its binding moments: nothing was published"}
	case m.Status == "resolved":
		return nil, &api.Error{Kind: api.KindConflict, Code: binding.CodeAlreadyResolved, Message: "envelope " + envDigest + " was already resolved (" + string(m.Resolution.Resolution) + "): the resolution is discarded"}
	}
	raw, err := wr.q.Artifact(ctx, id, m.Decision.String())
	if err != nil {
		return nil, err
	}
	decision, err := events.Validate(raw)
	if err != nil {
		return nil, err
	}
	env, err := binding.EnvelopeOf(decision)
	if err != nil {
		return nil, err
	}
	v := binding.Verify(env, res, nil)
	if !v.OK {
		return nil, &api.Error{Kind: api.KindUnprocessable, Code: v.Findings[0].Code, Message: v.Findings[0].Message, Findings: v.Findings}
	}
	a, err := binding.Record(decision, env, res)
	if err != nil {
		return nil, err
	}
	msg := &nats.Msg{Subject: wire.ArtifactSubject(id, principal), Data: a.Canonical, Header: nats.Header{}}
	if err := wr.sign(msg, id, principal, a.ID.String(), keys); err != nil {
		return nil, err
	}
	var ack *jetstream.PubAck
	if res.Kind == binding.KindDeclined {
		// The decline and the cancel it implies land together or not at all.
		ack, err = wr.publishDecline(ctx, id, msg, a, env, last)
		if wr.writes != nil {
			wr.writes.Wrote(err) // the batch goes around wr.js's PublishMsg
		}
	} else {
		ack, err = wr.js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgIDs.Artifact(msg.Subject, a.ID.String())), jetstream.WithExpectStream(wr.r.StreamOf(id)),
			// The filter as stored: the server does not map this header, and
			// a published-form filter under the mapping names nothing
			// stored, so it would guard nothing (docs/SCALING.md).
			jetstream.WithExpectLastSequenceForSubject(ledger.Sequence(last), wr.r.Layout().Filter(id)))
	}
	if err != nil {
		if ledger.IsWrongLastSequence(err) {
			return nil, &api.Error{Kind: api.KindConflict, Code: "binding.concurrent", Message: "the deliberation moved while the resolution was checked; nothing was published: read the binding moments again and retry"}
		}
		return nil, &api.Error{Kind: api.KindUnavailable, Code: api.CodeUnavailable, Message: "publish: " + err.Error()}
	}
	// The position of what was stored (its stream's sequence, in a
	// layout of several streams with the stream's index).
	l := wr.r.Layout()
	pos := l.Position(l.Index(id), ack.Sequence)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := wr.r.WaitForIn(wctx, id, pos); err != nil {
		return nil, &api.Error{Kind: api.KindUnavailable, Code: api.CodeUnavailable, Message: "published at position " + strconv.FormatUint(pos, 10) + " but not yet projected: " + err.Error()}
	}
	var accepted bool
	var rej string
	var ord uint64
	wr.r.ReadDeliberation(id, func(d *projector.Deliberation) {
		ord = d.Ordinal(pos)
		accepted = d.PositionOf(a.ID) != 0
		if !accepted {
			kept, _, _ := d.Rejections()
			for _, r := range kept {
				if r.Position == pos {
					rej = r.Code + ": " + r.Message
				}
			}
		}
	})
	if !accepted {
		return nil, &api.Error{Kind: api.KindUnprocessable, Code: "binding.rejected", Message: fmt.Sprintf("the principal's %s was recorded as message #%d (position %d) and rejected by the projector (%s); is %q a participant of the charter?", a.Type, ord, pos, rej, principal)}
	}
	return &binding.Resolved{Verdict: v, ArtifactID: a.ID, Type: a.Type, Participant: principal, Position: pos, Ordinal: ord}, nil
}

// msgIDs makes the Nats-Msg-Ids of the API's writes (binding resolutions
// and the cancel a decline implies): keyed per process, so nobody else can
// compute them.
var msgIDs = wire.NewMsgIDs()

// publishDecline publishes a declined resolution's artifact and the cancel
// control message it implies (binding.DeclineControl) as one atomic batch,
// on condition that the deliberation's last message is still at last. It
// returns the artifact's acknowledgement.
func (wr *Writer) publishDecline(ctx context.Context, id string, msg *nats.Msg, a *events.Artifact, env *binding.Envelope, last uint64) (*jetstream.PubAck, error) {
	msg.Header.Set(jetstream.MsgIDHeader, msgIDs.Artifact(msg.Subject, a.ID.String()))
	msg.Header.Set(jetstream.ExpectedStreamHeader, wr.r.StreamOf(id))
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(ledger.Sequence(last), 10))
	msg.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, wr.r.Layout().Filter(id))
	ctl := &nats.Msg{Subject: wire.ControlSubject(id), Data: binding.DeclineControl(env), Header: nats.Header{}}
	ctl.Header.Set(jetstream.MsgIDHeader, msgIDs.Control(ctl.Subject, "decline:"+env.Digest.String()))
	ack, err := jetstreamext.PublishMsgBatch(ctx, wr.js, []*nats.Msg{msg, ctl})
	if err != nil {
		return nil, err
	}
	// The batch's ack names its last message, the cancel; the artifact is
	// the one before it.
	return &jetstream.PubAck{Stream: ack.Stream, Sequence: ack.Sequence - 1}, nil
}

// Metrics is what the announcer counts (metrics.Metrics is one): label
// values it bounds itself.
type Metrics interface {
	BindingMoment(decider string, suppressed bool)
	BindingResolution(decider, resolution string)
}

// Announcer announces binding moments as they are admitted and counts
// them, and the resolutions, per decider. It counts only what the fold
// admitted, and the fold admits a resolution only from the moment's
// principal (projector/binding.go).
type Announcer struct {
	nc       *nats.Conn
	m        Metrics
	deciders deciderLabels
}

// NewAnnouncer returns an announcer that publishes on nc and counts in m.
func NewAnnouncer(nc *nats.Conn, m Metrics) *Announcer { return &Announcer{nc: nc, m: m} }

// OnApply is the runner's hook (runner.Config.OnApply); it is handed the
// runner, which may call it before runner.New has returned.
func (b *Announcer) OnApply(r *runner.Runner, _ projector.Msg, out projector.Outcome) {
	// The fold says what it admitted, pending artifacts it released
	// included: nothing is parsed again here but the extensions.
	for _, adm := range out.Admitted {
		b.admitted(r, out.Deliberation, adm)
	}
}

func (b *Announcer) admitted(r *runner.Runner, id string, adm projector.Admission) {
	a := adm.Artifact
	if _, ok := a.Extensions[binding.ExtResolution]; ok {
		// The fold admitted it: the principal's resolution of a moment it
		// references (projector/binding.go). The decider is the
		// participant of the moment's DECISION.
		rec, err := binding.ParseRecord(a.Extensions[binding.ExtResolution])
		if err != nil {
			return
		}
		decider := otherLabel
		r.ReadDeliberation(id, func(d *projector.Deliberation) {
			for _, ref := range a.References {
				n, ok := d.Node(ref.Target)
				if !ok || n.Type != events.TypeDecision || n.Extensions[binding.ExtEnvelope] == nil {
					continue
				}
				if ed, err := binding.Digest(n.Extensions[binding.ExtEnvelope]); err == nil && ed.String() == rec.EnvelopeDigest {
					decider = b.deciders.label(d.Charter, n.Participant)
					break
				}
			}
		})
		b.m.BindingResolution(decider, resolutionLabel(rec.Resolution))
		return
	}
	if _, ok := a.Extensions[binding.ExtEnvelope]; !ok {
		return
	}
	env, err := binding.EnvelopeOf(a)
	if err != nil {
		return
	}
	decider, principal := otherLabel, ""
	r.ReadDeliberation(id, func(d *projector.Deliberation) {
		decider, principal = b.deciders.label(d.Charter, adm.Participant), d.Principal()
	})
	b.m.BindingMoment(decider, len(env.Suppressed()) > 0)
	msg, _ := json.Marshal(binding.Announcement{Deliberation: id, Decision: a.ID, Decider: adm.Participant, Principal: principal, Position: adm.Position,
		EnvelopeDigest: env.Digest.String(), Envelope: env.Canonical, Suppressed: env.Suppressed()})
	b.nc.Publish(wire.BindingSubject(id), msg)
}

// resolutionLabel is a resolution's kind as a label value: one of the
// four, or "other" (the fold admits no other).
func resolutionLabel(k binding.Kind) string {
	switch k {
	case binding.KindOption, binding.KindAnswer, binding.KindQuestion, binding.KindDeclined:
		return string(k)
	}
	return otherLabel
}

// otherLabel is the label value of what the metrics do not name.
const otherLabel = "other"

// MaxDeciderLabels bounds the decider label values of the binding metrics
// an engine exports: past as many distinct deciders, the others count as
// "other".
const MaxDeciderLabels = 256

// deciderLabels turns a decider into a label value: its token when the
// deliberation's charter lists it among its participants (or names it
// terminator or principal), while fewer than MaxDeciderLabels are in use;
// "other" otherwise. A token is at most 64 characters; nothing a
// participant writes in an artifact becomes a label.
type deciderLabels struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (l *deciderLabels) label(ch *api.Charter, decider string) string {
	if ch == nil || !(slices.Contains(ch.Participants, decider) || slices.Contains(ch.Terminators, decider) || ch.Principal == decider) {
		return otherLabel
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	if !l.seen[decider] && len(l.seen) >= MaxDeciderLabels {
		return otherLabel
	}
	l.seen[decider] = true
	return decider
}

// sign signs a principal's resolution with the engine's key (Writer.Key)
// where the charter's binding (keys) lets the engine's key speak for the
// principal.
func (wr *Writer) sign(msg *nats.Msg, id, principal, artifactID string, keys map[string]string) error {
	if wr.Key == nil {
		return nil
	}
	pub, err := wr.Key.PublicKey()
	if err != nil {
		return err
	}
	bound, ok := keys[principal]
	switch {
	case ok && bound != pub:
		return &api.Error{Kind: api.KindForbidden, Code: signing.ErrWrongKey.Code,
			Message: "the charter binds " + strconv.Quote(principal) + " to a key that is not the engine's: the principal signs their resolution themselves (engine publish --key): nothing was published"}
	case !ok && len(keys) > 0:
		return nil // the fold admits it unsigned only so (the charter does not require signatures of a token it binds no key to)
	}
	h, err := signing.Sign(wr.Key, id, principal, artifactID)
	if err != nil {
		return err
	}
	h.Set(msg.Header)
	return nil
}
