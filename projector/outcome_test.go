package projector_test

import (
	"errors"
	"testing"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/wire"
)

// tape applies messages with consecutive positions and keeps them, as the
// stream does.
type tape struct {
	p    *projector.Projection
	msgs []projector.Msg
}

func (tp *tape) put(subject, data string) uint64 {
	m := projector.Msg{Seq: uint64(len(tp.msgs) + 1), Subject: subject, Data: []byte(data)}
	tp.msgs = append(tp.msgs, m)
	tp.p.Apply(m)
	return m.Seq
}

func (tp *tape) outcome(t *testing.T, id string, seq uint64) projector.MessageOutcome {
	t.Helper()
	o, err := tp.p.OutcomeOf(id, tp.msgs[seq-1], nil)
	if err != nil {
		t.Fatalf("position %d: %v", seq, err)
	}
	return o
}

func TestProjection_OutcomeOf(t *testing.T) {
	const other = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c"
	tp := &tape{p: projector.New(projector.Options{})}
	art := func(who string, a *events.Artifact) uint64 {
		return tp.put(wire.ArtifactSubject(delib, who), string(a.Canonical))
	}
	c := claim("the cache halves p99")
	missing := claim("not yet published")
	refused := tp.put(wire.ControlSubject(other), `{"op":"open","charter":{"title":"x","limits":{"max_artifactz":3}}}`)
	early := art("alice", c)
	open := tp.put(wire.ControlSubject(delib), `{"op":"open","charter":{"title":"t","participants":["alice"]}}`)
	accepted := art("alice", c)
	pending := art("alice", objection(missing.ID, true))
	stranger := art("bob", claim("hello"))
	garbage := tp.put(wire.ArtifactSubject(delib, "alice"), `{"a":1.5}`)
	round := tp.put(wire.ControlSubject(delib), `{"op":"round","round":1}`)
	again := tp.put(wire.ControlSubject(delib), `{"op":"round","round":1}`)
	cancel := tp.put(wire.ControlSubject(delib), `{"op":"cancel","reason":"done"}`)
	late := art("alice", claim("after the end"))

	tests := []struct {
		name    string
		id      string
		seq     uint64
		verdict api.Verdict
		code    string
		ordinal uint64 // among the deliberation's messages, 0 outside them
	}{
		{"refused charter, never opened", other, refused, api.VerdictRejected, projector.CodeControlInvalid, 0},
		{"artifact before the open", delib, early, api.VerdictRejected, projector.CodeNotOpen, 0},
		{"open", delib, open, api.VerdictApplied, "", 1},
		{"claim", delib, accepted, api.VerdictAccepted, "", 2},
		{"objection to an unknown claim", delib, pending, api.VerdictRejected, projector.CodeUnknownTarget, 3},
		{"participant not in the charter", delib, stranger, api.VerdictRejected, projector.CodeNotInCharter, 4},
		{"not an artifact", delib, garbage, api.VerdictRejected, "number.fraction", 5},
		{"round", delib, round, api.VerdictApplied, "", 6},
		{"round that does not increase", delib, again, api.VerdictRejected, projector.CodeControlInvalid, 7},
		{"cancel", delib, cancel, api.VerdictApplied, "", 8},
		{"after the end", delib, late, api.VerdictLate, "", 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tp.outcome(t, tt.id, tt.seq)
			if o.Verdict != tt.verdict || o.Position != tt.seq || o.Deliberation != tt.id {
				t.Fatalf("%+v, want %s", o, tt.verdict)
			}
			if o.Ordinal != tt.ordinal {
				t.Errorf("ordinal %d, want %d", o.Ordinal, tt.ordinal)
			}
			if tt.code != "" && (o.Rejection == nil || o.Rejection.Code != tt.code) {
				t.Fatalf("rejection %+v, want %s", o.Rejection, tt.code)
			}
			if tt.code == "" && o.Rejection != nil {
				t.Fatalf("unexpected rejection %+v", o.Rejection)
			}
		})
	}
	if o := tp.outcome(t, delib, accepted); o.ArtifactID != c.ID || o.ArtifactType != events.TypeClaim || o.Participant != "alice" {
		t.Errorf("accepted %+v", o)
	}
	if o := tp.outcome(t, delib, round); o.Op != "round" {
		t.Errorf("round %+v", o)
	}
	if _, err := tp.p.OutcomeOf(other, tp.msgs[accepted-1], nil); !errors.Is(err, projector.ErrOtherDeliberation) {
		t.Errorf("another deliberation's message: %v", err)
	}
	if _, err := tp.p.OutcomeOf(delib, tp.msgs[accepted-1], &missing.ID); !errors.Is(err, projector.ErrArtifactMismatch) {
		t.Errorf("another artifact: %v", err)
	}
	if o, err := tp.p.OutcomeOf(delib, tp.msgs[accepted-1], &c.ID); err != nil || o.Verdict != api.VerdictAccepted {
		t.Errorf("with its id: %+v %v", o, err)
	}
	ahead := projector.Msg{Seq: late + 1, Subject: wire.ArtifactSubject(delib, "alice"), Data: c.Canonical}
	if o, err := tp.p.OutcomeOf(delib, ahead, nil); err != nil || o.Verdict != api.VerdictUnprojected || o.Note == "" {
		t.Errorf("beyond the projection: %+v %v", o, err)
	}
}

// Once rejections are evicted, what the state itself shows is still found,
// and a message that is found nowhere is unknown, not guessed.
func TestProjection_OutcomeOfEvicted(t *testing.T) {
	tp := &tape{p: projector.New(projector.Options{MaxKept: 2})}
	ctl := func(s string) uint64 { return tp.put(wire.ControlSubject(delib), s) }
	open := ctl(`{"op":"open","charter":{"title":"t"}}`)
	first := tp.put(wire.ArtifactSubject(delib, "alice"), `garbage`)
	round := ctl(`{"op":"round","round":1}`)
	accepted := tp.put(wire.ArtifactSubject(delib, "alice"), string(claim("kept").Canonical))
	tp.put(wire.ArtifactSubject(delib, "alice"), `garbage 2`)
	last := tp.put(wire.ArtifactSubject(delib, "alice"), `garbage 3`)
	suspend := ctl(`{"op":"suspend"}`)

	for _, tt := range []struct {
		seq  uint64
		want api.Verdict
	}{
		{open, api.VerdictApplied},
		{first, api.VerdictUnknown},
		{round, api.VerdictUnknown},
		{accepted, api.VerdictAccepted},
		{last, api.VerdictRejected},
		{suspend, api.VerdictApplied},
	} {
		if o := tp.outcome(t, delib, tt.seq); o.Verdict != tt.want || (tt.want == api.VerdictUnknown && o.Note == "") {
			t.Errorf("position %d: %+v, want %s", tt.seq, o, tt.want)
		}
	}
}
