package projector_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	supervisor "github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

// The fuzz input is a script of messages over two deliberations: each
// message is an op byte (its low bits the kind of message, its high bit
// the deliberation), a participant byte, a time byte (the seconds since
// the message before, times eight), and what the kind reads next. The
// artifacts are sealed (events.MustSeal), so most messages reach the
// fold's rules rather than stop at validation; raw bytes and forged
// subjects are kinds of their own.
const (
	opOpen = iota
	opControl
	opClaim
	opObjection
	opEvidence
	opRevision
	opDecision
	opTermination
	opDuplicate
	opRaw
	opSupervisor
	opImport
	opUnknownTarget
	opBadSubject
	opLongClaim
	opSupersede
	opKinds
)

var (
	fuzzDelibs   = delibs[:2]
	fuzzParts    = []string{"alice", "bob", "moderator", wire.SupervisorToken, "not a token", "alice"}
	fuzzCharters = []string{
		`{"title":"t","terminators":["moderator"]}`,
		`{"title":"t","terminators":["moderator"],"limits":{"max_artifacts":6}}`,
		`{"title":"t","limits":{"idle_timeout":"5m"}}`,
		`{"title":"t","terminators":["moderator"],"limits":{"stall_window":3}}`,
		`{"title":"t","limits":{"max_artifact_bytes":330,"max_references":2}}`,
		`{"title":"t","limits":{"max_artifacts_per_participant":3},"policy":{"required_participants":["bob"]}}`,
		`{"title":""}`,
		`{"title":"t","limits":{"idle_timeout":"nope"}}`,
	}
	fuzzControls = []string{`{"op":"suspend"}`, `{"op":"resume"}`, `{"op":"round","round":2}`, `{"op":"cancel","reason":"r"}`, `{"op":"open"}`, `not json`}
	fuzzStates   = []events.TerminationState{events.Completed, events.Cancelled, events.Suspended, events.Deadlock, events.Exhausted}
)

// script reads the fuzz input.
type script struct{ b []byte }

func (s *script) more() bool { return len(s.b) > 0 }

// next returns the next byte, 0 past the end.
func (s *script) next() byte {
	if len(s.b) == 0 {
		return 0
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c
}

func (s *script) take(n int) []byte {
	n = min(n, len(s.b))
	out := s.b[:n:n]
	s.b = s.b[n:]
	return out
}

// maxFuzzMsgs bounds a script's messages, so that one input folds in
// microseconds and the fuzzer tries many.
const maxFuzzMsgs = 48

// folded is a script decoded into messages and folded, with what Apply
// answered for each.
type folded struct {
	msgs []projector.Msg
	outs []projector.Outcome
	p    *projector.Projection
}

// decodeScript turns fuzz input into a stream of messages, folding them as
// it goes: a DECISION disposes of the objections open at that point, and
// the supervisor publishes what its rules decide on the state so far, as
// it would live.
func decodeScript(data []byte, opts projector.Options) folded {
	in := &script{b: data}
	f := folded{p: projector.New(opts)}
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	known := map[string][]*events.Artifact{}
	emit := func(subject string, data []byte, im *projector.Import) {
		m := projector.Msg{Seq: uint64(len(f.msgs) + 1), Subject: subject, Data: data, Time: now, Import: im}
		f.msgs = append(f.msgs, m)
		f.outs = append(f.outs, f.p.Apply(m))
	}
	target := func(d string) *events.Artifact {
		k := int(in.next())
		if len(known[d]) == 0 || k == 0xff {
			return claim(fmt.Sprint("unknown ", k)) // never published
		}
		return known[d][k%len(known[d])]
	}
	for in.more() && len(f.msgs) < maxFuzzMsgs {
		h := in.next()
		d, other := fuzzDelibs[h>>7], fuzzDelibs[1-h>>7]
		who := fuzzParts[int(in.next())%len(fuzzParts)]
		now = now.Add(time.Duration(in.next()) * 8 * time.Second)
		var a *events.Artifact
		switch int(h&0x7f) % opKinds {
		case opOpen:
			emit(wire.ControlSubject(d), []byte(`{"op":"open","charter":`+fuzzCharters[int(in.next())%len(fuzzCharters)]+`}`), nil)
			continue
		case opControl:
			emit(wire.ControlSubject(d), []byte(fuzzControls[int(in.next())%len(fuzzControls)]), nil)
			continue
		case opClaim:
			a = claim(fmt.Sprint("claim ", in.next()))
		case opObjection:
			a = objection(target(d).ID, in.next()&1 == 0)
		case opEvidence:
			a = events.MustSeal(events.Draft{Type: events.TypeEvidence, Payload: events.Evidence{Content: fmt.Sprint("ev ", in.next()), ProvenanceClass: events.ExternalEvidence},
				References: []events.Reference{{Target: target(d).ID, Relation: events.Supports}}})
		case opRevision:
			a = events.MustSeal(events.Draft{Type: events.TypeRevision, Payload: events.RevisionPayload{Statement: fmt.Sprint("rev ", in.next())},
				References: []events.Reference{{Target: target(d).ID, Relation: events.Revises}}})
		case opDecision:
			bits := in.next()
			var disp []events.Disposition
			if dd := f.p.Deliberation(d); dd != nil {
				for i, o := range dd.OpenBlockingObjections() {
					if bits>>(i%7)&1 == 1 {
						disp = append(disp, events.Disposition{Objection: o, Disposition: events.Addressed, Rationale: "ok"})
					}
				}
			}
			status := events.Final
			if bits&0x80 != 0 {
				status = events.Provisional
			}
			a = decision(status, target(d).ID, disp...)
		case opTermination:
			s := fuzzStates[int(in.next())%len(fuzzStates)]
			var refs []events.Reference
			var unresolved []canon.Digest
			if dd := f.p.Deliberation(d); dd != nil {
				switch s {
				case events.Deadlock, events.Exhausted:
					unresolved = dd.OpenBlockingObjections()
					for _, o := range unresolved {
						refs = append(refs, events.Reference{Target: o, Relation: events.Considers})
					}
				case events.Completed:
					if decs := dd.Decisions(); len(decs) > 0 {
						refs = append(refs, events.Reference{Target: decs[len(decs)-1], Relation: events.Decides})
					}
				}
			}
			var err error
			if a, err = events.Seal(events.Draft{Type: events.TypeTermination, Payload: events.Termination{State: s, UnresolvedObjections: unresolved}, References: refs}); err != nil {
				continue // no TERMINATION to publish (a completion with no DECISION to reference)
			}
		case opDuplicate:
			// Published again, in its deliberation or in the other.
			from := d
			if in.next()&1 == 1 {
				from = other
			}
			if len(known[from]) == 0 {
				continue
			}
			a = known[from][len(known[from])-1]
		case opRaw:
			emit(wire.ArtifactSubject(d, who), in.take(int(in.next())%64), nil)
			continue
		case opSupervisor:
			if dd := f.p.Deliberation(d); dd != nil {
				for _, e := range supervisor.Decide(dd, now) {
					emit(wire.ArtifactSubject(d, wire.SupervisorToken), e.Artifact.Canonical, nil)
					known[d] = append(known[d], e.Artifact)
				}
			}
			continue
		case opImport:
			// The importer restores a message of d (a claim, or the open),
			// ends the import, names another deliberation's message, or
			// says nothing of what it restores.
			c := claim(fmt.Sprint("imported ", in.next()))
			im := &projector.Import{Subject: wire.ArtifactSubject(d, who), Position: uint64(len(f.msgs)), Time: now.Add(-time.Hour)}
			body := c.Canonical
			switch k := in.next() % 6; k {
			case 0:
				im.Subject, body = wire.ControlSubject(d), []byte(`{"op":"open","charter":`+fuzzCharters[0]+`}`)
			case 1:
				im, body = &projector.Import{End: true}, nil
			case 2:
				im.Subject = wire.ArtifactSubject(other, who)
			case 3:
				im = nil
			}
			emit(wire.ImportSubject(d), body, im)
			if im != nil && !im.End {
				known[d] = append(known[d], c)
			}
			continue
		case opUnknownTarget:
			a = objection(claim(fmt.Sprint("never published ", in.next())).ID, true)
		case opBadSubject:
			subjects := []string{"parley." + d, "parley." + d + ".art", "parley.not-a-uuid.ctl", "parley." + d + ".art.x.y", "other." + d + ".ctl", "parley." + strings.ToUpper(d) + ".ctl"}
			emit(subjects[int(in.next())%len(subjects)], claim("stray").Canonical, nil)
			continue
		case opLongClaim:
			a = claim(fmt.Sprint("long ", strings.Repeat("x", int(in.next())*4)))
		case opSupersede:
			a = events.MustSeal(events.Draft{Type: events.TypeRevision, Payload: events.RevisionPayload{Statement: fmt.Sprint("instead ", in.next())},
				References: []events.Reference{{Target: target(d).ID, Relation: events.Supersedes}}})
		}
		emit(wire.ArtifactSubject(d, who), a.Canonical, nil)
		known[d] = append(known[d], a)
	}
	return f
}

// op encodes one message of a seed script.
func op(kind int, delib int, participant int, seconds int, args ...byte) []byte {
	return append([]byte{byte(kind | delib<<7), byte(participant), byte(seconds / 8)}, args...)
}

// fuzzSeeds are meaningful scripts: a deliberation carried to completion
// and then written to late; two deliberations interleaved, one cancelled
// and recorded by the supervisor; an import ended and then written to;
// limits breached; junk of every kind.
func fuzzSeeds() [][]byte {
	const alice, bob, moderator, super, badToken = 0, 1, 2, 3, 4
	return [][]byte{
		bytes.Join([][]byte{
			op(opOpen, 0, alice, 0, 0),
			op(opClaim, 0, alice, 8, 1),
			op(opObjection, 0, bob, 8, 0, 0),
			op(opEvidence, 0, alice, 8, 7, 0),
			op(opDecision, 0, moderator, 16, 0x7f, 0),
			op(opTermination, 0, moderator, 8, 0),
			op(opSupervisor, 0, alice, 8),
			op(opClaim, 0, bob, 8, 2),
		}, nil),
		bytes.Join([][]byte{
			op(opOpen, 0, alice, 0, 0),
			op(opOpen, 1, bob, 0, 3),
			op(opClaim, 0, alice, 8, 1),
			op(opClaim, 1, bob, 8, 1),
			op(opDuplicate, 1, bob, 8, 1),
			op(opObjection, 1, alice, 8, 0, 0),
			op(opControl, 0, alice, 8, 3),
			op(opSupervisor, 0, alice, 8),
			op(opSupervisor, 0, alice, 8),
			op(opRevision, 1, bob, 8, 0, 4),
			op(opClaim, 0, alice, 8, 9),
			op(opDecision, 1, moderator, 8, 0x80, 0),
			op(opTermination, 1, moderator, 8, 3),
			op(opSupervisor, 1, alice, 2000),
		}, nil),
		bytes.Join([][]byte{
			op(opImport, 1, alice, 0, 0, 0),
			op(opImport, 1, alice, 8, 1, 4),
			op(opClaim, 1, bob, 8, 3),
			op(opImport, 1, bob, 8, 2, 5),
			op(opImport, 1, alice, 8, 3, 1),
			op(opClaim, 1, bob, 8, 3),
			op(opImport, 1, alice, 8, 4, 2),
			op(opImport, 1, alice, 8, 5, 3),
		}, nil),
		bytes.Join([][]byte{
			op(opOpen, 0, alice, 0, 1),
			op(opOpen, 1, alice, 0, 4),
			op(opClaim, 0, alice, 8, 1),
			op(opClaim, 0, bob, 8, 2),
			op(opClaim, 0, alice, 8, 3),
			op(opLongClaim, 1, alice, 8, 100),
			op(opClaim, 0, bob, 8, 4),
			op(opClaim, 0, alice, 8, 5),
			op(opClaim, 0, bob, 8, 6),
			op(opSupervisor, 0, alice, 8),
			op(opClaim, 0, alice, 8, 7),
			op(opControl, 1, alice, 8, 0),
			op(opControl, 1, alice, 8, 1),
			op(opOpen, 0, bob, 8, 5),
		}, nil),
		bytes.Join([][]byte{
			op(opClaim, 0, alice, 0, 1),
			op(opOpen, 0, alice, 0, 6),
			op(opOpen, 0, alice, 0, 7),
			op(opOpen, 0, alice, 0, 2),
			op(opRaw, 0, alice, 8, 6, '{', '"', 'a', '"', ':', '}'),
			op(opRaw, 0, badToken, 8, 0),
			op(opClaim, 0, badToken, 8, 1),
			op(opClaim, 0, super, 8, 1),
			op(opTermination, 0, super, 8, 3),
			op(opUnknownTarget, 0, bob, 8, 1),
			op(opBadSubject, 0, alice, 8, 0),
			op(opBadSubject, 1, alice, 8, 2),
			op(opBadSubject, 0, alice, 8, 5),
			op(opControl, 0, alice, 8, 5),
			op(opSupersede, 0, bob, 8, 1, 0),
			op(opSupervisor, 0, alice, 255*8),
		}, nil),
	}
}

// The seed scripts are not trivial: between them they complete, cancel
// (recorded by the supervisor) and exhaust a deliberation, import one, and
// meet late artifacts and the rejections the fold's rules are made of.
func TestFuzzFold_SeedsExercise(t *testing.T) {
	opts := projector.Options{Rules: supervisor.Rules{}, MaxKept: 4}
	seen := map[string]int{}
	for i, data := range fuzzSeeds() {
		s := decodeScript(data, opts)
		checkFold(t, s, opts, i*7)
		for _, o := range s.outs {
			switch {
			case o.Rejection != nil:
				seen[o.Rejection.Code]++
			case o.Late:
				seen["late"]++
			}
		}
		s.p.Deliberations(func(d *projector.Deliberation) {
			seen["status "+string(d.Status)]++
			if d.Imported() {
				seen["imported"]++
			}
			for _, id := range d.Terminations() {
				n, _ := d.Node(id)
				seen["terminated by "+n.Participant]++
			}
		})
	}
	for _, must := range []string{"status completed", "status cancelled", "status exhausted", "status open", "imported", "late",
		"terminated by moderator", "terminated by " + wire.SupervisorToken,
		projector.CodeDuplicate, projector.CodeImporting, projector.CodeImportInvalid, projector.CodeLimitArtifactSize,
		projector.CodeTerminationUnjustified, projector.CodeSupervisorUnjustified, projector.CodeUnknownTarget, projector.CodeNotOpen,
		projector.CodeAlreadyOpen, projector.CodeTerminal, projector.CodeSubjectInvalid, projector.CodeDeliberationInvalid,
		projector.CodeParticipantInvalid, projector.CodeControlInvalid} {
		if seen[must] == 0 {
			t.Errorf("the seeds never reach %q: %v", must, seen)
		}
	}
}

// FuzzFold: any script of messages over two deliberations folds without
// panic into a state that does not depend on how it was folded (twice
// from scratch, with the artifacts validated ahead as the runner does,
// through a snapshot written and read back at a cut the input chooses,
// each deliberation alone) and whose counts agree with what Apply
// answered for each message.
func FuzzFold(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	opts := projector.Options{Rules: supervisor.Rules{}, MaxKept: 4}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := decodeScript(data, opts)
		checkFold(t, s, opts, len(data))
	})
}

// checkFold checks the fold of a decoded script; cutAt chooses where the
// snapshot is taken.
func checkFold(t *testing.T, s folded, opts projector.Options, cutAt int) {
	t.Helper()
	whole := projector.DumpState(s.p)
	digests := stateDigests(s.p)

	// Determinism: a fresh projection folds the same state.
	again := fold(opts, s.msgs)
	if got := projector.DumpState(again); got != whole {
		t.Fatalf("folded again: %s", firstDifference(got, whole))
	}
	if got := stateDigests(again); got != digests {
		t.Fatalf("state digests %s, then %s", digests, got)
	}

	// Artifacts validated ahead of the fold (the runner's validators) are
	// judged as the fold would judge their bytes.
	ahead := projector.New(opts)
	v := events.NewValidator()
	for _, m := range s.msgs {
		if strings.Contains(m.Subject, ".art.") {
			m.Artifact, m.Invalid = v.ValidateTransient(m.Data)
		}
		ahead.Apply(m)
	}
	if got := projector.DumpState(ahead); got != whole {
		t.Fatalf("validated ahead: %s", firstDifference(got, whole))
	}

	// A snapshot of a prefix, read back and folded on, is the whole fold;
	// and a snapshot of that is the same state again.
	cut := cutAt % (len(s.msgs) + 1)
	prefix := fold(opts, s.msgs[:cut])
	restored := roundTrip(t, prefix, opts)
	if got, want := projector.DumpState(restored), projector.DumpState(prefix); got != want {
		t.Fatalf("the snapshot at %d does not restore its state: %s", cut, firstDifference(got, want))
	}
	for _, m := range s.msgs[cut:] {
		restored.Apply(m)
	}
	if got := projector.DumpState(restored); got != whole {
		t.Fatalf("snapshot at %d of %d, then the rest: %s", cut, len(s.msgs), firstDifference(got, whole))
	}
	if got := projector.DumpState(roundTrip(t, restored, opts)); got != whole {
		t.Fatalf("a snapshot of the restored fold: %s", firstDifference(got, whole))
	}

	// Each deliberation folded alone, without the other's messages nor
	// the ones of no deliberation, has the state digest it has in the
	// interleaved stream.
	for _, id := range fuzzDelibs {
		var own []projector.Msg
		for _, m := range s.msgs {
			if wire.DeliberationOf(m.Subject) == id {
				own = append(own, m)
			}
		}
		alone := fold(opts, own).Deliberation(id)
		together := s.p.Deliberation(id)
		switch {
		case (alone == nil) != (together == nil):
			t.Fatalf("deliberation %s: alone %v, interleaved %v", id, alone != nil, together != nil)
		case alone != nil && alone.StateDigest() != together.StateDigest():
			t.Fatalf("deliberation %s: digest %s alone, %s interleaved", id, alone.StateDigest(), together.StateDigest())
		}
	}

	// The counts agree with the outcomes.
	rejected, accepted, late := 0, map[string]int{}, map[string]int{}
	for i, o := range s.outs {
		if o.Rejection != nil {
			rejected++
			if o.Rejection.Position != s.msgs[i].Seq {
				t.Fatalf("message %d: a rejection at position %d", s.msgs[i].Seq, o.Rejection.Position)
			}
			if len(o.Accepted) > 0 || o.Late || o.Control != "" {
				t.Fatalf("message %d: rejected and %+v", s.msgs[i].Seq, o)
			}
		}
		accepted[o.Deliberation] += len(o.Accepted)
		if o.Late {
			late[o.Deliberation]++
		}
	}
	unrouted, counted := s.p.Unrouted()
	if len(unrouted) != min(counted, opts.MaxKept) {
		t.Fatalf("%d messages of no deliberation, %d kept (at most %d)", counted, len(unrouted), opts.MaxKept)
	}
	s.p.Deliberations(func(d *projector.Deliberation) {
		kept, total, codes := d.Rejections()
		byCode := 0
		for _, n := range codes {
			byCode += n
		}
		if byCode != total || len(kept) != min(total, opts.MaxKept) {
			t.Fatalf("deliberation %s: %d rejections, %d by code, %d kept", d.ID, total, byCode, len(kept))
		}
		foreign, nForeign := d.Foreign()
		if len(foreign) != min(nForeign, opts.MaxKept) {
			t.Fatalf("deliberation %s: %d foreign messages, %d kept", d.ID, nForeign, len(foreign))
		}
		counted += total + nForeign
		if d.Artifacts() != accepted[d.ID] {
			t.Fatalf("deliberation %s: %d artifacts, %d accepted", d.ID, d.Artifacts(), accepted[d.ID])
		}
		if _, n := d.Late(); n != late[d.ID] {
			t.Fatalf("deliberation %s: %d late artifacts, %d answered late", d.ID, n, late[d.ID])
		}
	})
	if counted != rejected {
		t.Fatalf("%d rejections counted, %d messages rejected", counted, rejected)
	}
}

func roundTrip(t *testing.T, p *projector.Projection, opts projector.Options) *projector.Projection {
	t.Helper()
	var buf bytes.Buffer
	if err := p.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	q, err := projector.ReadSnapshot(&buf, opts)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// stateDigests renders every deliberation's state digest, in a fixed
// order.
func stateDigests(p *projector.Projection) string {
	var b strings.Builder
	for _, id := range fuzzDelibs {
		if d := p.Deliberation(id); d != nil {
			fmt.Fprintf(&b, "%s %s\n", id, d.StateDigest())
		}
	}
	return b.String()
}
