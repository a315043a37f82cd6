package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/wire"
)

// bigMessages is what the fold keeps for large hostile messages, in three
// kinds taken in turn, as a client without credentials sends them on the
// embedded default: control messages of about 900 KB (an op of that size)
// on deliberations never opened; artifacts of about 900 KB that reference
// artifacts never published, into an open deliberation (once held pending,
// now refused); and opens with a title of about 900 KB. Each is refused
// with a bounded summary; the report's RSS growth against the bytes sent
// is the figure.
type bigMessages struct {
	ID                            string
	Controls, Artifacts, Opens, N int
}

func init() { register(&bigMessages{}) }

func (*bigMessages) name() string { return "big-messages" }

func (b *bigMessages) setup(ctx context.Context, e *engine, _ sizes) error {
	nc, err := e.participant()
	if err != nil {
		return err
	}
	defer nc.Close()
	c, _ := client.New(nc, "orchestrator")
	b.ID, err = c.Open(ctx, client.Charter{Title: "open to large junk"})
	return err
}

// check: the messages were sent, every kind of them.
func (b *bigMessages) check() string {
	if b.Controls == 0 || b.Artifacts == 0 || b.Opens == 0 {
		return fmt.Sprintf("sent %d controls, %d artifacts, %d opens", b.Controls, b.Artifacts, b.Opens)
	}
	return ""
}

func (b *bigMessages) run(ctx context.Context, e *engine, _ sizes, sent *atomic.Int64) (string, error) {
	const size = 900 << 10
	pad := strings.Repeat("x", size)
	b.Controls, b.Artifacts, b.Opens = 0, 0, 0 // an earlier engine variant's
	n, err := flood(ctx, e, 16, sent, func(i int) (string, []byte) {
		switch i % 3 {
		case 0:
			b.Controls++
			return wire.ControlSubject(uuid.NewString()), []byte(`{"op":"` + pad + `"}`)
		case 1:
			b.Artifacts++
			missing := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprint("never published ", i)}})
			a := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: pad, Blocking: true},
				References: []events.Reference{{Target: missing.ID, Relation: events.ObjectsTo}}})
			return wire.ArtifactSubject(b.ID, "mallory"), a.Canonical
		default:
			b.Opens++
			return wire.ControlSubject(uuid.NewString()), []byte(`{"op":"open","charter":{"title":"` + pad + `"}}`)
		}
	})
	b.N = n
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d messages of about 900 KB: %d controls, %d artifacts referencing what was never published, %d opens", b.N, b.Controls, b.Artifacts, b.Opens), nil
}

// junk is what the fold keeps for a flood of small hostile messages into
// an open deliberation: claims from a token the charter does not name, as
// fast as the client can, each refused and kept as a rejection (the most
// recent 10,000 in detail, each message's position for the ordinals).
type junk struct {
	ID string
	N  int
}

func init() { register(&junk{}) }

func (*junk) name() string { return "junk" }

func (j *junk) setup(ctx context.Context, e *engine, _ sizes) error {
	nc, err := e.participant()
	if err != nil {
		return err
	}
	defer nc.Close()
	c, _ := client.New(nc, "orchestrator")
	j.ID, err = c.Open(ctx, client.Charter{Title: "junk", Participants: []string{"alice"}})
	return err
}

func (j *junk) check() string {
	if j.N < 100 {
		return fmt.Sprintf("only %d junk messages sent", j.N)
	}
	return ""
}

func (j *junk) run(ctx context.Context, e *engine, _ sizes, sent *atomic.Int64) (string, error) {
	subject := wire.ArtifactSubject(j.ID, "mallory")
	n, err := flood(ctx, e, 256, sent, func(i int) (string, []byte) {
		return subject, events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprint("junk ", i)}}).Canonical
	})
	j.N = n
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d junk claims of about %d bytes", j.N, sent.Load()/int64(max(j.N, 1))), nil
}

func (*bigMessages) writes() {}

func (*junk) writes() {}
