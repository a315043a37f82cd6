package termination_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

// Every breach is answered, whatever the window: with the detailed
// rejections bounded to 5, 20 limit breaches (within projector.MaxBreaches) (interleaved with other
// rejections that push them out of the window) each get their FAILURE, and
// nothing is answered twice.
func TestDecide_EveryBreachAnswered(t *testing.T) {
	p := projector.New(projector.Options{MaxKept: 5, Rules: termination.Rules{}})
	seq := uint64(0)
	now := base
	apply := func(subject string, data []byte) projector.Outcome {
		seq++
		now = now.Add(time.Second)
		return p.Apply(projector.Msg{Seq: seq, Subject: subject, Data: data, Time: now})
	}
	apply(wire.ControlSubject(delib), []byte(`{"op":"open","charter":{"title":"t","participants":["alice"],"limits":{"max_artifact_bytes":300}}}`))
	const n = 20
	for i := range n {
		big := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprintf("%d %s", i, strings.Repeat("x", 400))}})
		if o := apply(wire.ArtifactSubject(delib, "alice"), big.Canonical); o.Rejection == nil || o.Rejection.Code != projector.CodeLimitArtifactSize {
			t.Fatalf("%+v", o)
		}
		apply(wire.ArtifactSubject(delib, "mallory"), []byte("junk")) // not in the window's interest
	}
	d := p.Deliberation(delib)
	if kept, total, _ := d.Rejections(); len(kept) != 5 || total != 2*n {
		t.Fatalf("kept %d of %d", len(kept), total)
	}
	answered := map[string]bool{}
	for round := 0; ; round++ {
		es := termination.Decide(d, now)
		if len(es) == 0 {
			break
		}
		if round > 2 {
			t.Fatalf("still deciding %d emissions", len(es))
		}
		for _, e := range es {
			f, ok := e.Artifact.Payload.(*events.Failure)
			if !ok || f.Code != projector.CodeLimitArtifactSize {
				t.Fatalf("%s %+v", e.Artifact.Type, e.Artifact.Payload)
			}
			msg := string(e.Artifact.Extensions[projector.MessageExtension])
			if answered[msg] {
				t.Fatalf("message %s answered twice", msg)
			}
			answered[msg] = true
			if o := apply(wire.ArtifactSubject(delib, wire.SupervisorToken), e.Artifact.Canonical); o.Rejection != nil {
				t.Fatalf("the supervisor's FAILURE: %+v", o.Rejection)
			}
		}
	}
	if len(answered) != n || len(d.Breaches()) != 0 {
		t.Fatalf("%d of %d breaches answered, %d left", len(answered), n, len(d.Breaches()))
	}
}
