package projector_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	supervisor "github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

// What the engine keeps of rejected messages is bounded in bytes across
// every deliberation, and what it drops for the bound changes no digest:
// random streams folded with a bound of a few kilobytes and with none give
// the same digest for every deliberation, the bounded fold holds at most
// its bound, and a snapshot of a prefix restored and folded on gives the
// same state as the whole fold under the same bound.
func TestKeptBytes_BoundChangesNoDigest(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	dropped := uint64(0)
	for seed := range 30 {
		msgs := stream(r, 400)
		const bound = 3000
		small := projector.Options{Rules: supervisor.Rules{}, MaxKept: 8, MaxKeptBytes: bound}
		none := projector.Options{Rules: supervisor.Rules{}, MaxKept: 8, MaxKeptBytes: -1}
		a, b := fold(small, msgs), fold(none, msgs)
		used, max, d, _ := a.KeptBytes()
		if used > max || max != bound {
			t.Fatalf("seed %d: %d bytes kept, bound %d", seed, used, max)
		}
		dropped += d
		b.Deliberations(func(d *projector.Deliberation) {
			if got, want := a.Deliberation(d.ID).StateDigest(), d.StateDigest(); got != want {
				t.Fatalf("seed %d, deliberation %s: digest %v under the bound, %v without", seed, d.ID, got, want)
			}
		})
		cut := len(msgs) / 2
		var buf bytes.Buffer
		if err := fold(small, msgs[:cut]).WriteSnapshot(&buf); err != nil {
			t.Fatal(err)
		}
		p, err := projector.ReadSnapshot(&buf, small)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs[cut:] {
			p.Apply(m)
		}
		if got, want := projector.DumpState(p), projector.DumpState(a); got != want {
			t.Fatalf("seed %d: a snapshot restored and folded on is not the whole fold under the bound:\n%s", seed, firstDifference(got, want))
		}
	}
	if dropped == 0 {
		t.Fatal("the bound never dropped anything: the test proves nothing")
	}
}

// The digest covers every rejection, not only those kept: two streams that
// differ in one early rejection, long since dropped from the kept lists,
// have different digests; and a deliberation with rejections still has
// its digest as engines before the chains computed it.
func TestKeptBytes_DigestCoversDropped(t *testing.T) {
	digest := func(first string) (string, *projector.Deliberation) {
		p := projector.New(projector.Options{Rules: supervisor.Rules{}, MaxKept: 4, MaxKeptBytes: 1000})
		id := "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4c01"
		p.Apply(projector.Msg{Seq: 1, Subject: wire.ControlSubject(id), Data: []byte(`{"op":"open","charter":{"title":"t","participants":["alice"]}}`)})
		for i := range 50 {
			who := "mallory"
			if i == 0 {
				who = first
			}
			a := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprint("junk ", i)}})
			if o := p.Apply(projector.Msg{Seq: uint64(i + 2), Subject: wire.ArtifactSubject(id, who), Data: a.Canonical}); o.Rejection == nil {
				t.Fatalf("message %d admitted", i)
			}
		}
		d := p.Deliberation(id)
		return d.StateDigest().String(), d
	}
	x, d := digest("mallory")
	y, _ := digest("trudy")
	if x == y {
		t.Fatal("two deliberations that differ in a dropped rejection have the same digest")
	}
	if kept, total, _ := d.Rejections(); len(kept) >= total {
		t.Fatalf("%d of %d kept: nothing was dropped", len(kept), total)
	}
	if _, ok := d.LegacyStateDigest(); ok {
		t.Error("a legacy digest over a list the bound cut")
	}
}

// The ledger's queue stays within a constant factor of what it keeps,
// however many rejections one deliberation's own bound (MaxKept) drops.
func TestKeptBytes_QueueBounded(t *testing.T) {
	p := projector.New(projector.Options{Rules: supervisor.Rules{}, MaxKept: 10})
	id := "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4c02"
	p.Apply(projector.Msg{Seq: 1, Subject: wire.ControlSubject(id), Data: []byte(`{"op":"open","charter":{"title":"t","participants":["alice"]}}`)})
	worst := 0
	for i := range 20000 {
		p.Apply(projector.Msg{Seq: uint64(i + 2), Subject: wire.ArtifactSubject(id, "mallory"), Data: []byte("not json")})
		q, _ := projector.KeptQueue(p)
		worst = max(worst, q)
	}
	if q, live := projector.KeptQueue(p); live != 10 || worst > 2*10+64+10 {
		t.Fatalf("queue %d (worst %d) for %d kept", q, worst, live)
	}
}
