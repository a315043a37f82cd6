package client

import (
	"encoding/json"
	"errors"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/wire"
)

// BindingSubscription is a subscription to a deliberation's binding
// announcements (SubscribeBindings).
type BindingSubscription struct {
	*nats.Subscription
	dropped atomic.Uint64
}

// Dropped counts the messages on the subject that were not the engine's
// announcements and were not handed on.
func (s *BindingSubscription) Dropped() uint64 { return s.dropped.Load() }

// SubscribeBindings calls fn with each binding moment the engine announces
// in deliberation. Only the engine may publish on the subject, but a
// participant can have the NATS server deliver stream messages there (a
// push consumer's deliver subject, a pull or API request's reply subject,
// which the server does not check against the participant's permissions),
// and a stream message's bytes are whatever a participant published. So
// fn is never called for a message the server delivered (a reply subject
// under $JS.ACK. or $JS.FC., a Status header), for one with a reply
// subject or headers at all (the engine's announcements have none), nor
// for a body that is not an announcement of this deliberation whose
// envelope parses and has the digest it names; each is counted in Dropped.
func SubscribeBindings(nc *nats.Conn, deliberation string, fn func(binding.Announcement)) (*BindingSubscription, error) {
	if !wire.ValidDeliberation(deliberation) {
		return nil, errors.New("client: not a deliberation id: " + deliberation)
	}
	s := &BindingSubscription{}
	sub, err := nc.Subscribe(wire.BindingSubject(deliberation), func(m *nats.Msg) {
		a, ok := announcement(m, deliberation)
		if !ok {
			s.dropped.Add(1)
			return
		}
		fn(a)
	})
	if err != nil {
		return nil, err
	}
	s.Subscription = sub
	return s, nil
}

func announcement(m *nats.Msg, deliberation string) (binding.Announcement, bool) {
	var a binding.Announcement
	if wire.ServerDelivery(m.Reply, m.Header.Get(wire.StatusHeader)) || m.Reply != "" || len(m.Header) > 0 {
		return a, false
	}
	if json.Unmarshal(m.Data, &a) != nil || a.Deliberation != deliberation || a.Decision == (canon.Digest{}) {
		return a, false
	}
	env, err := binding.ParseEnvelope(a.Envelope)
	if err != nil || env.Digest.String() != a.EnvelopeDigest {
		return a, false
	}
	a.Parsed = env
	return a, true
}
