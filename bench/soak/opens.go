package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/wire"
)

// opens is a client without credentials opening deliberations as fast as
// it can, each under a new id, with the smallest charter: the engine holds
// at most --max-deliberations of them (10,000 by default) and refuses the
// rest (deliberation.limit). The bound is the engine's, for everyone:
// once the attacker has filled it, honest opens are refused too, which is
// why an engine others can reach gives its clients credentials
// (deploy/nats.conf, where only the orchestrator may open). The check: the
// bound was reached and held (the refusals counted, no more deliberations
// than the bound), and every honest relay that failed was refused for the
// bound, not for anything else.
type opens struct {
	N       int
	Refused int64 // parley_rejections_total{code="deliberation.limit"} after the run
	Held    int64 // deliberations the engine holds after the run
}

func init() { register(&opens{}) }

func (*opens) name() string { return "opens" }

func (*opens) setup(context.Context, *engine, sizes) error { return nil }

// honestRefusal is what an honest relay may fail with in this class.
const honestRefusal = projector.CodeDeliberationLimit

func (o *opens) check() string {
	if o.Refused == 0 {
		return fmt.Sprintf("%d opens sent and none refused with %s: the bound was not reached", o.N, projector.CodeDeliberationLimit)
	}
	return ""
}

func (o *opens) run(ctx context.Context, e *engine, _ sizes, sent *atomic.Int64) (string, error) {
	data := []byte(`{"op":"open","charter":{"title":"x"}}`)
	n, err := flood(ctx, e, 256, sent, func(int) (string, []byte) { return wire.ControlSubject(uuid.NewString()), data })
	o.N = n
	if err != nil {
		return "", err
	}
	// What the engine made of them, once it has folded them.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if e.metric("parley_projector_lag_messages") == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	o.Refused = e.metric(`parley_rejections_total{code="` + projector.CodeDeliberationLimit + `"}`)
	o.Held = e.metric(`parley_deliberations{status="open"}`) + e.metric(`parley_deliberations{status="completed"}`)
	return fmt.Sprintf("%d opens of %d bytes; the engine holds %d deliberations (its bound: 10,000) and refused %d opens with %s", o.N, len(data), o.Held, o.Refused, projector.CodeDeliberationLimit), nil
}

func (*opens) writes() {}
