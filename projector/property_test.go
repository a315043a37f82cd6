package projector_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/provenance"
	supervisor "github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

var delibs = []string{"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5d"}

// stream generates a random stream of messages over a few deliberations:
// opens with random charters, every kind of artifact referencing earlier
// ones (and unknown ones, which are refused), duplicates, garbage, control
// messages, claimed times, limit breaches, the supervisor's own emissions
// where its rules call for them, and a hostile participant's blocking
// objections that consider the emissions the supervisor is about to
// publish (they are deterministic), published just before them. The supervisor's emissions
// depend on the state, so the stream is built by folding it.
func stream(r *rand.Rand, n int) []projector.Msg { return streamOf(r, n, nil) }

// streamOf is stream; with verify set, some deliberations open with a
// provenance policy, the EVIDENCE is of every class and mostly carries a
// parley.provenance extension (annotations of every substrate class, some
// of them in fakeObservations, in and out of the window, some malformed),
// and the fold that builds the stream prepares each message with verify
// (Projection.Prepare), as the engine does, so that the supervisor's
// emissions follow the state the engine would have. The messages are
// returned as published: not validated, not re-verified.
func streamOf(r *rand.Rand, n int, verify provenance.Verifier) []projector.Msg {
	p := projector.New(projector.Options{Rules: supervisor.Rules{}, MaxKept: 8})
	var msgs []projector.Msg
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	known := map[string][]*events.Artifact{}
	parts := []string{"alice", "bob", "carol", "moderator"}
	// A message with a claimed time is an importer's (it restores the
	// message on subject, at that time, sometimes the import's last), or
	// a participant's that forges the importer's headers on its own
	// subject, or an importer's without them.
	emit := func(subject string, data []byte, claimed time.Time) {
		m := projector.Msg{Seq: uint64(len(msgs) + 1), Subject: subject, Data: data, Time: now}
		if !claimed.IsZero() {
			im := &projector.Import{Subject: subject, Position: uint64(r.IntN(1000)), Time: claimed}
			switch r.IntN(5) {
			case 0:
				m.Import = im // forged: ignored
			case 1:
				m.Subject = wire.ImportSubject(wire.DeliberationOf(subject)) // no headers: refused
			case 2:
				// The importer ends an import (under way or not).
				m.Subject, m.Import, m.Data = wire.ImportSubject(wire.DeliberationOf(subject)), &projector.Import{End: true}, nil
			default:
				m.Subject, m.Import = wire.ImportSubject(wire.DeliberationOf(subject)), im
			}
		}
		msgs = append(msgs, m)
		p.Prepare(&m, verify)
		p.Apply(m)
	}
	pick := func(d string) *events.Artifact {
		if len(known[d]) == 0 || r.IntN(8) == 0 {
			return claim(fmt.Sprintf("unknown %d", r.IntN(4))) // never published: its referrers are refused
		}
		return known[d][r.IntN(len(known[d]))]
	}
	for len(msgs) < n {
		now = now.Add(time.Duration(r.IntN(120)) * time.Second)
		d := delibs[r.IntN(len(delibs))]
		var claimed time.Time
		if r.IntN(6) == 0 {
			claimed = now.Add(-time.Duration(r.IntN(3600)) * time.Second)
		}
		who := parts[r.IntN(len(parts))]
		var a *events.Artifact
		switch k := r.IntN(20); {
		case k == 0:
			limits := []string{`{}`, `{"max_references":2}`, `{"max_artifacts_per_participant":4}`, `{"idle_timeout":"5m"}`, `{"stall_window":3}`, `{"max_artifacts":12}`, `{"max_artifact_bytes":330}`}
			policy := ""
			if verify != nil && r.IntN(3) != 0 {
				policy = `,"policy":{"provenance":` + provenancePolicies[r.IntN(len(provenancePolicies))] + `}`
			}
			emit(wire.ControlSubject(d), []byte(fmt.Sprintf(`{"op":"open","charter":{"title":"t%d","terminators":["moderator"],"limits":%s%s}}`, r.IntN(3), limits[r.IntN(len(limits))], policy)), claimed)
			continue
		case k == 1:
			ops := []string{`{"op":"suspend"}`, `{"op":"resume"}`, `{"op":"round","round":` + fmt.Sprint(r.IntN(5)) + `}`, `{"op":"cancel","reason":"r"}`, `not json`}
			emit(wire.ControlSubject(d), []byte(ops[r.IntN(len(ops))]), claimed)
			continue
		case k == 2:
			emit(wire.ArtifactSubject(d, who), []byte(`{"garbage":`), claimed)
			continue
		case k == 3 && len(known[d]) > 0:
			a = known[d][r.IntN(len(known[d]))] // a duplicate
		case k == 4:
			if dd := p.Deliberation(d); dd != nil {
				es := supervisor.Decide(dd, now)
				if len(es) > 0 && r.IntN(2) == 0 && len(known[d]) > 0 {
					// mallory objects in advance to what the supervisor is
					// about to publish, then republishes once it is out.
					veto := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: fmt.Sprint("veto ", r.IntN(1000)), Blocking: true},
						References: []events.Reference{{Target: pick(d).ID, Relation: events.ObjectsTo}, {Target: es[len(es)-1].Artifact.ID, Relation: events.Considers}}})
					emit(wire.ArtifactSubject(d, "mallory"), veto.Canonical, time.Time{})
					known[d] = append(known[d], veto)
					if dd := p.Deliberation(d); dd != nil {
						es = supervisor.Decide(dd, now)
					}
				}
				for _, e := range es {
					emit(wire.ArtifactSubject(d, wire.SupervisorToken), e.Artifact.Canonical, time.Time{})
				}
			}
			continue
		case verify != nil && (k == 7 || k == 11 || k == 12):
			// Mostly supporting what the deliberation holds, to be judged.
			target := pick(d)
			if dd := p.Deliberation(d); dd != nil && r.IntN(4) != 0 {
				for _, c := range known[d] {
					if _, ok := dd.Node(c.ID); ok {
						target = c
					}
				}
			}
			a = annotatedEvidence(r, target.ID, now)
		case k < 8:
			a = claim(fmt.Sprintf("claim %d %s", r.IntN(1000), strings.Repeat("x", r.IntN(3)*150)))
		case k < 11:
			a = objection(pick(d).ID, r.IntN(2) == 0)
		case k < 13:
			a = events.MustSeal(events.Draft{Type: events.TypeEvidence, Payload: events.Evidence{Content: fmt.Sprint("ev ", r.IntN(1000)), ProvenanceClass: events.ExternalEvidence},
				References: []events.Reference{{Target: pick(d).ID, Relation: events.Supports}}})
		case k < 15:
			a = events.MustSeal(events.Draft{Type: events.TypeRevision, Payload: events.RevisionPayload{Statement: fmt.Sprint("rev ", r.IntN(1000))},
				References: []events.Reference{{Target: pick(d).ID, Relation: events.Revises}}})
		case k < 18:
			var disp []events.Disposition
			if dd := p.Deliberation(d); dd != nil {
				for _, o := range dd.OpenBlockingObjections() {
					if r.IntN(2) == 0 {
						disp = append(disp, events.Disposition{Objection: o, Disposition: events.Addressed, Rationale: "ok"})
					}
				}
			}
			status := events.Final
			if r.IntN(3) == 0 {
				status = events.Provisional
			}
			a = decision(status, pick(d).ID, disp...)
		default:
			// A terminator's (or anyone's) TERMINATION.
			states := []events.TerminationState{events.Completed, events.Cancelled, events.Suspended, events.Deadlock}
			s := states[r.IntN(len(states))]
			var refs []events.Reference
			var unresolved []canon.Digest
			if dd := p.Deliberation(d); dd != nil && (s == events.Deadlock) {
				unresolved = dd.OpenBlockingObjections()
				for _, o := range unresolved {
					refs = append(refs, events.Reference{Target: o, Relation: events.Considers})
				}
			}
			if s == events.Completed {
				if dd := p.Deliberation(d); dd != nil && len(dd.Decisions()) > 0 {
					refs = append(refs, events.Reference{Target: dd.Decisions()[r.IntN(len(dd.Decisions()))], Relation: events.Decides})
				} else {
					continue
				}
			}
			a = events.MustSeal(events.Draft{Type: events.TypeTermination, Payload: events.Termination{State: s, UnresolvedObjections: unresolved}, References: refs})
		}
		emit(wire.ArtifactSubject(d, who), a.Canonical, claimed)
		known[d] = append(known[d], a)
	}
	return msgs
}

func fold(opts projector.Options, msgs []projector.Msg) *projector.Projection {
	p := projector.New(opts)
	for _, m := range msgs {
		p.Apply(m)
	}
	return p
}

// The fold proven: on random streams, the fold of the whole stream is the
// same state (the whole state, not only the digest) as restoring a
// snapshot of any prefix and folding the rest, or as restoring snapshots
// at several cuts in turn; a snapshot restores exactly the state it was
// taken of; and folding twice gives the same state.
func TestFold_SnapshotOfPrefixThenRest(t *testing.T) {
	streams := 300
	if testing.Short() {
		streams = 40
	}
	opts := projector.Options{Rules: supervisor.Rules{}, MaxKept: 8}
	seen := map[string]int{} // what the streams exercised, to show they are not trivial
	for seed := range uint64(streams) {
		r := rand.New(rand.NewPCG(seed, 7))
		msgs := stream(r, 40+r.IntN(160))
		all := fold(opts, msgs)
		all.Deliberations(func(d *projector.Deliberation) {
			seen["status "+string(d.Status)]++
			if d.Imported() {
				seen["imported"]++
			}
			_, _, codes := d.Rejections()
			for c, n := range codes {
				seen[c] += n
			}
			foreign, _ := d.Foreign()
			for _, f := range foreign {
				seen[f.Code]++
			}
			for _, id := range d.Terminations() {
				n, _ := d.Node(id)
				seen["terminated by "+n.Participant]++
			}
		})
		unrouted, _ := all.Unrouted()
		for _, u := range unrouted {
			seen[u.Code]++
		}
		whole := projector.DumpState(all)
		if again := projector.DumpState(fold(opts, msgs)); again != whole {
			t.Fatalf("seed %d: the fold is not deterministic", seed)
		}
		cut := r.IntN(len(msgs) + 1)
		prefix := fold(opts, msgs[:cut])
		var buf bytes.Buffer
		if err := prefix.WriteSnapshot(&buf); err != nil {
			t.Fatal(err)
		}
		restored, err := projector.ReadSnapshot(&buf, opts)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if got, want := projector.DumpState(restored), projector.DumpState(prefix); got != want {
			t.Fatalf("seed %d: the snapshot at %d does not restore the state:\n%s", seed, cut, firstDifference(got, want))
		}
		for _, m := range msgs[cut:] {
			restored.Apply(m)
		}
		if got := projector.DumpState(restored); got != whole {
			t.Fatalf("seed %d: snapshot at %d of %d, then the rest, differs from the whole fold:\n%s", seed, cut, len(msgs), firstDifference(got, whole))
		}
		// A restart after a restart: a snapshot written and read back at
		// several cuts in turn, each restored fold going on from the
		// last, ends in the whole fold too.
		cuts := []int{r.IntN(len(msgs) + 1), r.IntN(len(msgs) + 1), r.IntN(len(msgs) + 1)}
		slices.Sort(cuts)
		chained, from := projector.New(opts), 0
		for _, c := range append(cuts, len(msgs)) {
			for _, m := range msgs[from:c] {
				chained.Apply(m)
			}
			from = c
			chained = roundTrip(t, chained, opts)
		}
		if got := projector.DumpState(chained); got != whole {
			t.Fatalf("seed %d: snapshots at %v of %d: %s", seed, cuts, len(msgs), firstDifference(got, whole))
		}
	}
	for _, must := range []string{"status open", "status suspended", "status cancelled", "terminated by _supervisor", "terminated by moderator",
		projector.CodeUnknownTarget, projector.CodeTerminationUnauthorized, projector.CodeTerminationUnjustified, projector.CodeDuplicate, projector.CodeLimitArtifactSize,
		projector.CodeImporting, projector.CodeImportInvalid, "imported"} {
		if seen[must] == 0 {
			t.Errorf("the random streams never reached %q: %v", must, seen)
		}
	}
	t.Logf("exercised: %v", seen)
}

// The record answers for itself once judged: on random streams with
// refused, late and hostile messages (objections that consider what the
// supervisor is about to publish), no later message changes a decision's
// verdict at its own position once it is in the DAG, nor the status of a
// deliberation once it has ended, nor lets anything into an ended one.
func TestFold_NoLaterMessageChangesJudgedRecord(t *testing.T) {
	streams := 200
	if testing.Short() {
		streams = 30
	}
	opts := projector.Options{Rules: supervisor.Rules{}, MaxKept: 8}
	judged, ended, hostile := 0, 0, 0
	for seed := range uint64(streams) {
		r := rand.New(rand.NewPCG(seed, 21))
		msgs := stream(r, 40+r.IntN(260))
		p := projector.New(opts)
		verdicts := map[string]map[canon.Digest]string{}
		endedAt := map[string]api.Status{}
		sizes := map[string]int{}
		recorded := map[string]bool{}
		for i, m := range msgs {
			if strings.HasSuffix(m.Subject, ".mallory") {
				hostile++
			}
			p.Apply(m)
			p.Deliberations(func(d *projector.Deliberation) {
				if s, ok := endedAt[d.ID]; ok {
					if d.Status != s {
						t.Fatalf("seed %d, message %d (%s): the ended status %s became %s", seed, i+1, m.Subject, s, d.Status)
					}
					// Only the supervisor's TERMINATION that records a
					// cancel may still enter, once.
					grew := d.Artifacts() - sizes[d.ID]
					if grew != 0 && (grew != 1 || recorded[d.ID] || !d.Recorded(events.TerminationState(s))) {
						t.Fatalf("seed %d, message %d: %d artifacts entered the deliberation after it ended %s", seed, i+1, grew, s)
					}
				}
				if verdicts[d.ID] == nil {
					verdicts[d.ID] = map[canon.Digest]string{}
				}
				for _, dec := range d.Decisions() {
					res := d.Verify(dec, d.PositionOf(dec), closure.Limits{})
					got := fmt.Sprint(res.OK, res.Findings)
					if was, ok := verdicts[d.ID][dec]; ok && was != got {
						t.Fatalf("seed %d, message %d (%s): decision %s was %s at its position, now %s", seed, i+1, m.Subject, dec, was, got)
					} else if !ok {
						verdicts[d.ID][dec] = got
						judged++
					}
				}
				if d.Status.Terminal() {
					if _, ok := endedAt[d.ID]; !ok {
						endedAt[d.ID] = d.Status
						ended++
					}
					sizes[d.ID] = d.Artifacts()
					recorded[d.ID] = d.Recorded(events.TerminationState(d.Status))
				}
			})
		}
	}
	if judged == 0 || ended == 0 || hostile == 0 {
		t.Fatalf("the streams exercised nothing: %d decisions judged, %d ends, %d hostile messages", judged, ended, hostile)
	}
	t.Logf("%d decisions, %d ends, %d hostile messages", judged, ended, hostile)
}

func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d:\n got  %s\n want %s", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(g), len(w))
}

// FuzzApply: any bytes on any subject, folded into a projection that holds
// a few deliberations, never panic; a message at an old position changes
// nothing; and the fold stays deterministic.
func FuzzApply(f *testing.F) {
	base := stream(rand.New(rand.NewPCG(1, 2)), 60)
	for _, m := range base[:12] {
		f.Add(m.Subject, m.Data)
	}
	f.Add(wire.ControlSubject(delibs[0]), []byte(`{"op":"open","charter":{"title":"x","terminators":["a"],"limits":{"max_depth":1}}}`))
	f.Add(wire.ArtifactSubject(delibs[0], wire.SupervisorToken), []byte(`{}`))
	f.Add("parley.x.art.y", []byte("\xff"))
	opts := projector.Options{Rules: supervisor.Rules{}, MaxKept: 8}
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		p := fold(opts, base)
		m := projector.Msg{Seq: uint64(len(base) + 1), Subject: subject, Data: data, Time: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}
		p.Apply(m)
		after := projector.DumpState(p)
		p.Apply(m) // the same position again: ignored
		if projector.DumpState(p) != after {
			t.Fatal("a message at an old position changed the state")
		}
		q := fold(opts, append(base[:len(base):len(base)], m))
		if projector.DumpState(q) != after {
			t.Fatal("the fold is not deterministic")
		}
	})
}

// Deliberations are independent: a runner that holds back the messages of
// some deliberations (a reader holds their lock) and applies others first,
// each deliberation's in stream order, reaches the same state; and each
// deliberation folded without the others' messages is the same.
func TestFold_DeliberationsIndependent(t *testing.T) {
	opts := projector.Options{Rules: supervisor.Rules{}, MaxKept: 8}
	for seed := range uint64(100) {
		r := rand.New(rand.NewPCG(seed, 9))
		msgs := stream(r, 40+r.IntN(160))
		want := projector.DumpState(fold(opts, msgs))
		p := projector.New(opts)
		held := map[string][]projector.Msg{}
		flush := func(d string) {
			for _, m := range held[d] {
				p.Apply(m)
			}
			delete(held, d)
		}
		for _, m := range msgs {
			d := wire.DeliberationOf(m.Subject)
			switch {
			case len(held[d]) > 0 || (p.Deliberation(d) != nil && r.IntN(3) == 0):
				held[d] = append(held[d], m)
			default:
				p.Apply(m)
			}
			if r.IntN(5) == 0 {
				for d := range held {
					if r.IntN(2) == 0 {
						flush(d)
					}
				}
			}
		}
		for d := range held {
			flush(d)
		}
		if got := projector.DumpState(p); got != want {
			t.Fatalf("seed %d:\n%s", seed, firstDifference(got, want))
		}
		// Nor does a deliberation depend on the others' messages at all:
		// folded alone, it has the state digest it has among them.
		whole := fold(opts, msgs)
		for _, id := range delibs {
			var own []projector.Msg
			for _, m := range msgs {
				if wire.DeliberationOf(m.Subject) == id {
					own = append(own, m)
				}
			}
			alone, together := fold(opts, own).Deliberation(id), whole.Deliberation(id)
			if (alone == nil) != (together == nil) || alone != nil && alone.StateDigest() != together.StateDigest() {
				t.Fatalf("seed %d: deliberation %s folded alone is not the one folded among the others", seed, id)
			}
		}
	}
}

// A frozen state is the state at the freeze: the fold may go on (in
// another goroutine, as the runner does) while it is written, and what is
// written restores the state at the freeze. Under -race
// this also shows the writer and the fold share nothing they both write.
func TestFreeze_WriteWhileFolding(t *testing.T) {
	streams := 200
	if testing.Short() {
		streams = 30
	}
	opts := projector.Options{Rules: supervisor.Rules{}, MaxKept: 8}
	for seed := range uint64(streams) {
		r := rand.New(rand.NewPCG(seed, 11))
		msgs := stream(r, 40+r.IntN(160))
		cut := r.IntN(len(msgs) + 1)
		p := fold(opts, msgs[:cut])
		want := projector.DumpState(p)
		f := p.Freeze()
		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, m := range msgs[cut:] {
				p.Apply(m)
			}
		}()
		var got bytes.Buffer
		err := f.Write(&got)
		<-done
		if err != nil {
			t.Fatal(err)
		}
		restored, err := projector.ReadSnapshot(&got, opts)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if s := projector.DumpState(restored); s != want {
			t.Fatalf("seed %d: the frozen state written while %d more messages were folded is not the state at the freeze:\n%s", seed, len(msgs)-cut, firstDifference(s, want))
		}
		if f.Position() != fold(opts, msgs[:cut]).Position() {
			t.Fatalf("seed %d: frozen position %d", seed, f.Position())
		}
	}
}

// The state digest's v2 rendering, written through a buffer with the
// ordinals from one walk, is the digest as first written, at every prefix
// of random streams (the v3 rendering differs from it only in naming the
// rejections and late artifacts by their chains).
func TestStateDigest_AgreesWithReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	states := 0
	for range 40 {
		msgs := stream(r, 300)
		p := projector.New(projector.Options{Rules: supervisor.Rules{}, MaxKept: 8})
		for i, m := range msgs {
			p.Apply(m)
			if i%7 != 0 && i != len(msgs)-1 {
				continue
			}
			p.Deliberations(func(d *projector.Deliberation) {
				if got, want := d.ComputeLegacyDigest(), d.ReferenceDigest(); got != want {
					t.Fatalf("after %d messages, deliberation %s: digest %v, the reference %v", i+1, d.ID, got, want)
				}
				states++
			})
		}
	}
	t.Logf("%d states compared", states)
}
