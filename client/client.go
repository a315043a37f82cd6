// Package client is the Go client of parley for participants: open a
// deliberation with its charter, seal, validate and publish artifacts, send
// control messages, and read or watch the state the engine projects; list
// the deliberations, a deliberation's artifacts and its rejections page by
// page (Deliberations, Artifacts, Rejections: iterators that ask for the
// next page as the loop reaches it).
//
// A Client publishes as one participant token. On a deployment with
// deploy/nats.conf, the NATS user it connects as may only publish on its
// own parley.*.art.<token>, which is what authenticates attribution.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/partition"
	"github.com/parley-engine/parley/signing"
	"github.com/parley-engine/parley/wire"
)

// Client publishes as one participant.
type Client struct {
	nc          *nats.Conn
	js          jetstream.JetStream
	participant string
	ids         *wire.MsgIDs
	opts        Options
	signer      *signing.Signer // Options.SigningKey's, nil without one
	// seen is, for each stream of the record (by its index), the highest
	// position of an acknowledged publish in it (or learned: Saw). In a
	// layout of one stream, only seen[0].
	seen [partition.Count]atomic.Uint64
	// layout is the record's layout once known (nil: not yet): from a
	// publish's acknowledgement (its stream), or asked for
	// (ledger.Locate).
	layout atomic.Pointer[ledger.Layout]
}

// known returns the record's layout, if the client knows it yet.
func (c *Client) known() (ledger.Layout, bool) {
	if l := c.layout.Load(); l != nil {
		return *l, true
	}
	return ledger.Layout{}, false
}

// learn keeps the layout of the stream an acknowledgement names.
func (c *Client) learn(stream string) {
	if l, err := ledger.LayoutOf(stream); err == nil {
		c.keep(l)
	}
}

func (c *Client) keep(l ledger.Layout) { c.layout.Store(&l) }

// record returns the record's layout and its stream, asking the server
// (ledger.Locate: the stream's info) when the client does not know it
// yet. The client is told nothing: the record is PARLEY, or
// PARLEY_0000_1023 under the server's partition mapping
// (docs/SCALING.md), and it reads and expects whichever holds it.
func (c *Client) record(ctx context.Context) (ledger.Layout, jetstream.Stream, error) {
	l, s, err := ledger.Locate(ctx, c.js)
	if err != nil {
		return ledger.Layout{}, nil, err
	}
	c.keep(l)
	return l, s, nil
}

// expectStream is the Nats-Expected-Stream of a publish to deliberation
// id: the stream that holds it once the client knows the record's
// layout, none before (the first acknowledgement names it).
func (c *Client) expectStream(id string) []jetstream.PublishOpt {
	if l, ok := c.known(); ok {
		return []jetstream.PublishOpt{jetstream.WithExpectStream(l.StreamOf(id))}
	}
	return nil
}

// PositionOf is the position of what an acknowledgement names: its
// stream's sequence, as a position of the record's layout (the sequence
// itself in a layout of one stream; ledger.Layout.Position).
func (c *Client) PositionOf(ack *jetstream.PubAck) uint64 {
	l, ok := c.known()
	if !ok {
		if l, _ = ledger.LayoutOf(ack.Stream); l.N() == 1 {
			return ack.Sequence
		}
	}
	if p, ok := l.PositionOf(ack.Stream, ack.Sequence); ok {
		return p
	}
	return ack.Sequence
}

// New returns a client publishing as participant over nc, with the default
// deadlines and retries (Options). opts configure its JetStream context
// (for example jetstream.WithPublishAsyncMaxPending).
func New(nc *nats.Conn, participant string, opts ...jetstream.JetStreamOpt) (*Client, error) {
	return NewWithOptions(nc, participant, Options{JetStream: opts})
}

// NewWithOptions returns a client publishing as participant over nc.
//
// Every request has a deadline (o.Timeout for each attempt of a read, o.PublishTimeout of a publish). Reads are
// idempotent: one that gets no answer (a reply lost in a reconnect, no
// engine serving, no stream leader during an election) or a 503 is asked
// again, with backoff, for up to o.RetryFor, and then fails with
// ErrUnavailable. A publish is retried likewise only when the stream
// deduplicates it (a Nats-Msg-Id: artifacts, open, round); suspend,
// resume and cancel are retried only when nobody answered at all.
//
// Reads carry the stream position of the client's last acknowledged
// publish (min_position): an engine whose projection has not reached it
// waits a little, then answers 503 projection.behind and the read is
// retried, so that with several engines on one cluster a client reads
// its own writes whichever engine answers.
func NewWithOptions(nc *nats.Conn, participant string, o Options) (*Client, error) {
	if !wire.ValidToken(participant) {
		return nil, fmt.Errorf("client: %q is not a participant token ([A-Za-z0-9][A-Za-z0-9_-]{0,63})", participant)
	}
	var signer *signing.Signer
	if o.SigningKey != nil {
		if pub, err := o.SigningKey.PublicKey(); err != nil || !signing.ValidKey(pub) {
			return nil, errors.New("client: the signing key is not an nkeys user key")
		}
		if _, err := o.SigningKey.Seed(); err != nil {
			return nil, errors.New("client: the signing key has no seed: it cannot sign")
		}
		var err error
		if signer, err = signing.NewSigner(o.SigningKey); err != nil {
			return nil, fmt.Errorf("client: the signing key: %w", err)
		}
	}
	// DefaultAsyncMaxPending first: the caller's options override it.
	js, err := jetstream.New(nc, append([]jetstream.JetStreamOpt{jetstream.WithPublishAsyncMaxPending(DefaultAsyncMaxPending)}, o.JetStream...)...)
	if err != nil {
		return nil, err
	}
	return &Client{nc: nc, js: js, participant: participant, ids: wire.NewMsgIDs(), opts: o.withDefaults(), signer: signer}, nil
}

// DefaultAsyncMaxPending is how many asynchronous publishes a client has
// in flight at most (PublishArtifactAsync waits past it), unless its
// JetStream options say otherwise. JetStream's own default, 4,000, lets a
// fleet of a few dozen publishers overflow a server's stream ingest
// queue (100,000 messages by default), which refuses the excess with 429
// too many requests; at 128, 780 publishers fit. The window also bounds
// how far the projection falls behind a saturating fleet: the server
// stores and sends from one goroutine a stream, and while publishes keep
// it busy a reader of the stream receives little until every publisher's
// window is full, so the projection's peak lag is about the fleet's
// messages in flight (200 publishers: 51,000 messages at 256, 26,000 at
// 128, with the same throughput; docs/PERFORMANCE.md).
const DefaultAsyncMaxPending = 128

// Participant returns the client's token.
func (c *Client) Participant() string { return c.participant }

// Charter is the charter of a new deliberation (the open control message, README). Limits and
// Policy are passed through as JSON objects.
type Charter struct {
	Title        string         `json:"title"`
	Participants []string       `json:"participants,omitempty"`
	Terminators  []string       `json:"terminators,omitempty"`
	Limits       map[string]any `json:"limits,omitempty"`
	Policy       map[string]any `json:"policy,omitempty"`
	// Principal is the participant whose resolutions of binding moments
	// count (docs/BINDING.md); empty: "principal".
	Principal string `json:"principal,omitempty"`
	// Keys binds participant tokens to the nkeys user public keys their
	// artifacts are signed with, and RequireSignatures refuses the
	// artifacts of participants that are not (docs/VERIFY.md).
	Keys              map[string]string `json:"keys,omitempty"`
	RequireSignatures bool              `json:"require_signatures,omitempty"`
}

// Open opens a new deliberation with a version 7 UUID and returns its id.
func (c *Client) Open(ctx context.Context, ch Charter) (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	if err := c.OpenID(ctx, id.String(), ch); err != nil {
		return "", err
	}
	return id.String(), nil
}

// OpenID opens the deliberation id (any UUID) with a charter. Like every
// publish, it returns once the stream has stored the message, not once the
// engine has accepted the charter: to know that, publish it with Control
// and wait for its outcome (WaitOutcome), which says applied, or rejected
// with the engine's reason (control.invalid for a misspelt limit).
func (c *Client) OpenID(ctx context.Context, id string, ch Charter) error {
	_, err := c.Control(ctx, id, Control{Op: "open", Charter: &ch})
	return err
}

// Suspend suspends a deliberation.
func (c *Client) Suspend(ctx context.Context, id string) error {
	_, err := c.Control(ctx, id, Control{Op: "suspend"})
	return err
}

// Resume resumes a suspended deliberation.
func (c *Client) Resume(ctx context.Context, id string) error {
	_, err := c.Control(ctx, id, Control{Op: "resume"})
	return err
}

// Round announces round n of deliberation id.
func (c *Client) Round(ctx context.Context, id string, n int) error {
	_, err := c.Control(ctx, id, Control{Op: "round", Round: n})
	return err
}

// Cancel cancels a deliberation.
func (c *Client) Cancel(ctx context.Context, id, reason string) error {
	_, err := c.Control(ctx, id, Control{Op: "cancel", Reason: reason})
	return err
}

// Control is a control message: open (with its Charter), suspend, resume,
// cancel (with a Reason) or round (with Round).
type Control struct {
	Op      string
	Charter *Charter
	Reason  string
	Round   int
}

// Control publishes a control message to deliberation id (a canonical
// UUID) and returns its acknowledgement: ack.Sequence is its stream
// position, which Outcome and WaitOutcome take to learn whether the engine
// applied it. The open and round messages carry a Nats-Msg-Id, so that a
// retry is stored once.
func (c *Client) Control(ctx context.Context, id string, ctl Control) (*jetstream.PubAck, error) {
	if !wire.ValidDeliberation(id) {
		return nil, fmt.Errorf("client: %q is not a canonical UUID", id)
	}
	v := map[string]any{"op": ctl.Op}
	msgID := ""
	switch ctl.Op {
	case "open":
		if ctl.Charter == nil {
			return nil, errors.New("client: open needs a charter")
		}
		v["charter"], msgID = ctl.Charter, "open"
	case "suspend", "resume":
	case "cancel":
		v["reason"] = ctl.Reason
	case "round":
		v["round"], msgID = ctl.Round, fmt.Sprintf("round-%d", ctl.Round)
	default:
		return nil, fmt.Errorf("client: unknown control op %q", ctl.Op)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	opts := c.expectStream(id)
	// Without a dedupe id, a publish whose answer was lost may have been
	// stored: send it again only when nobody answered at all.
	retryable := func(err error) bool {
		return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
	}
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(c.ids.Control(wire.ControlSubject(id), msgID)))
		retryable = retryablePublish
	}
	ack, err := c.publish(ctx, "control "+id, wire.ControlSubject(id), b, retryable, opts...)
	if err != nil {
		return nil, fmt.Errorf("client: control %s: %w", id, err)
	}
	return ack, nil
}

// publish publishes to the stream with a deadline for each attempt, retrying
// what retryable accepts, and records the position acknowledged.
func (c *Client) publish(ctx context.Context, op, subject string, b []byte, retryable func(error) bool, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return c.publishMsg(ctx, op, &nats.Msg{Subject: subject, Data: b}, retryable, opts...)
}

func (c *Client) publishMsg(ctx context.Context, op string, msg *nats.Msg, retryable func(error) bool, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	var ack *jetstream.PubAck
	err := c.retry(ctx, op, c.opts.PublishTimeout, retryable, func(ctx context.Context) error {
		var err error
		ack, err = c.js.PublishMsg(ctx, msg, opts...)
		if err != nil && unanswered(err) {
			if denied := c.denied(msg.Subject); denied != nil {
				return denied
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if _, ok := c.known(); !ok {
		c.learn(ack.Stream)
	}
	// The acknowledgement's Sequence is the position: the stream's
	// sequence, with its index over several streams.
	ack.Sequence = c.PositionOf(ack)
	c.Saw(ack.Sequence)
	return ack, nil
}

// Publish seals d and publishes it to deliberation id. The returned ack's
// Sequence is the artifact's stream position.
func (c *Client) Publish(ctx context.Context, id string, d events.Draft) (*events.Artifact, *jetstream.PubAck, error) {
	a, err := events.Seal(d)
	if err != nil {
		return nil, nil, err
	}
	ack, err := c.PublishArtifact(ctx, id, a)
	return a, ack, err
}

// PublishArtifact validates and publishes a sealed artifact with a
// Nats-Msg-Id only this client can compute (wire.MsgIDs), so that a
// retried publish is stored once and nobody else can make the stream
// drop it as a duplicate. A resubmission inside the stream's dedupe window is
// acknowledged with Duplicate set; after it, the engine records it as an
// artifact.duplicate rejection and the DAG does not change.
func (c *Client) PublishArtifact(ctx context.Context, id string, a *events.Artifact) (*jetstream.PubAck, error) {
	if _, err := events.Validate(a.Canonical); err != nil {
		return nil, err
	}
	msg, err := c.artifactMsg(id, a)
	if err != nil {
		return nil, err
	}
	ack, err := c.publishMsg(ctx, "publish "+a.ID.String(), msg, retryablePublish,
		append(c.expectStream(id), jetstream.WithMsgID(c.ids.Artifact(msg.Subject, a.ID.String())))...)
	if err != nil {
		return nil, fmt.Errorf("client: publish %s to %s: %w", a.ID, id, err)
	}
	return ack, nil
}

// PublishArtifactAsync publishes a sealed artifact without waiting for its
// acknowledgement, for bulk ingest; the future reports it. It does not
// re-validate a (Seal already did). Use it for independent artifacts: async
// publishes may be stored out of order when retried.
func (c *Client) PublishArtifactAsync(id string, a *events.Artifact) (jetstream.PubAckFuture, error) {
	msg, err := c.artifactMsg(id, a)
	if err != nil {
		return nil, err
	}
	f, err := c.js.PublishMsgAsync(msg, append(c.expectStream(id), jetstream.WithMsgID(c.ids.Artifact(msg.Subject, a.ID.String())),
		jetstream.WithStallWait(30*time.Second))...)
	if err != nil {
		return nil, fmt.Errorf("client: publish %s to %s: %w", a.ID, id, err)
	}
	return f, nil
}

// artifactMsg is the message that publishes a to deliberation id: signed
// when the client holds a signing key (Options.SigningKey).
func (c *Client) artifactMsg(id string, a *events.Artifact) (*nats.Msg, error) {
	msg := &nats.Msg{Subject: wire.ArtifactSubject(id, c.participant), Data: a.Canonical, Header: nats.Header{}}
	if c.signer != nil {
		h, err := c.signer.Sign(id, c.participant, a.ID.String())
		if err != nil {
			return nil, fmt.Errorf("client: sign %s for %s: %w", a.ID, id, err)
		}
		h.Set(msg.Header)
	}
	return msg, nil
}

// PublishAsyncComplete is closed when every async publish is acknowledged.
func (c *Client) PublishAsyncComplete() <-chan struct{} { return c.js.PublishAsyncComplete() }

// State asks the engine (its NATS micro service) for the state of
// deliberation id.
func (c *Client) State(ctx context.Context, id string) (api.View, error) {
	return c.state(ctx, id, 0)
}

func (c *Client) state(ctx context.Context, id string, at uint64) (api.View, error) {
	var v api.View
	b, err := c.request(ctx, "state of "+id, "deliberation", c.fresh(map[string]any{"id": id}, at))
	if err != nil {
		return v, err
	}
	return v, json.Unmarshal(b, &v)
}

// Closure asks the engine to verify a decision of deliberation id (at 0:
// the decision's own position).
func (c *Client) Closure(ctx context.Context, id, decision string, at uint64) (closure.Result, error) {
	var r closure.Result
	b, err := c.requestWithin(ctx, "closure of "+decision, "closure", c.opts.VerifyTimeout,
		c.fresh(map[string]any{"id": id, "decision": decision, "at": at}, 0))
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(b, &r)
}

// Artifact fetches the canonical bytes of an artifact of deliberation id;
// found is false when it is not in the deliberation's DAG (once the
// engine's projection has reached the client's last publish).
func (c *Client) Artifact(ctx context.Context, id, artifactID string) (b []byte, found bool, err error) {
	b, err = c.request(ctx, "artifact "+artifactID, "artifact", c.fresh(map[string]any{"id": id, "artifact_id": artifactID}, 0))
	var se *ServiceError
	switch {
	case err == nil:
		return b, true, nil
	case errors.As(err, &se) && se.Status == "404":
		return nil, false, nil
	default:
		return nil, false, err
	}
}

// WaitPosition waits until the engine's projection of deliberation id has
// reached stream position seq (for example the Sequence of a PubAck), and
// returns the state then. Each attempt has a deadline and the retries
// are bounded (Options): when no engine answers within them, or the
// answering engine's projection has not moved on for as long, the error
// is ErrUnavailable; an engine that is catching up is waited for; ctx may
// end it sooner.
func (c *Client) WaitPosition(ctx context.Context, id string, seq uint64) (api.View, error) {
	var last uint64
	for {
		v, err := c.state(ctx, id, seq)
		var se *ServiceError
		if err != nil && ctx.Err() == nil && errors.As(err, &se) && se.Code == api.CodeBehind && se.Projected > last {
			last = se.Projected // moving on: another round of retries
			continue
		}
		return v, err
	}
}

// fresh adds to a read request of deliberation id the position the
// answer must reflect: the larger of at and the client's last
// acknowledged publish in the stream that holds id.
func (c *Client) fresh(req map[string]any, at uint64) map[string]any {
	if !c.opts.NoReadYourWrites {
		id, _ := req["id"].(string)
		at = max(at, c.seenFor(id))
	}
	if at > 0 {
		req["min_position"] = at
	}
	return req
}

// ServiceError is an error answer of the engine's query service: the
// status (HTTP-like: "400", "404", "409", "503"…), the stable code when the
// engine gave one, and the message.
type ServiceError struct {
	Op      string
	Status  string
	Code    string
	Message string
	// Projected is, in a projection.behind answer (api.CodeBehind), the
	// position the engine's projection had reached.
	Projected uint64
}

func (e *ServiceError) Error() string {
	code := e.Status
	if e.Code != "" {
		code += " " + e.Code
	}
	return "client: " + e.Op + ": " + code + ": " + e.Message
}

// request asks the engine's query service endpoint (parley.api.<endpoint>)
// and returns the answer's body, or a *ServiceError. Reads are
// idempotent: retried as Options say.
func (c *Client) request(ctx context.Context, op, endpoint string, req any) ([]byte, error) {
	msg, err := c.requestMsg(ctx, op, endpoint, req)
	if err != nil {
		return nil, err
	}
	return msg.Data, nil
}

// requestWithin is request with another deadline for each attempt.
func (c *Client) requestWithin(ctx context.Context, op, endpoint string, timeout time.Duration, req any) ([]byte, error) {
	msg, err := c.requestMsgWithin(ctx, op, endpoint, timeout, req)
	if err != nil {
		return nil, err
	}
	return msg.Data, nil
}

// requestMsg is request with the answer's headers.
func (c *Client) requestMsg(ctx context.Context, op, endpoint string, req any) (*nats.Msg, error) {
	return c.requestMsgWithin(ctx, op, endpoint, c.opts.Timeout, req)
}

func (c *Client) requestMsgWithin(ctx context.Context, op, endpoint string, timeout time.Duration, req any) (*nats.Msg, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var msg *nats.Msg
	err = c.retry(ctx, op, timeout, retryableRead, func(ctx context.Context) error {
		var err error
		msg, err = c.requestOnce(ctx, op, endpoint, b)
		return err
	})
	return msg, err
}

func (c *Client) requestOnce(ctx context.Context, op, endpoint string, b []byte) (*nats.Msg, error) {
	msg, err := c.nc.RequestWithContext(ctx, wire.MicroPrefix+"."+endpoint, b)
	if err != nil {
		return nil, fmt.Errorf("client: %s: %w", op, err)
	}
	if status := msg.Header.Get("Nats-Service-Error-Code"); status != "" {
		se := &ServiceError{Op: op, Status: status, Message: msg.Header.Get("Nats-Service-Error")}
		var body struct {
			Code      string `json:"code"`
			Projected uint64 `json:"projected"`
		}
		if json.Unmarshal(msg.Data, &body) == nil {
			se.Code, se.Projected = body.Code, body.Projected
		}
		return nil, se
	}
	return msg, nil
}

// Outcome asks the engine what its projector did with the message of
// deliberation id at stream position seq (the Sequence of the PubAck its
// publisher received): accepted, rejected (with the code and
// message), late, applied, unprojected (not reached yet: ask again) or
// unknown (no longer kept). It works for deliberations never opened too:
// an open whose charter the engine refused is rejected, with its reason.
func (c *Client) Outcome(ctx context.Context, id string, seq uint64) (api.OutcomeReport, error) {
	return c.ArtifactOutcome(ctx, id, seq, "")
}

// ArtifactOutcome is Outcome, checking that the message at seq is the
// artifact artifactID (a *ServiceError with status 409 otherwise).
func (c *Client) ArtifactOutcome(ctx context.Context, id string, seq uint64, artifactID string) (api.OutcomeReport, error) {
	var o api.OutcomeReport
	req := map[string]any{"id": id, "position": seq}
	if artifactID != "" {
		req["artifact_id"] = artifactID
	}
	b, err := c.request(ctx, fmt.Sprintf("outcome of %s at %d", id, seq), "outcome", c.fresh(req, 0))
	if err != nil {
		return o, err
	}
	return o, json.Unmarshal(b, &o)
}

// WaitOutcome asks for the outcome of the message at seq (of artifact
// artifactID, or "" for any message) until the engine's projection has
// reached it, or ctx ends. A request that gets no answer (no engine
// serves the query API yet) is retried too; an error answer is returned
// at once. When ctx ends first, the error wraps ctx.Err() and the last
// outcome (unprojected) or error.
func (c *Client) WaitOutcome(ctx context.Context, id string, seq uint64, artifactID string) (api.OutcomeReport, error) {
	wait := 10 * time.Millisecond
	for {
		o, err := c.ArtifactOutcome(ctx, id, seq, artifactID)
		var se *ServiceError
		switch {
		case err == nil && o.Outcome != api.VerdictUnprojected:
			return o, nil
		case errors.As(err, &se) && se.Code != api.CodeBehind:
			return o, err
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("client: the engine's projection is at %d, not yet at %d", o.Projected, seq)
			}
			return o, fmt.Errorf("client: outcome of %s at %d: %w", id, seq, errors.Join(ctx.Err(), err))
		case <-time.After(wait):
		}
		wait = min(2*wait, 250*time.Millisecond)
	}
}

// Watch calls fn with the state of deliberation id each time the engine
// has projected new messages of it, until ctx ends or fn returns false.
func (c *Client) Watch(ctx context.Context, id string, fn func(api.View) bool) error {
	// An ordered push consumer (participants may not pull:
	// ledger.Reader), stopped no later than Watch's return.
	l, ok := c.known()
	if !ok {
		var err error
		if l, _, err = c.record(ctx); err != nil {
			return err
		}
	}
	rd, err := l.Read(ctx, c.nc, l.Filter(id), 0)
	if err != nil {
		return err
	}
	defer rd.Stop()
	for {
		msg, err := rd.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return err
		}
		if meta.NumPending > 0 {
			continue // report once caught up
		}
		pos, err := rd.Position(msg)
		if err != nil {
			return err
		}
		v, err := c.WaitPosition(ctx, id, pos)
		if err != nil {
			return err
		}
		if !fn(v) {
			return nil
		}
	}
}
