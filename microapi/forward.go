package microapi

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/parley-engine/parley/readmodel"
)

// forward answers r, a read of deliberation id at endpoint name, with
// the answer of the engine that holds id's stream, when this one does not
// (engine serve --own-streams), and reports whether it did. A request
// that came to this engine's own subjects (own) is never forwarded
// again: the stream moved meanwhile, and the answer is
// partition.unavailable, which the client asks again.
func (a *server) forward(r micro.Request, name, id string, own bool) bool {
	if a.q.Holds(id) {
		return false
	}
	if own {
		respond(r, nil, readmodel.NotHeld(id, "it moved while the read was forwarded"))
		return true
	}
	if a.offLoop.Add(1) > maxOffLoop {
		a.offLoop.Add(-1)
		respond(r, nil, readmodel.NotHeld(id, "too many reads are being forwarded"))
		return true
	}
	d := &detached{nc: a.nc, msg: &nats.Msg{Subject: r.Subject(), Reply: r.Reply(), Header: nats.Header(r.Headers()), Data: r.Data()}}
	go func() {
		defer a.offLoop.Add(-1)
		timeout := a.cfg.ForwardTimeout
		if timeout <= 0 {
			timeout = DefaultForwardTimeout
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		prefix, err := a.cfg.Route(ctx, id)
		if err != nil || prefix == "" {
			respond(d, nil, readmodel.NotHeld(id, fmt.Sprint("no engine holds its stream now: ", err)))
			return
		}
		m := nats.NewMsg(prefix + "." + name)
		m.Data = d.msg.Data
		for k, v := range d.msg.Header {
			m.Header[k] = v
		}
		m.Header.Set(ForwardedHeader, "1")
		resp, err := a.nc.RequestMsgWithContext(ctx, m)
		if err != nil {
			respond(d, nil, readmodel.NotHeld(id, "its owner did not answer: "+err.Error()))
			return
		}
		out := &nats.Msg{Data: resp.Data, Header: nats.Header{}}
		for k, v := range resp.Header {
			out.Header[k] = v
		}
		out.Header.Set(ForwardedHeader, "1")
		_ = d.publish(out)
	}()
	return true
}

// ForwardedHeader marks a read an engine forwarded to the owner of its
// deliberation's stream, and the answer it relayed.
const ForwardedHeader = "Parley-Forwarded"
