// Package microapi serves the query API as a NATS micro service named
// "parley" (parley.api.*), from the read model (readmodel): the same reads
// and the same JSON as the HTTP API, the same refusals (an *api.Error's
// Kind gives the error code, its body the stable code), read-your-writes
// off the endpoints' goroutines, and nothing for what is not a request
// (a stream delivery, a reply subject the engine does not answer on).
package microapi

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/readmodel"
	"github.com/parley-engine/parley/wire"
)

const (
	// streamReadTimeout bounds a micro read's read of the stream (an
	// artifact's bytes, a message's outcome): past it the answer is a 503
	// the client retries, not a wait (no stream leader during an
	// election, a replica that went away).
	streamReadTimeout = 2 * time.Second
	// maxOffLoop bounds the micro reads served off their endpoint's
	// goroutine at once.
	maxOffLoop = 1024
)

// Config is what the micro service answers from, beside the read model.
type Config struct {
	// Version is the service's version (semver; "0.1.0" otherwise).
	Version string
	// Health is the health report parley.api.health answers.
	Health func(ctx context.Context) any
	// Halted, when set, says why the engine serves no state: every
	// endpoint but health then answers its error (engine.halted).
	Halted func() error
	// Ignored, when set, counts a message on the query subjects the
	// service did not act on, by reason (IgnoredDelivery,
	// IgnoredReplySubject).
	Ignored func(reason string)
	// EngineKey is the engine's public key (parley.api.engine).
	EngineKey string
	// Stream and Partitioned are the record the engine reads
	// (parley.api.engine).
	Stream      string
	Partitioned bool
	// Streams, over several streams, are their names (api.EngineInfo).
	Streams []string
	// Self, when set, is the prefix of the engine's own query subjects
	// (parley.api.engine.<name>): every endpoint is served there too, to
	// this engine alone, and a request that came there is never
	// forwarded again.
	Self string
	// Route, when set, says where a read of deliberation id goes: ""
	// when this engine holds it, the owner's Self prefix when another
	// engine does; an error when no engine holds it now (answered, as
	// partition.unavailable, for the client to ask again).
	Route func(ctx context.Context, id string) (prefix string, err error)
	// ForwardTimeout bounds a forwarded read (default DefaultForwardTimeout).
	ForwardTimeout time.Duration
	// Unroute, when set, is told that a read of deliberation id could
	// not be forwarded to the owner Route gave (no answer, or 503): the
	// next read asks who owns the stream again.
	Unroute func(id string)
}

// DefaultForwardTimeout bounds a read forwarded to the owner of its
// deliberation's stream.
const DefaultForwardTimeout = 5 * time.Second

// server answers the endpoints.
type server struct {
	nc      *nats.Conn
	q       *readmodel.Queries
	cfg     Config
	offLoop atomic.Int64 // reads served off their endpoint's goroutine
}

// Add registers the query API as a NATS micro service named "parley"
// (discoverable with nats micro ls). Every endpoint takes a JSON request
// and answers with the same JSON as the HTTP API:
//
//	parley.api.deliberations  {"limit":N,"cursor":C,"status":S}   a page of the list
//	parley.api.deliberation   {"id":…}                            one deliberation
//	parley.api.artifacts      {"id":…,"limit":N,"cursor":C}       a page of its artifacts
//	parley.api.rejections     {"id":…,"limit":N,"cursor":C}       a page of its rejections
//	parley.api.unrouted       {"limit":N,"cursor":C}              a page of the unrouted rejections
//	parley.api.artifact       {"id":…,"artifact_id":…}            canonical bytes
//	parley.api.closure        {"id":…,"decision":…,"at":N}        closure verification
//	parley.api.outcome        {"id":…,"position":N,"artifact_id":…} what became of a message
//	parley.api.provenance     {"id":…}                            provenance report
//	parley.api.health         {}                                  health
//
// A page that is not the last carries the next page's cursor in the
// wire.NextCursorHeader header (and in next_cursor where the answer is an
// object), as over HTTP.
//
// Every endpoint but health also takes "min_position":N, the stream
// position the caller has seen: the answer waits until the projection has
// reached it (up to readmodel.Config.MinPositionWait, off the endpoint's goroutine), or is
// the error 503 with code projection.behind (api.CodeBehind): ask again.
func Add(nc *nats.Conn, q *readmodel.Queries, cfg Config) (micro.Service, error) {
	a := &server{q: q, cfg: cfg, nc: nc}
	svc, err := micro.AddService(nc, micro.Config{Name: "parley", Version: semver(cfg.Version),
		Description: "parley query API: deliberation state, artifacts, rejections"})
	if err != nil {
		return nil, err
	}
	groups := []micro.Group{svc.AddGroup(wire.MicroPrefix)}
	if cfg.Self != "" {
		// The engine's own subjects: to it alone, no queue group.
		groups = append(groups, svc.AddGroup(cfg.Self, micro.WithGroupQueueGroupDisabled()))
	}
	var errs []error
	for i, g := range groups {
		errs = append(errs, a.endpoints(g, i > 0)...)
	}
	if err := errors.Join(errs...); err != nil {
		svc.Stop()
		return nil, err
	}
	return svc, nil
}

// req is a request of any endpoint.
type req struct {
	ID         string   `json:"id"`
	ArtifactID string   `json:"artifact_id"`
	Ordinals   []uint64 `json:"ordinals"`
	Decision   string   `json:"decision"`
	At         uint64   `json:"at"`
	Position   uint64   `json:"position"`
	// MinPosition: read-your-writes (readmodel.Queries.AwaitPosition).
	MinPosition uint64 `json:"min_position"`
	// Stream, on deliberations: the page of one stream's deliberations
	// alone, which the engine holds (readmodel DeliberationPageOf): what
	// engines that own streams ask each other for.
	Stream *int `json:"stream"`
	api.PageRequest
}

func parse(r micro.Request) (req, bool) {
	var v req
	if len(r.Data()) > 0 {
		if err := json.Unmarshal(r.Data(), &v); err != nil {
			r.Error("400", "request is not JSON: "+err.Error(), nil)
			return v, false
		}
	}
	return v, true
}

func respond(r micro.Request, v any, err error) {
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) {
			body, _ := json.Marshal(ae) // the stable code, as over HTTP
			r.Error(strconv.Itoa(ae.HTTPStatus()), ae.Message, body)
		} else {
			r.Error("500", err.Error(), nil)
		}
		return
	}
	r.RespondJSON(v)
}

func respondPage(r micro.Request, v any, next string, err error) {
	if err != nil || next == "" {
		respond(r, v, err)
		return
	}
	r.RespondJSON(v, micro.WithHeaders(micro.Headers{wire.NextCursorHeader: {next}}))
}

// endpoints registers every endpoint on g; own: g is the engine's own
// subjects (Config.Self), whose requests are never forwarded.
func (a *server) endpoints(g micro.Group, own bool) []error {
	nc, q := a.nc, a.q
	_ = q
	// add registers a read: parsed, then served once the projection has
	// reached the request's min_position. A micro endpoint calls its
	// handler for one request at a time: a read that must wait, and one
	// that reads the stream (stream, which may wait for a stream leader
	// during an election), is served on its own goroutine so that the
	// endpoint's others are not held up behind it (at most maxOffLoop at
	// once; past that, in turn). Global reads (the listings of all) wait
	// for the whole projection. A halted engine answers none (guard).
	add := func(name string, global, stream bool, h func(micro.Request, req)) error {
		return g.AddEndpoint(name, a.onlyRequests(a.guard(name, micro.HandlerFunc(func(r micro.Request) {
			v, ok := parse(r)
			if !ok {
				return
			}
			id := v.ID
			if global {
				id = ""
			}
			serve := func(r micro.Request) {
				if err := a.q.AwaitPosition(context.Background(), id, v.MinPosition, a.q.MinPositionWait()); err != nil {
					respond(r, nil, err)
					return
				}
				h(r, v)
			}
			if id != "" && a.cfg.Route != nil && a.forward(r, id, own, name, serve) {
				return
			}
			if !stream && a.q.Reached(id, v.MinPosition) {
				h(r, v)
				return
			}
			if a.offLoop.Add(1) > maxOffLoop {
				a.offLoop.Add(-1)
				serve(r)
				return
			}
			// The endpoint's own request is the handler's until it
			// returns (micro reads what it answered for its statistics):
			// the goroutine answers through a request of its own.
			d := &detached{nc: nc, msg: &nats.Msg{Subject: r.Subject(), Reply: r.Reply(), Header: nats.Header(r.Headers()), Data: r.Data()}}
			go func() {
				defer a.offLoop.Add(-1)
				serve(d)
			}()
		}))))
	}
	errs := []error{
		add("deliberations", true, false, func(r micro.Request, v req) {
			if v.Stream != nil {
				out, next, err := a.q.DeliberationPageOf(*v.Stream, v.PageRequest)
				respondPage(r, out, next, err)
				return
			}
			out, next, err := a.q.DeliberationPage(v.PageRequest)
			respondPage(r, out, next, err)
		}),
		add("artifacts", false, false, func(r micro.Request, v req) {
			out, next, err := a.q.ArtifactPage(v.ID, v.PageRequest)
			respondPage(r, out, next, err)
		}),
		add("unrouted", true, false, func(r micro.Request, v req) {
			out, err := a.q.UnroutedPage(v.PageRequest)
			respondPage(r, out, out.NextCursor, err)
		}),
		add("deliberation", false, false, func(r micro.Request, v req) {
			out, err := a.q.Get(v.ID)
			respond(r, out, err)
		}),
		add("rejections", false, false, func(r micro.Request, v req) {
			out, err := a.q.RejectionPage(v.ID, v.PageRequest)
			respondPage(r, out, out.NextCursor, err)
		}),
		add("artifact", false, true, func(r micro.Request, v req) {
			ctx, cancel := context.WithTimeout(context.Background(), streamReadTimeout)
			defer cancel()
			b, err := a.q.Artifact(ctx, v.ID, v.ArtifactID)
			if err != nil {
				respond(r, nil, err)
				return
			}
			r.Respond(b)
		}),
		add("closure", false, false, func(r micro.Request, v req) {
			out, err := a.q.Closure(v.ID, v.Decision, v.At)
			respond(r, out, err)
		}),
		add("outcome", false, true, func(r micro.Request, v req) {
			ctx, cancel := context.WithTimeout(context.Background(), streamReadTimeout)
			defer cancel()
			out, err := a.q.Outcome(ctx, v.ID, v.Position, v.ArtifactID)
			respond(r, out, err)
		}),
		add("provenance", false, false, func(r micro.Request, v req) {
			out, err := a.q.Provenance(v.ID)
			respond(r, out, err)
		}),
		add("receipts", false, true, func(r micro.Request, v req) {
			ctx, cancel := context.WithTimeout(context.Background(), receiptReadTimeout)
			defer cancel()
			out, err := a.q.Receipts(ctx, v.ID, v.Ordinals, nil)
			respond(r, out, err)
		}),
		g.AddEndpoint("engine", a.onlyRequests(func(r micro.Request) {
			respond(r, api.EngineInfo{Key: a.cfg.EngineKey, Stream: a.cfg.Stream, Partitioned: a.cfg.Partitioned, Streams: a.cfg.Streams}, nil)
		})),
		g.AddEndpoint("health", a.onlyRequests(func(r micro.Request) { respond(r, a.cfg.Health(context.Background()), nil) })),
	}
	return errs
}

// receiptReadTimeout bounds a receipts read, which reads a deliberation's
// whole record from the stream.
const receiptReadTimeout = time.Minute

// onlyRequests serves what a client asked, and nothing else that reaches
// the query subjects: a stream message the server delivers there (a
// participant's push consumer whose deliver subject is parley.api.*, a
// pull request whose reply subject is) is no request, and the engine does
// not act on it; a request whose reply subject is a parley or $ subject is
// not answered (the answer would be published with the engine's
// permissions: as an artifact of a reserved token, a binding
// announcement, a JetStream API request). Each is counted in
// parley_ignored_messages_total by reason.
func (a *server) onlyRequests(h micro.HandlerFunc) micro.HandlerFunc {
	return func(r micro.Request) {
		status := ""
		if hdr := r.Headers(); hdr != nil {
			status = nats.Header(hdr).Get(wire.StatusHeader)
		}
		switch {
		case wire.ServerDelivery(r.Reply(), status):
			a.ignored(IgnoredDelivery)
		case !wire.AnswerableReply(r.Reply()):
			a.ignored(IgnoredReplySubject)
		default:
			h(r)
		}
	}
}

// Reasons of parley_ignored_messages_total.
const (
	IgnoredDelivery     = "jetstream_delivery" // a stream message the server delivered onto a query subject
	IgnoredReplySubject = "reply_subject"      // a request whose reply subject the engine does not answer on
)

func (a *server) ignored(reason string) {
	if a.cfg.Ignored != nil {
		a.cfg.Ignored(reason)
	}
}

// guard answers the endpoints as the HTTP API's guard does once the
// engine halted (health still answers).
func (a *server) guard(name string, h micro.HandlerFunc) micro.HandlerFunc {
	if name == "health" || a.cfg.Halted == nil {
		return h
	}
	return func(r micro.Request) {
		if err := a.cfg.Halted(); err != nil {
			var ae *api.Error
			errors.As(err, &ae)
			body, _ := json.Marshal(ae)
			r.Error(strconv.Itoa(ae.HTTPStatus()), ae.Message, body)
			return
		}
		h(r)
	}
}

// semver is v as micro requires it: a semantic version, or 0.1.0.
func semver(v string) string {
	v = strings.TrimPrefix(v, "v")
	if parts := strings.Split(v, "."); len(parts) == 3 {
		return v
	}
	return "0.1.0"
}

// detached answers a micro request from a goroutine of its own, after the
// endpoint's handler has returned: the endpoint's request belongs to
// micro once its handler returns, and micro reads it then. The answers
// are those micro's request gives (its error headers included); the
// endpoint's statistics do not count them.
type detached struct {
	nc  *nats.Conn
	msg *nats.Msg
}

func (d *detached) Respond(data []byte, opts ...micro.RespondOpt) error {
	m := &nats.Msg{Data: data}
	for _, o := range opts {
		o(m)
	}
	return d.publish(m)
}

func (d *detached) publish(m *nats.Msg) error {
	if d.msg.Reply == "" {
		return nats.ErrMsgNoReply
	}
	m.Subject = d.msg.Reply
	return d.nc.PublishMsg(m)
}

func (d *detached) RespondJSON(v any, opts ...micro.RespondOpt) error {
	b, err := json.Marshal(v)
	if err != nil {
		return micro.ErrMarshalResponse
	}
	return d.Respond(b, opts...)
}

func (d *detached) Error(code, description string, data []byte, opts ...micro.RespondOpt) error {
	if code == "" || description == "" {
		return micro.ErrArgRequired
	}
	m := &nats.Msg{Header: nats.Header{micro.ErrorHeader: {description}, micro.ErrorCodeHeader: {code}}, Data: data}
	for _, o := range opts {
		o(m)
	}
	m.Data = data
	return d.publish(m)
}

func (d *detached) Data() []byte           { return d.msg.Data }
func (d *detached) Headers() micro.Headers { return micro.Headers(d.msg.Header) }
func (d *detached) Subject() string        { return d.msg.Subject }
func (d *detached) Reply() string          { return d.msg.Reply }
