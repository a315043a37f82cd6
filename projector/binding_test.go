package projector_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	supervisor "github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

// envelope64 returns seed 002 §6.4's envelope (the first vector of
// binding's own), parsed.
func envelope64(t testing.TB) (json.RawMessage, *binding.Envelope) {
	t.Helper()
	var vs struct {
		Vectors []struct {
			Input json.RawMessage `json:"input"`
		} `json:"vectors"`
	}
	b, err := os.ReadFile("../binding/testdata/envelopes.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatal(err)
	}
	env, err := binding.ParseEnvelope(vs.Vectors[0].Input)
	if err != nil {
		t.Fatal(err)
	}
	return vs.Vectors[0].Input, env
}

// moment is a deliberation with one open binding moment: judge's
// provisional DECISION prov, asking with env, over the claim cl.
type moment struct {
	*clock
	cl, prov *events.Artifact
	env      *binding.Envelope
	raw      json.RawMessage
}

func asking(raw json.RawMessage, decides canon.Digest, outcome string) *events.Artifact {
	return events.MustSeal(events.Draft{Type: events.TypeDecision,
		Payload:    events.Decision{Outcome: outcome, Status: events.Provisional, ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: decides, Relation: events.Decides}},
		Extensions: map[string]any{binding.ExtEnvelope: raw}})
}

// newMoment opens a deliberation with charter (the JSON of its charter
// object) and asks: the claim and the provisional DECISION are admitted.
func newMoment(t *testing.T, charter string) *moment {
	t.Helper()
	raw, env := envelope64(t)
	m := &moment{clock: newClock(t, projector.Options{Rules: supervisor.Rules{}}), raw: raw, env: env}
	if o := m.control(`{"op":"open","charter":` + charter + `}`); o.Rejection != nil {
		t.Fatalf("open: %+v", o.Rejection)
	}
	m.cl = claim("Share the dates only.")
	m.admit("architect", m.cl)
	m.prov = asking(raw, m.cl.ID, "Ask the principal.")
	m.admit("judge", m.prov)
	return m
}

// record returns what binding.Record publishes for a resolution of kind.
func (m *moment) record(kind binding.Kind, option int) *events.Artifact {
	m.t.Helper()
	a, err := binding.Record(m.prov, m.env, &binding.Resolution{EnvelopeDigest: m.env.Digest, Kind: kind, OptionIdx: option, Answer: "Only the dates, for this booking."})
	if err != nil {
		m.t.Fatal(err)
	}
	return a
}

// carrying returns an artifact of d's shape carrying rec as its resolution
// record.
func carrying(d events.Draft, rec any) *events.Artifact {
	if d.Extensions == nil {
		d.Extensions = map[string]any{}
	}
	d.Extensions[binding.ExtResolution] = rec
	return events.MustSeal(d)
}

func (m *moment) status() binding.Moment {
	m.t.Helper()
	ms := m.d().BindingMoments()
	if len(ms) != 1 {
		m.t.Fatalf("%d binding moments: %+v", len(ms), ms)
	}
	return ms[0]
}

// Each attempt to answer a binding moment for its principal, and each
// malformed resolution of the principal's own, is refused with its code;
// nothing changes but the rejection, and the moment stays open. What the
// principal may do, it may.
func TestBindingRule(t *testing.T) {
	_, env := envelope64(t)
	ed := env.Digest.String()
	opt1 := env.Question.Options[1]
	one := 1
	type mk func(m *moment) *events.Artifact
	final := func(m *moment, outcome string, rec any) *events.Artifact {
		d := events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: outcome, Status: events.Final, ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
			References: []events.Reference{{Target: m.prov.ID, Relation: events.Decides}}}
		if rec == nil {
			return events.MustSeal(d)
		}
		return carrying(d, rec)
	}
	considers := func(m *moment, rec any) *events.Artifact {
		return carrying(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Only the dates."},
			References: []events.Reference{{Target: m.prov.ID, Relation: events.Considers}}}, rec)
	}
	optionRec := map[string]any{"envelope_digest": ed, "resolution": "option", "option_idx": 1, "action_digest": opt1.ActionDigest}
	with := func(k string, v any) map[string]any {
		r := map[string]any{}
		for kk, vv := range optionRec {
			r[kk] = vv
		}
		if v == nil {
			delete(r, k)
		} else {
			r[k] = v
		}
		return r
	}
	for _, tc := range []struct {
		name    string
		charter string
		who     string
		a       mk
		code    string
	}{
		// Someone else's resolution, in whatever form.
		{"bob publishes the principal's option resolution", "", "bob", func(m *moment) *events.Artifact { return m.record(binding.KindOption, 1) }, projector.CodeBindingNotPrincipal},
		{"bob publishes the principal's answer", "", "bob", func(m *moment) *events.Artifact { return m.record(binding.KindAnswer, 0) }, projector.CodeBindingNotPrincipal},
		{"bob rejects the question for the principal", "", "bob", func(m *moment) *events.Artifact { return m.record(binding.KindQuestion, 0) }, projector.CodeBindingNotPrincipal},
		{"bob declines for the principal", "", "bob", func(m *moment) *events.Artifact { return m.record(binding.KindDeclined, 0) }, projector.CodeBindingNotPrincipal},
		{"bob's objection elsewhere carries a resolution", "", "bob", func(m *moment) *events.Artifact {
			return carrying(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "no", Blocking: true},
				References: []events.Reference{{Target: m.cl.ID, Relation: events.ObjectsTo}}}, map[string]any{"envelope_digest": ed, "resolution": "question"})
		}, projector.CodeBindingNotPrincipal},
		{"bob's record with a 100 KB kind", "", "bob", func(m *moment) *events.Artifact {
			return considers(m, map[string]any{"envelope_digest": ed, "resolution": strings.Repeat("x", 100<<10)})
		}, projector.CodeBindingNotPrincipal},
		{"the decider decides its own question", "", "judge", func(m *moment) *events.Artifact { return final(m, opt1.Label, nil) }, projector.CodeBindingNotPrincipal},
		{"bob decides it", "", "bob", func(m *moment) *events.Artifact { return final(m, opt1.Label, nil) }, projector.CodeBindingNotPrincipal},
		{"bob decides it provisionally", "", "bob", func(m *moment) *events.Artifact { return asking(m.raw, m.prov.ID, "Decide for them.") }, projector.CodeBindingNotPrincipal},
		{"the default principal, when the charter names ceo", `{"title":"t","principal":"ceo"}`, "principal", func(m *moment) *events.Artifact { return m.record(binding.KindOption, 1) }, projector.CodeBindingNotPrincipal},
		// The principal's own, malformed or not a resolution of the moment.
		{"the principal decides it without resolving it", "", "principal", func(m *moment) *events.Artifact { return final(m, opt1.Label, nil) }, projector.CodeBindingInvalid},
		{"option_idx out of range", "", "principal", func(m *moment) *events.Artifact { return final(m, "x", with("option_idx", 2)) }, projector.CodeBindingInvalid},
		{"another option's action digest", "", "principal", func(m *moment) *events.Artifact {
			return final(m, "x", with("action_digest", env.Question.Options[0].ActionDigest))
		}, projector.CodeBindingInvalid},
		{"an option without its action digest", "", "principal", func(m *moment) *events.Artifact { return final(m, "x", with("action_digest", nil)) }, projector.CodeBindingInvalid},
		{"a member the record does not define", "", "principal", func(m *moment) *events.Artifact { return final(m, "x", with("by", "principal")) }, projector.CodeBindingInvalid},
		{"another envelope", "", "principal", func(m *moment) *events.Artifact {
			return final(m, "x", with("envelope_digest", "sha256:"+strings.Repeat("0", 64)))
		}, projector.CodeBindingInvalid},
		{"an option as a CLAIM", "", "principal", func(m *moment) *events.Artifact { return considers(m, optionRec) }, projector.CodeBindingInvalid},
		{"an answer as a DECISION", "", "principal", func(m *moment) *events.Artifact {
			return final(m, "x", map[string]any{"envelope_digest": ed, "resolution": "answer"})
		}, projector.CodeBindingInvalid},
		{"an option as a provisional DECISION", "", "principal", func(m *moment) *events.Artifact {
			return carrying(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "x", Status: events.Provisional, ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
				References: []events.Reference{{Target: m.prov.ID, Relation: events.Decides}}}, optionRec)
		}, projector.CodeBindingInvalid},
		{"a question as a non-blocking OBJECTION", "", "principal", func(m *moment) *events.Artifact {
			return carrying(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "no", Blocking: false},
				References: []events.Reference{{Target: m.prov.ID, Relation: events.ObjectsTo}}}, map[string]any{"envelope_digest": ed, "resolution": "question"})
		}, projector.CodeBindingInvalid},
		{"a resolution that references the claim, not the moment", "", "principal", func(m *moment) *events.Artifact {
			return carrying(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "declined"},
				References: []events.Reference{{Target: m.cl.ID, Relation: events.Considers}}}, map[string]any{"envelope_digest": ed, "resolution": "declined"})
		}, projector.CodeBindingInvalid},
		{"a resolution that references what is not yet known", "", "principal", func(m *moment) *events.Artifact {
			return carrying(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "declined"},
				References: []events.Reference{{Target: m.prov.ID, Relation: events.Considers}, {Target: claim("later").ID, Relation: events.Supports}}},
				map[string]any{"envelope_digest": ed, "resolution": "declined"})
		}, projector.CodeBindingInvalid},
		{"option_idx given to a decline", "", "principal", func(m *moment) *events.Artifact {
			return considers(m, map[string]any{"envelope_digest": ed, "resolution": "declined", "option_idx": one})
		}, projector.CodeBindingInvalid},
		// What the principal may do, and what leaves the moment open.
		{"the principal chooses", "", "principal", func(m *moment) *events.Artifact { return m.record(binding.KindOption, 1) }, ""},
		{"the principal answers", "", "principal", func(m *moment) *events.Artifact { return m.record(binding.KindAnswer, 0) }, ""},
		{"the principal rejects the question", "", "principal", func(m *moment) *events.Artifact { return m.record(binding.KindQuestion, 0) }, ""},
		{"the principal declines", "", "principal", func(m *moment) *events.Artifact { return m.record(binding.KindDeclined, 0) }, ""},
		{"ceo, whom the charter names, chooses", `{"title":"t","participants":["architect","judge","bob","ceo"],"principal":"ceo"}`, "ceo", func(m *moment) *events.Artifact { return m.record(binding.KindOption, 0) }, ""},
		{"bob objects to the provisional decision", "", "bob", func(m *moment) *events.Artifact { return objection(m.prov.ID, true) }, ""},
		{"bob revises it", "", "bob", func(m *moment) *events.Artifact {
			return events.MustSeal(events.Draft{Type: events.TypeRevision, Payload: events.RevisionPayload{Statement: "Share the dates and the passport."},
				References: []events.Reference{{Target: m.prov.ID, Relation: events.Revises}}})
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			charter := tc.charter
			if charter == "" {
				charter = `{"title":"share?"}`
			}
			m := newMoment(t, charter)
			a := tc.a(m)
			before := m.d().StateDigest()
			o := m.send(tc.who, a)
			ms := m.status()
			if tc.code == "" {
				if o.Rejection != nil || len(o.Accepted) != 1 {
					t.Fatalf("refused: %+v", o.Rejection)
				}
				if _, resolves := a.Extensions[binding.ExtResolution]; resolves != (ms.Status == "resolved") || resolves && (ms.ResolvedBy != tc.who || *ms.ResolvedIn != a.ID) {
					t.Fatalf("moment %+v after %s's %s", ms, tc.who, a.Type)
				}
				return
			}
			if o.Rejection == nil || o.Rejection.Code != tc.code || len(o.Accepted) != 0 {
				t.Fatalf("outcome %+v, want %s", o.Rejection, tc.code)
			}
			if ms.Status != "open" || m.d().Has(a.ID) || m.d().StateDigest() == before {
				t.Fatalf("moment %+v, in the DAG %v (the rejection must change the digest)", ms, m.d().Has(a.ID))
			}
			// The principal can still resolve it, with the very artifact
			// a forger copied.
			r := m.record(binding.KindOption, 1)
			m.admit(m.d().Principal(), r)
			if ms := m.status(); ms.Status != "resolved" || *ms.ResolvedIn != r.ID {
				t.Fatalf("after the principal's resolution: %+v", ms)
			}
		})
	}
}

// The answer published before the question: bob computes the provisional
// DECISION judge will publish and decides it first; the fold admits
// nothing that references what it does not hold (reference.unavailable),
// so his decision never waits for the question. Once it is asked, his copy
// of the principal's option resolution is refused; the principal's is
// admitted, and the supervisor completes on the principal's choice.
func TestBindingRule_AnswerBeforeTheQuestion(t *testing.T) {
	raw, env := envelope64(t)
	c := newClock(t, projector.Options{Rules: supervisor.Rules{}})
	c.control(`{"op":"open","charter":{"title":"share?"}}`)
	cl := claim("Share the dates only.")
	c.admit("architect", cl)
	prov := asking(raw, cl.ID, "Ask the principal.")
	early := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: env.Question.Options[1].Label, Status: events.Final},
		References: []events.Reference{{Target: prov.ID, Relation: events.Decides}}})
	if o := c.send("bob", early); o.Rejection == nil || o.Rejection.Code != projector.CodeUnknownTarget {
		t.Fatalf("bob's early decision: %+v", o)
	}
	c.admit("judge", prov)
	if o := c.send("bob", early); o.Rejection == nil || o.Rejection.Code != projector.CodeBindingNotPrincipal {
		t.Fatalf("bob's decision once asked: %+v", o)
	}
	d := c.d()
	r, err := binding.Record(prov, env, &binding.Resolution{EnvelopeDigest: env.Digest, Kind: binding.KindOption, OptionIdx: 1})
	if err != nil {
		t.Fatal(err)
	}
	if o := c.send("bob", r); o.Rejection == nil || o.Rejection.Code != projector.CodeBindingNotPrincipal {
		t.Fatalf("bob's copy of the resolution: %+v", o)
	}
	c.admit("principal", r)
	es := c.publishDecided()
	if len(es) != 1 || es[0].Artifact.TerminationPayload() == nil || es[0].Artifact.References[0].Target != r.ID || d.Status != api.StatusCompleted {
		t.Fatalf("the supervisor emits %+v; status %s", es, d.Status)
	}
}

// One resolution a moment: a DECISION that carries the same envelope asks
// the same question, resolved by the first resolution, and neither can be
// resolved or decided again.
func TestBindingRule_OnceAnEnvelope(t *testing.T) {
	m := newMoment(t, `{"title":"share?"}`)
	again := asking(m.raw, m.cl.ID, "Ask once more.")
	m.admit("bob", again)
	if ms := m.d().BindingMoments(); len(ms) != 1 || ms[0].Decision != m.prov.ID {
		t.Fatalf("%+v", ms)
	}
	m.admit("principal", m.record(binding.KindQuestion, 0))
	for _, kind := range []binding.Kind{binding.KindOption, binding.KindDeclined} {
		a, err := binding.Record(again, m.env, &binding.Resolution{EnvelopeDigest: m.env.Digest, Kind: kind, OptionIdx: 0})
		if err != nil {
			t.Fatal(err)
		}
		if o := m.send("principal", a); o.Rejection == nil || o.Rejection.Code != projector.CodeBindingResolved {
			t.Fatalf("a second %s resolution: %+v", kind, o)
		}
	}
	if ms := m.status(); ms.Status != "resolved" || ms.Resolution.Resolution != binding.KindQuestion {
		t.Fatalf("%+v", ms)
	}
}

// A provisional DECISION whose envelope is malformed asks the principal
// all the same: nobody decides it, the principal included (it cannot be
// resolved; the decider asks again). Nor is it a binding moment to
// resolve.
func TestBindingRule_MalformedAsk(t *testing.T) {
	c := newClock(t, projector.Options{Rules: supervisor.Rules{}})
	c.control(`{"op":"open","charter":{"title":"share?"}}`)
	cl := claim("Share the dates only.")
	c.admit("architect", cl)
	bad := asking(json.RawMessage(`{"synopsis":"no question"}`), cl.ID, "Ask badly.")
	c.admit("judge", bad)
	if ms := c.d().BindingMoments(); len(ms) != 1 || ms[0].Status != "malformed" || len(ms[0].Findings) == 0 {
		t.Fatalf("%+v", ms)
	}
	for who, code := range map[string]string{"judge": projector.CodeBindingNotPrincipal, "principal": projector.CodeBindingInvalid} {
		o := c.send(who, decision(events.Final, bad.ID))
		if o.Rejection == nil || o.Rejection.Code != code {
			t.Errorf("%s decides the malformed ask: %+v", who, o)
		}
	}
	// A final DECISION carrying an envelope asks nothing: deciding it is
	// anyone's to do.
	final := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "decided", Status: events.Final},
		References: []events.Reference{{Target: cl.ID, Relation: events.Decides}}, Extensions: map[string]any{binding.ExtEnvelope: json.RawMessage(`{}`)}})
	c.admit("judge", final)
	c.admit("bob", decision(events.Final, final.ID))
}

// A charter's principal must be a participant token, and one of the
// participants when it lists them.
func TestBindingRule_CharterPrincipal(t *testing.T) {
	for _, tc := range []struct{ charter, err string }{
		{`{"title":"t","principal":"_supervisor"}`, "charter: principal token"},
		{`{"title":"t","principal":"a b"}`, "charter: principal token"},
		{`{"title":"t","participants":["alice"],"principal":"ceo"}`, "not one of the participants"},
	} {
		f := newFeed(t)
		o := f.ctl(`{"op":"open","charter":` + tc.charter + `}`)
		if o.Rejection == nil || o.Rejection.Code != projector.CodeControlInvalid || !strings.Contains(o.Rejection.Message, tc.err) {
			t.Errorf("%s: %+v", tc.charter, o.Rejection)
		}
	}
	f := newFeed(t)
	f.ctl(`{"op":"open","charter":{"title":"t","participants":["alice","ceo"],"principal":"ceo"}}`)
	if got := f.d().Principal(); got != "ceo" {
		t.Fatal(got)
	}
	g := newFeed(t)
	g.ctl(`{"op":"open","charter":{"title":"t"}}`)
	if got := g.d().Principal(); got != "principal" {
		t.Fatal(got)
	}
}

// The rule keeps no state of its own: a projection restored from a
// snapshot taken anywhere among forged decisions and resolutions judges
// the rest as the projection that never stopped does, with the same
// state_digest.
func TestBindingRule_Snapshot(t *testing.T) {
	raw, env := envelope64(t)
	cl := claim("Share the dates only.")
	prov := asking(raw, cl.ID, "Ask the principal.")
	early := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "forged", Status: events.Final},
		References: []events.Reference{{Target: prov.ID, Relation: events.Decides}}})
	r, _ := binding.Record(prov, env, &binding.Resolution{EnvelopeDigest: env.Digest, Kind: binding.KindAnswer, Answer: "the dates"})
	msgs := []struct {
		who string
		a   *events.Artifact
	}{{"architect", cl}, {"judge", prov}, {"bob", early}, {"bob", r}, {"principal", r}}
	fold := func(p *projector.Projection, from, to int) {
		for i := from; i < to; i++ {
			p.Apply(projector.Msg{Seq: uint64(i + 2), Subject: wire.ArtifactSubject(delib, msgs[i].who), Data: msgs[i].a.Canonical, Time: t0})
		}
	}
	open := projector.Msg{Seq: 1, Subject: wire.ControlSubject(delib), Data: []byte(`{"op":"open","charter":{"title":"share?","principal":"principal"}}`), Time: t0}
	whole := projector.New(projector.Options{Rules: supervisor.Rules{}})
	whole.Apply(open)
	fold(whole, 0, len(msgs))
	for cut := 0; cut <= len(msgs); cut++ {
		p := projector.New(projector.Options{Rules: supervisor.Rules{}})
		p.Apply(open)
		fold(p, 0, cut)
		var buf bytes.Buffer
		if err := p.WriteSnapshot(&buf); err != nil {
			t.Fatal(err)
		}
		q, err := projector.ReadSnapshot(&buf, projector.Options{Rules: supervisor.Rules{}})
		if err != nil {
			t.Fatal(err)
		}
		fold(q, cut, len(msgs))
		d, w := q.Deliberation(delib), whole.Deliberation(delib)
		if d.StateDigest() != w.StateDigest() {
			t.Fatalf("cut at %d: digest %s, unbroken %s", cut, d.StateDigest(), w.StateDigest())
		}
		ms := d.BindingMoments()
		_, n, codes := d.Rejections()
		if len(ms) != 1 || ms[0].Status != "resolved" || ms[0].ResolvedBy != "principal" || n != 2 || codes[projector.CodeBindingNotPrincipal] != 2 {
			t.Fatalf("cut at %d: %+v, rejections %v", cut, ms, codes)
		}
	}
}

// BenchmarkBindingRule_Forged is what a forged decision of a binding
// moment costs the fold to refuse (a lookup of its target, no envelope
// parse), beside a rejection the rule has no part in (an artifact from a
// token the charter does not list). Few rejections are kept (MaxKept 100)
// so that both measure the judgement, not the bounded list of kept
// rejections, which each rejection shifts once it is full.
func BenchmarkBindingRule_Forged(b *testing.B) {
	raw, _ := envelope64(b)
	cl := claim("Share the dates only.")
	prov := asking(raw, cl.ID, "Ask the principal.")
	forged := make([][]byte, 1024)
	for i := range forged {
		forged[i] = events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "forged " + strconv.Itoa(i), Status: events.Final},
			References: []events.Reference{{Target: prov.ID, Relation: events.Decides}}}).Canonical
	}
	for _, bc := range []struct{ name, who string }{{"not_principal", "mallory"}, {"not_in_charter", "outsider"}} {
		b.Run(bc.name, func(b *testing.B) {
			opts := projector.DefaultOptions()
			opts.Rules, opts.MaxKept = supervisor.Rules{}, 100
			p := projector.New(opts)
			seq := uint64(1)
			p.Apply(projector.Msg{Seq: seq, Subject: wire.ControlSubject(delib), Data: []byte(`{"op":"open","charter":{"title":"t","participants":["judge","mallory","principal"]}}`), Time: t0})
			for _, a := range []*events.Artifact{cl, prov} {
				seq++
				p.Apply(projector.Msg{Seq: seq, Subject: wire.ArtifactSubject(delib, "judge"), Data: a.Canonical, Time: t0})
			}
			b.ResetTimer()
			for i := range b.N {
				seq++
				if o := p.Apply(projector.Msg{Seq: seq, Subject: wire.ArtifactSubject(delib, bc.who), Data: forged[i%len(forged)], Time: t0}); o.Rejection == nil || o.Rejection.Code != "binding."+bc.name && o.Rejection.Code != "participant."+bc.name {
					b.Fatalf("%+v", o)
				}
			}
		})
	}
}
