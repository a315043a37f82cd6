package microapi

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/parley-engine/parley/readmodel"
)

// forward answers r, a read of deliberation id at endpoint name, with
// the answer of the engine that holds id's stream, when this one does not
// (engine serve --own-streams), and reports whether it did. A request
// that came to this engine's own subjects (own) is never forwarded
// again: it is served (serve) once the engine holds the stream, within
// ownWait (a takeover under way), or answered partition.unavailable,
// which the client asks again.
func (a *server) forward(r micro.Request, id string, own bool, name string, serve func(micro.Request)) bool {
	if a.q.Holds(id) {
		return false
	}
	if a.offLoop.Add(1) > maxOffLoop {
		a.offLoop.Add(-1)
		respond(r, nil, readmodel.NotHeld(id, "too many reads are being forwarded"))
		return true
	}
	d := &detached{nc: a.nc, msg: &nats.Msg{Subject: r.Subject(), Reply: r.Reply(), Header: nats.Header(r.Headers()), Data: r.Data()}}
	if own {
		// Forwarded here by an engine that reads this one as the
		// stream's owner: it may be taking the stream over this moment
		// (its lease taken, its runner being restored). Wait a little
		// for it; never forward again.
		go func() {
			defer a.offLoop.Add(-1)
			deadline := time.Now().Add(ownWait)
			for !a.q.Holds(id) {
				if time.Now().After(deadline) {
					respond(d, nil, readmodel.NotHeld(id, "it moved while the read was forwarded"))
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			serve(d) // off the endpoint's goroutine, as a read that waits is
		}()
		return true
	}
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
			if a.cfg.Unroute != nil {
				a.cfg.Unroute(id)
			}
			respond(d, nil, readmodel.NotHeld(id, "its owner did not answer: "+err.Error()))
			return
		}
		if resp.Header.Get(micro.ErrorCodeHeader) == "503" && a.cfg.Unroute != nil {
			a.cfg.Unroute(id) // the owner may be another by now
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

// ownWait is how long an engine that a read was forwarded to waits for
// the deliberation's stream to be its own (a takeover under way).
const ownWait = 2 * time.Second

// ForwardedHeader marks a read an engine forwarded to the owner of its
// deliberation's stream, and the answer it relayed.
const ForwardedHeader = "Parley-Forwarded"
