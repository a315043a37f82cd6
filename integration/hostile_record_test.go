package integration

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/archive"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

// forged publishes data on subject with the import headers set, as a
// participant without credentials can on the embedded default.
func forged(t *testing.T, js jetstream.JetStream, subject string, data []byte, position uint64, at time.Time) uint64 {
	t.Helper()
	m := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	m.Header.Set(wire.OriginalSubjectHeader, subject)
	m.Header.Set(wire.OriginalPositionHeader, strconv.FormatUint(position, 10))
	m.Header.Set(wire.OriginalTimeHeader, at.UTC().Format(time.RFC3339Nano))
	ack, err := js.PublishMsg(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// A participant who sets the import headers on its own live messages
// changes nothing: the live engine and export both ignore them, the
// export's audit equals the live state, and a claimed time on the open
// does not make the deliberation idle from the past.
func TestHostile_ForgedImportHeaders(t *testing.T) {
	ctx := context.Background()
	s, nc := engineWith(t, false)
	js, _ := jetstream.New(nc)
	alice, _ := client.New(nc, "alice")
	past := time.Now().Add(-2 * time.Hour)

	// The open itself claims a time two hours back, with an idle timeout
	// of an hour: believed, it would end the deliberation at once.
	id := "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a10"
	openSeq := forged(t, js, wire.ControlSubject(id), []byte(`{"op":"open","charter":{"title":"forged times","limits":{"idle_timeout":"1h"}}}`), 1, past)
	cl, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "ship it"}})
	if err != nil {
		t.Fatal(err)
	}
	// mallory's claim says it came first, long ago; her objection to it
	// claims an earlier position than the claim's.
	mal := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "I was first"}})
	forged(t, js, wire.ArtifactSubject(id, "mallory"), mal.Canonical, 1, past)
	ob := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "no", Blocking: true},
		References: []events.Reference{{Target: cl.ID, Relation: events.ObjectsTo}}})
	last := forged(t, js, wire.ArtifactSubject(id, "mallory"), ob.Canonical, 2, past)
	if err := s.Runner.WaitForIn(ctx, id, last); err != nil {
		t.Fatal(err)
	}
	var opened time.Time
	var status api.Status
	var due []termination.Emission
	s.Runner.ReadDeliberation(id, func(d *projector.Deliberation) {
		opened, status = d.OpenedTime, d.Status
		due = termination.Decide(d, time.Now())
	})
	msg, err := s.Stream.GetMsg(ctx, openSeq)
	if err != nil {
		t.Fatal(err)
	}
	if !opened.Equal(msg.Time) || status != api.StatusOpen || len(due) != 0 {
		t.Fatalf("opened %v (stream time %v), status %s, the supervisor would emit %d", opened, msg.Time, status, len(due))
	}
	// The export folds as the engine did: same digest, audit OK, the
	// stream's own positions and the subjects as published.
	live, _ := s.Queries.Get(id)
	rec := exportStream(t, js, id)
	rep := auditOf(t, rec)
	if !rep.OK || rep.StateDigest != live.StateDigest.String() || rep.Artifacts != live.Artifacts || rep.Status != string(live.Status) {
		t.Fatalf("audit of the export: %s\nlive %+v", rep.Text(), live)
	}
	r, _ := recording.NewReader(bytes.NewReader(rec))
	for {
		m, err := r.Next()
		if err != nil {
			break
		}
		if m.Position < openSeq || m.Time.Before(msg.Time) {
			t.Errorf("the export believed a forged header: %+v", m)
		}
	}
}

// Nobody but an importer may publish on the importer's subject: a client
// without credentials is refused by the server.
func TestHostile_ImportSubjectIsTheOperators(t *testing.T) {
	_, nc := engineWith(t, true)
	js, _ := jetstream.New(nc)
	id := "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a11"
	m := &nats.Msg{Subject: wire.ImportSubject(id), Data: []byte(`{"op":"open","charter":{"title":"mine"}}`), Header: nats.Header{}}
	m.Header.Set(wire.OriginalSubjectHeader, wire.ControlSubject(id))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, m); err == nil {
		t.Fatal("a participant published on the importer's subject")
	}
}

// A backup restores whatever participants publish meanwhile: junk under
// the deliberation's id before the import, a participant's messages while
// an interrupted import waits to be resumed (they do not count), and, when
// the id was taken by a deliberation opened live, under another id.
func TestHostile_RestoreWhateverWasPublished(t *testing.T) {
	ctx := context.Background()
	s1, nc1 := engineWith(t, false)
	js1, _ := jetstream.New(nc1)
	alice, _ := client.New(nc1, "alice")
	id := recordedDeliberation(t, s1, alice, js1)
	live, _ := s1.Queries.Get(id)
	rec := exportStream(t, js1, id)
	lines := strings.Split(strings.TrimSpace(string(rec)), "\n")
	prefix := strings.Join(lines[:4], "\n") + "\n" // the header and the first 3 messages

	s2, nc2 := engineWith(t, false)
	anon, _ := jetstream.New(nc2)
	op, _ := jetstream.New(operatorConn(t, s2))
	mallory, _ := client.New(nc2, "mallory")
	junk := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "squatting"}})
	if _, err := anon.Publish(ctx, wire.ArtifactSubject(id, "mallory"), junk.Canonical); err != nil {
		t.Fatal(err)
	}
	r, _ := recording.NewReader(strings.NewReader(prefix))
	if res, err := archive.Import(ctx, op, r, "", nil); err != nil || res.Published != 3 || res.Complete {
		t.Fatalf("import of the first messages after junk: %+v %v", res, err)
	}
	// The import waits for the rest: mallory's messages meanwhile do not
	// count, and the supervisor does not judge it.
	during, err := mallory.PublishArtifact(ctx, id, events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "meanwhile"}}))
	if err != nil {
		t.Fatal(err)
	}
	if o, err := mallory.WaitOutcome(ctx, id, during.Sequence, ""); err != nil || o.Code != projector.CodeImporting {
		t.Fatalf("a participant's message during the import: %+v %v", o, err)
	}
	r, _ = recording.NewReader(bytes.NewReader(rec))
	res, err := archive.Import(ctx, op, r, "", nil)
	if err != nil || res.Skipped != 3 || !res.Complete {
		t.Fatalf("resumed import: %+v %v", res, err)
	}
	info, _ := s2.Stream.Info(ctx)
	s2.Runner.WaitFor(ctx, info.State.LastSeq)
	got, _ := s2.Queries.Get(id)
	if got.StateDigest != live.StateDigest || got.Status != live.Status || got.Artifacts != live.Artifacts {
		t.Fatalf("restored %+v\noriginal %+v", got, live)
	}
	// Its export is the backup again, message for message, and audits to
	// the live digest.
	again := exportStream(t, anon, id)
	if rep := auditOf(t, again); !rep.OK || rep.StateDigest != live.StateDigest.String() {
		t.Fatalf("audit of the restored export: %s", rep.Text())
	}
	// (The junk published under its id before the import began is no
	// part of it.)
	if !bytes.Equal(again, rec) {
		t.Errorf("the restored export is not the backup:\n%s\n---\n%s", again, rec)
	}
	// Once the import is complete, everyone's messages count again.
	after, err := mallory.PublishArtifact(ctx, id, events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "afterwards"}}))
	if err != nil {
		t.Fatal(err)
	}
	if o, err := mallory.WaitOutcome(ctx, id, after.Sequence, ""); err != nil || o.Outcome != api.VerdictLate {
		t.Errorf("after the import (the deliberation is completed): %+v %v", o, err)
	}

	// A squatter opens the id live first: the import refuses it, and the
	// backup restores under another id.
	s3, nc3 := engineWith(t, false)
	squatter, _ := client.New(nc3, "mallory")
	if _, err := squatter.Control(ctx, id, client.Control{Op: "open", Charter: &client.Charter{Title: "mine now"}}); err != nil {
		t.Fatal(err)
	}
	op3, _ := jetstream.New(operatorConn(t, s3))
	r, _ = recording.NewReader(bytes.NewReader(rec))
	if _, err := archive.Import(ctx, op3, r, "", nil); !errors.Is(err, archive.ErrTaken) {
		t.Fatalf("import over a live deliberation: %v", err)
	}
	other := "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a98"
	r, _ = recording.NewReader(bytes.NewReader(rec))
	if res, err := archive.Import(ctx, op3, r, other, nil); err != nil || !res.Complete {
		t.Fatalf("import under another id: %+v %v", res, err)
	}
	info, _ = s3.Stream.Info(ctx)
	s3.Runner.WaitFor(ctx, info.State.LastSeq)
	if got, _ := s3.Queries.Get(other); got.StateDigest != live.StateDigest {
		t.Errorf("restored as %s: %+v", other, got)
	}
}

// mallory computes the supervisor's TERMINATION for alice's coming
// decision (its emissions are deterministic) and publishes, in advance, a
// blocking objection that considers it; and nine objections to artifacts
// never published against a max_artifacts of 10. Each is refused at its
// own position: the deliberation completes on the decision, the decision
// verifies, nothing enters after the end, and the export audits OK.
func TestHostile_NothingEntersTheRecordLate(t *testing.T) {
	ctx := context.Background()
	s, nc := engineWith(t, false)
	js, _ := jetstream.New(nc)
	alice, _ := client.New(nc, "alice")
	mallory, _ := client.New(nc, "mallory")
	id, err := alice.Open(ctx, client.Charter{Title: "retroactive", Limits: map[string]any{"max_artifacts": 10}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 9 {
		o := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "held?", Blocking: true},
			References: []events.Reference{{Target: events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: strconv.Itoa(i)}}).ID, Relation: events.ObjectsTo}}})
		ack, err := mallory.PublishArtifact(ctx, id, o)
		if err != nil {
			t.Fatal(err)
		}
		if o, err := mallory.WaitOutcome(ctx, id, ack.Sequence, ""); err != nil || o.Code != projector.CodeUnknownTarget {
			t.Fatalf("an objection to what was never published: %+v %v", o, err)
		}
	}
	c, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "ship it"}})
	if err != nil {
		t.Fatal(err)
	}
	dec := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "ship", Status: events.Final,
		ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: c.ID, Relation: events.Decides}}})
	// mallory's copy of the record, with her objection where it will land
	// and alice's decision after it: the supervisor's coming TERMINATION.
	rec := exportStream(t, js, id)
	shadow := projector.New(projector.Options{Rules: termination.Rules{}})
	r, _ := recording.NewReader(bytes.NewReader(rec))
	var last uint64
	for {
		m, err := r.Next()
		if err != nil {
			break
		}
		shadow.Apply(projector.Msg{Seq: m.Position, Subject: m.Subject, Data: m.Data, Time: m.Time})
		last = m.Position
	}
	shadow.Apply(projector.Msg{Seq: last + 1, Subject: wire.ArtifactSubject(id, "mallory"), Data: []byte("{}"), Time: time.Now()})
	shadow.Apply(projector.Msg{Seq: last + 2, Subject: wire.ArtifactSubject(id, "alice"), Data: dec.Canonical, Time: time.Now()})
	coming := termination.Decide(shadow.Deliberation(id), time.Now())
	if len(coming) != 1 || coming[0].Artifact.Type != events.TypeTermination {
		t.Fatalf("the supervisor would emit %+v", coming)
	}
	veto := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "no", Blocking: true},
		References: []events.Reference{{Target: c.ID, Relation: events.ObjectsTo}, {Target: coming[0].Artifact.ID, Relation: events.Considers}}})
	ack, err := mallory.PublishArtifact(ctx, id, veto)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := mallory.WaitOutcome(ctx, id, ack.Sequence, ""); err != nil || o.Code != projector.CodeUnknownTarget {
		t.Fatalf("the objection to the coming TERMINATION: %+v %v", o, err)
	}
	if _, err := alice.PublishArtifact(ctx, id, dec); err != nil {
		t.Fatal(err)
	}
	v := waitState(t, alice, id, func(v api.View) bool { return v.Status.Terminal() })
	var term canon.Digest
	if len(v.Terminations) == 1 {
		term = v.Terminations[0]
	}
	if v.Status != api.StatusCompleted || term != coming[0].Artifact.ID || v.Artifacts != 3 {
		t.Fatalf("status %s, terminations %v (mallory computed %s), %d artifacts", v.Status, v.Terminations, coming[0].Artifact.ID, v.Artifacts)
	}
	// Published again now that its reference exists, it is late.
	again, _ := client.New(nc, "mallory")
	ack, err = again.PublishArtifact(ctx, id, veto)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := again.WaitOutcome(ctx, id, ack.Sequence, ""); err != nil || o.Outcome != api.VerdictLate {
		t.Fatalf("after the end: %+v %v", o, err)
	}
	after, _ := s.Queries.Get(id)
	if after.Status != api.StatusCompleted || after.Artifacts != 3 || len(after.OpenBlockingObjections) != 0 {
		t.Fatalf("after the late objection: %+v", after)
	}
	var ok bool
	s.Runner.ReadDeliberation(id, func(d *projector.Deliberation) {
		ok = d.Verify(dec.ID, d.PositionOf(dec.ID), closure.Limits{}).OK
	})
	if !ok {
		t.Error("the completing decision no longer verifies")
	}
	if rep := auditOf(t, exportStream(t, js, id)); !rep.OK || rep.StateDigest != after.StateDigest.String() {
		t.Errorf("audit of the export: %s", rep.Text())
	}
}
