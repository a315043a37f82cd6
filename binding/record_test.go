package binding_test

import (
	"encoding/json"
	"testing"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

const delib = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"

// Each of the four outcomes leaves the record seed 002's mapping says,
// folded by the projector as the engine would.
func TestRecord_FourOutcomes(t *testing.T) {
	var envs struct{ Vectors []envVector }
	load(t, "testdata/envelopes.json", &envs)
	envRaw := envs.Vectors[0].raw()
	env, err := binding.ParseEnvelope(envRaw)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []binding.Kind{binding.KindOption, binding.KindAnswer, binding.KindQuestion, binding.KindDeclined} {
		t.Run(string(kind), func(t *testing.T) {
			p := projector.New(projector.Options{Rules: termination.Rules{}})
			seq := uint64(0)
			apply := func(subject string, data []byte) projector.Outcome {
				seq++
				return p.Apply(projector.Msg{Seq: seq, Subject: subject, Data: data})
			}
			art := func(who string, a *events.Artifact) {
				t.Helper()
				if o := apply(wire.ArtifactSubject(delib, who), a.Canonical); o.Rejection != nil || len(o.Accepted) != 1 {
					t.Fatalf("%s's %s: %+v", who, a.Type, o.Rejection)
				}
			}
			apply(wire.ControlSubject(delib), []byte(`{"op":"open","charter":{"title":"share?"}}`))
			claim := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Share the dates only."}})
			obj := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "The airline needs the passport.", Blocking: true},
				References: []events.Reference{{Target: claim.ID, Relation: events.ObjectsTo}}})
			prov := events.MustSeal(events.Draft{Type: events.TypeDecision,
				Payload: events.Decision{Outcome: "Ask the principal.", Status: events.Provisional,
					ObjectionDispositions: []events.Disposition{{Objection: obj.ID, Disposition: events.Addressed, Rationale: "check-in only"}}, UnresolvedIssues: []events.Issue{}},
				References: []events.Reference{{Target: claim.ID, Relation: events.Decides}, {Target: obj.ID, Relation: events.Considers}},
				Extensions: map[string]any{binding.ExtEnvelope: json.RawMessage(envRaw)}})
			art("architect", claim)
			art("critic", obj)
			art("judge", prov)
			got, err := binding.EnvelopeOf(prov)
			if err != nil || got.Digest != env.Digest {
				t.Fatal(err)
			}
			r := &binding.Resolution{EnvelopeDigest: env.Digest, Kind: kind, OptionIdx: 1, Answer: "Dates now; the passport at check-in, to the airline only."}
			if kind != binding.KindOption {
				r.OptionIdx = 0
			}
			rec, err := binding.Record(prov, env, r)
			if err != nil {
				t.Fatal(err)
			}
			art("principal", rec)
			rr, ok := binding.ResolutionOf(rec)
			if !ok || rr.EnvelopeDigest != env.Digest.String() || rr.Resolution != kind {
				t.Fatalf("%+v", rr)
			}
			d := p.Deliberation(delib)
			v := d.View()
			switch kind {
			case binding.KindOption:
				dec := rec.Payload.(*events.Decision)
				if rec.Type != events.TypeDecision || dec.Status != events.Final || dec.Outcome != env.Question.Options[1].Label ||
					*rr.OptionIdx != 1 || rr.ActionDigest != env.Question.Options[1].ActionDigest {
					t.Fatalf("%s %+v %+v", rec.Type, dec, rr)
				}
				if res := d.Verify(rec.ID, 0, d.ClosureLimits()); !res.OK {
					t.Fatalf("the principal's decision does not verify: %+v", res.Findings)
				}
				if es := termination.Decide(d, d.LastActivity); len(es) != 1 || es[0].Artifact.Type != events.TypeTermination {
					t.Fatalf("the supervisor emits %+v", es)
				}
			case binding.KindAnswer:
				if rec.Type != events.TypeClaim || rec.Payload.(*events.Claim).Statement != r.Answer {
					t.Fatal(rec.Type)
				}
			case binding.KindQuestion:
				if rec.Type != events.TypeObjection || !rec.Blocking() || !contains(v.OpenBlockingObjections, rec.ID) {
					t.Fatalf("%s open %v", rec.Type, v.OpenBlockingObjections)
				}
			case binding.KindDeclined:
				if rec.Type != events.TypeClaim || v.Status != api.StatusOpen {
					t.Fatalf("%s %s", rec.Type, v.Status)
				}
				// The decline ends the deliberation through its cancel,
				// which the supervisor records.
				if o := apply(wire.ControlSubject(delib), binding.DeclineControl(env)); o.Control != "cancel" {
					t.Fatalf("the decline's control: %+v", o.Rejection)
				}
				es := termination.Decide(d, d.LastActivity)
				if len(es) != 1 || es[0].Artifact.TerminationPayload() == nil || es[0].Artifact.TerminationPayload().State != events.Cancelled {
					t.Fatalf("the supervisor emits %+v", es)
				}
				art(wire.SupervisorToken, es[0].Artifact)
				if d.View().Status != api.StatusCancelled {
					t.Fatal(d.View().Status)
				}
			}
		})
	}
}

func contains(ids []canon.Digest, id canon.Digest) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
