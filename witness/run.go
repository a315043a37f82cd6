package witness

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/wire"
)

// SubjectPrefix opens a witness's request subjects:
// parley.witness.<name>.checkpoint.
const SubjectPrefix = "parley.witness."

// Subject is the subject a witness named name answers checkpoint
// requests on.
func Subject(name string) string { return SubjectPrefix + name + ".checkpoint" }

// Request asks a witness for the latest checkpoint it cosigned of a
// deliberation.
type Request struct {
	ID string `json:"id"`
}

// Serve answers, on nc, requests on Subject(name): {"id":D} gets the
// latest cosigned note of D, its raw bytes. A request that is not that
// JSON with a deliberation id gets an empty reply with the NATS micro
// error headers (Nats-Service-Error-Code "400" and Nats-Service-Error),
// a deliberation with no cosigned checkpoint "404". It is a plain
// subscription, not a micro service: a witness's NATS user needs to
// subscribe to its subject and to answer requests (allow_responses), and
// nothing of micro discovery ($SRV.>). Unsubscribe to stop.
func (w *Witness) Serve(nc *nats.Conn) (*nats.Subscription, error) {
	return nc.Subscribe(Subject(w.cfg.Name), func(m *nats.Msg) {
		if m.Reply == "" {
			return
		}
		fail := func(code, desc string) {
			r := nats.NewMsg(m.Reply)
			r.Header.Set(micro.ErrorCodeHeader, code)
			r.Header.Set(micro.ErrorHeader, desc)
			m.RespondMsg(r)
		}
		var req Request
		if err := json.Unmarshal(m.Data, &req); err != nil || !wire.ValidDeliberation(req.ID) {
			fail("400", `the request is {"id":"<deliberation id>"}`)
			return
		}
		b := w.Latest(req.ID)
		if b == nil {
			fail("404", "the witness has cosigned no checkpoint of "+req.ID)
			return
		}
		m.Respond(b)
	})
}

// Follow reads the stream on nc from its first message, in order, with an
// ordered push consumer (ledger.Read: what a participant may do), and
// applies each message, until ctx ends (nil) or the stream cannot be
// read.
func (w *Witness) Follow(ctx context.Context, nc *nats.Conn) error {
	// The record's stream, whichever layout the server holds; the
	// Reader gives the subjects back as published.
	l, err := ledger.LocateConn(ctx, nc)
	if err != nil {
		return err
	}
	rd, err := l.Read(ctx, nc, "", 0)
	if err != nil {
		return err
	}
	defer rd.Stop()
	for {
		m, err := rd.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		msg, err := MsgOf(m)
		if err != nil {
			return err
		}
		w.Apply(msg)
	}
}

// MsgOf is a message of the stream as the fold takes it: its position,
// subject, bytes, time, signature headers and, on the importer's
// subject, what it restores (as archive reads a deliberation).
func MsgOf(m *nats.Msg) (projector.Msg, error) {
	meta, err := m.Metadata()
	if err != nil {
		return projector.Msg{}, errors.New("witness: a message without its stream metadata: " + err.Error())
	}
	msg := projector.Msg{Seq: ledger.MsgPosition(meta), Subject: m.Subject, Data: m.Data, Time: meta.Timestamp}
	if h := m.Header; h != nil {
		msg.Signature = projector.SignatureOf(m.Subject, h)
		msg.Import = projector.ImportOf(m.Subject, h.Get)
	}
	return msg, nil
}
