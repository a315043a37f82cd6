package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/wire"
)

// DefaultPrincipal is the participant token a resolution is published
// under when the request names none.
const DefaultPrincipal = wire.PrincipalToken

// BindingMoment is a provisional DECISION that asks its principal (seed
// 002), with where it stands (its home is binding, so that web's binding
// pages render it without importing the engine's assembly).
type BindingMoment = binding.Moment

// Bindings returns the binding moments of a deliberation in stream order.
// It reads the bodies of the deliberation's artifacts from the stream
// (the projection keeps no bodies): its cost grows with the deliberation.
func (q *Queries) Bindings(ctx context.Context, id string) ([]BindingMoment, error) {
	list, err := q.ArtifactList(id)
	if err != nil {
		return nil, err
	}
	out := []BindingMoment{}
	byDigest := map[string]int{}
	for _, e := range list {
		if e.Participant == projector.SupervisorToken {
			continue // the supervisor neither asks nor resolves
		}
		msg, err := q.stream.GetMsg(ctx, e.Position)
		if err != nil {
			return nil, &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "read position: " + err.Error()}
		}
		a, err := events.Validate(msg.Data)
		if err != nil {
			continue
		}
		if rr, ok := binding.ResolutionOf(a); ok {
			if i, ok := byDigest[rr.EnvelopeDigest]; ok && out[i].Status == "open" {
				r, in := rr, a.ID
				out[i].Status, out[i].Resolution, out[i].ResolvedBy, out[i].ResolvedIn = "resolved", &r, e.Participant, &in
			}
			continue
		}
		if _, ok := a.Extensions[binding.ExtEnvelope]; !ok || a.Type != events.TypeDecision {
			continue
		}
		m := BindingMoment{Decision: a.ID, Decider: e.Participant, Position: e.Position}
		env, err := binding.EnvelopeOf(a)
		switch {
		case err == nil:
			m.Status, m.EnvelopeDigest, m.Envelope, m.Suppressed = "open", env.Digest.String(), env.Canonical, env.Suppressed()
			if _, dup := byDigest[m.EnvelopeDigest]; dup {
				continue // the same envelope twice is one binding moment (§12.5)
			}
			byDigest[m.EnvelopeDigest] = len(out)
		default:
			m.Status = "malformed"
			var mal *binding.Malformed
			if errors.As(err, &mal) {
				m.Findings = mal.Findings
			} else {
				m.Findings = []binding.Finding{{Code: "binding.not_provisional", Message: err.Error()}}
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// Resolved is the answer to a resolution: what was published.
type Resolved = binding.Resolved

// Resolve applies a principal's resolution (the body, seed 002 §7.3) to the
// open binding moment of deliberation id whose envelope has digest
// envDigest: verified, then published as the principal's artifact
// (binding.Record), on condition that nothing else arrived in the
// deliberation since it was read, so that two resolutions can never both
// land. A resolution naming an unknown or resolved envelope is discarded.
func (q *Queries) Resolve(ctx context.Context, id, envDigest string, body []byte, principal string) (*Resolved, error) {
	if !projector.ValidToken(principal) {
		return nil, &apiError{Status: http.StatusBadRequest, Code: "bad_request", Message: "as: " + strconv.Quote(principal) + " is not a participant token"}
	}
	res, err := binding.ParseResolution(body)
	if err != nil {
		var mal *binding.Malformed
		errors.As(err, &mal)
		return nil, &apiError{Status: http.StatusBadRequest, Code: "resolution.malformed", Message: err.Error(), Findings: mal.Findings}
	}
	if res.EnvelopeDigest.String() != envDigest {
		return nil, &apiError{Status: http.StatusBadRequest, Code: binding.CodeEnvelopeMismatch, Message: "the resolution names " + res.EnvelopeDigest.String() + ", the path " + envDigest}
	}
	var last uint64
	q.r.ReadDeliberation(id, func(d *projector.Deliberation) {
		last = d.Position
	})
	moments, err := q.Bindings(ctx, id)
	if err != nil {
		return nil, err
	}
	var m *BindingMoment
	for i := range moments {
		if moments[i].EnvelopeDigest == envDigest {
			m = &moments[i]
		}
	}
	switch {
	case m == nil:
		return nil, &apiError{Status: http.StatusNotFound, Code: binding.CodeUnknownEnvelope, Message: "no binding moment of " + id + " has envelope " + envDigest + ": the resolution is discarded"}
	case m.Status == "resolved":
		return nil, &apiError{Status: http.StatusConflict, Code: binding.CodeAlreadyResolved, Message: "envelope " + envDigest + " was already resolved (" + string(m.Resolution.Resolution) + "): the resolution is discarded"}
	}
	raw, err := q.Artifact(ctx, id, m.Decision.String())
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
		return nil, &apiError{Status: http.StatusUnprocessableEntity, Code: v.Findings[0].Code, Message: v.Findings[0].Message, Findings: v.Findings}
	}
	a, err := binding.Record(decision, env, res)
	if err != nil {
		return nil, err
	}
	msg := &nats.Msg{Subject: projector.ArtifactSubject(id, principal), Data: a.Canonical, Header: nats.Header{}}
	var ack *jetstream.PubAck
	if res.Kind == binding.KindDeclined {
		// The decline and the cancel it implies land together or not at all.
		ack, err = q.publishDecline(ctx, id, msg, a, env, last)
		q.watch.wrote(err) // the batch goes around q.js's PublishMsg
	} else {
		ack, err = q.js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgIDs.Artifact(msg.Subject, a.ID.String())), jetstream.WithExpectStream(ledger.StreamName),
			jetstream.WithExpectLastSequenceForSubject(last, projector.DeliberationFilter(id)))
	}
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return nil, &apiError{Status: http.StatusConflict, Code: "binding.concurrent", Message: "the deliberation moved while the resolution was checked; nothing was published: read the binding moments again and retry"}
		}
		return nil, &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "publish: " + err.Error()}
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := q.r.WaitForIn(wctx, id, ack.Sequence); err != nil {
		return nil, &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "published at " + strconv.FormatUint(ack.Sequence, 10) + " but not yet projected: " + err.Error()}
	}
	var accepted bool
	var rej string
	q.r.ReadDeliberation(id, func(d *projector.Deliberation) {
		accepted = d.PositionOf(a.ID) != 0
		if !accepted {
			kept, _, _ := d.Rejections()
			for _, r := range kept {
				if r.Position == ack.Sequence {
					rej = r.Code + ": " + r.Message
				}
			}
		}
	})
	if !accepted {
		return nil, &apiError{Status: http.StatusUnprocessableEntity, Code: "binding.rejected", Message: fmt.Sprintf("the principal's %s was recorded at %d and rejected by the projector (%s); is %q a participant of the charter?", a.Type, ack.Sequence, rej, principal)}
	}
	return &Resolved{Verdict: v, ArtifactID: a.ID, Type: a.Type, Participant: principal, Position: ack.Sequence}, nil
}

// msgIDs makes the Nats-Msg-Ids of the API's writes (binding resolutions
// and the cancel a decline implies): keyed per process, so nobody else can
// compute them.
var msgIDs = wire.NewMsgIDs()

// publishDecline publishes a declined resolution's artifact and the cancel
// control message it implies (binding.DeclineControl) as one atomic batch,
// on condition that the deliberation's last message is still at last. It
// returns the artifact's acknowledgement.
func (q *Queries) publishDecline(ctx context.Context, id string, msg *nats.Msg, a *events.Artifact, env *binding.Envelope, last uint64) (*jetstream.PubAck, error) {
	msg.Header.Set(jetstream.MsgIDHeader, msgIDs.Artifact(msg.Subject, a.ID.String()))
	msg.Header.Set(jetstream.ExpectedStreamHeader, ledger.StreamName)
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
	msg.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, projector.DeliberationFilter(id))
	ctl := &nats.Msg{Subject: projector.ControlSubject(id), Data: binding.DeclineControl(env), Header: nats.Header{}}
	ctl.Header.Set(jetstream.MsgIDHeader, msgIDs.Control(ctl.Subject, "decline:"+env.Digest.String()))
	ack, err := jetstreamext.PublishMsgBatch(ctx, q.js, []*nats.Msg{msg, ctl})
	if err != nil {
		return nil, err
	}
	// The batch's ack names its last message, the cancel; the artifact is
	// the one before it.
	return &jetstream.PubAck{Stream: ack.Stream, Sequence: ack.Sequence - 1}, nil
}

// BindingSubject is where the engine announces a new binding moment of a
// deliberation (core NATS, not stored: GET .../bindings is the record);
// wire.BindingSubject.
func BindingSubject(deliberation string) string { return wire.BindingSubject(deliberation) }

// Announcement is what the engine publishes on BindingSubject.
type Announcement struct {
	Deliberation   string          `json:"deliberation"`
	Decision       canon.Digest    `json:"decision"`
	Decider        string          `json:"decider"`
	Position       uint64          `json:"position"`
	EnvelopeDigest string          `json:"envelope_digest"`
	Envelope       json.RawMessage `json:"envelope"`
	Suppressed     []string        `json:"hatches_suppressed,omitempty"`
}

// bindingWatch announces binding moments as they are admitted and counts
// them, and the resolutions, per decider.
type bindingWatch struct {
	nc *nats.Conn
	m  *Metrics
}

// onApply is the runner's hook; it is handed the runner, which may call
// it before runner.New has returned.
func (b *bindingWatch) onApply(r *runner.Runner, _ projector.Msg, out projector.Outcome) {
	// The fold says what it admitted, pending artifacts it released
	// included: nothing is parsed again here but the extensions.
	for _, adm := range out.Admitted {
		b.admitted(r, out.Deliberation, adm)
	}
}

func (b *bindingWatch) admitted(r *runner.Runner, id string, adm projector.Admission) {
	a := adm.Artifact
	if _, ok := a.Extensions[binding.ExtResolution]; ok {
		rr, _ := binding.ResolutionOf(a)
		decider := ""
		for _, ref := range a.References {
			r.ReadDeliberation(id, func(d *projector.Deliberation) {
				if n, ok := d.Node(ref.Target); ok && n.Type == events.TypeDecision {
					decider = n.Participant
				}
			})
			if decider != "" {
				break
			}
		}
		b.m.bindingResolutions.WithLabelValues(decider, string(rr.Resolution)).Inc()
		return
	}
	if _, ok := a.Extensions[binding.ExtEnvelope]; !ok {
		return
	}
	env, err := binding.EnvelopeOf(a)
	if err != nil {
		return
	}
	b.m.bindingMoments.WithLabelValues(adm.Participant).Inc()
	if len(env.Suppressed()) > 0 {
		b.m.bindingSuppressed.WithLabelValues(adm.Participant).Inc()
	}
	msg, _ := json.Marshal(Announcement{Deliberation: id, Decision: a.ID, Decider: adm.Participant, Position: adm.Position,
		EnvelopeDigest: env.Digest.String(), Envelope: env.Canonical, Suppressed: env.Suppressed()})
	b.nc.Publish(BindingSubject(id), msg)
}
