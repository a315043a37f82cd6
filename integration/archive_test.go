package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/archive"
	"github.com/parley-engine/parley/audit"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/partition"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// a completed deliberation with a rejection, a supervisor FAILURE and
// TERMINATION in it; returns its id.
func recordedDeliberation(t *testing.T, s *service.Service, c *client.Client, js jetstream.JetStream) string {
	t.Helper()
	ctx := context.Background()
	id, _ := c.Open(ctx, client.Charter{Title: "recorded", Limits: map[string]any{"max_artifact_bytes": 2000}})
	cl, _, _ := c.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "ship it"}})
	o, _, _ := c.Publish(ctx, id, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "untested", Blocking: true},
		References: []events.Reference{{Target: cl.ID, Relation: events.ObjectsTo}}})
	js.Publish(ctx, wire.ArtifactSubject(id, "alice"), []byte("garbage"))
	c.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: strings.Repeat("long ", 500)}}) // breaks max_artifact_bytes
	c.Publish(ctx, id, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "ship", Status: events.Final,
		ObjectionDispositions: []events.Disposition{{Objection: o.ID, Disposition: events.Addressed, Rationale: "tested"}}},
		References: []events.Reference{{Target: cl.ID, Relation: events.Decides}}})
	waitState(t, c, id, func(v api.View) bool {
		return v.Status == api.StatusCompleted && v.Counts[events.TypeFailure] == 1
	})
	supervisorDone(t, s, id)
	return id
}

// supervisorDone waits until engine s has applied its whole stream and
// its supervisor, asked now, has nothing (more) to publish for
// deliberation id: an emission still on its way would be asked for again.
func supervisorDone(t *testing.T, s *service.Service, id string) {
	t.Helper()
	eventually(t, "the supervisor has nothing more to publish for "+id, func() bool {
		info, err := s.Stream.Info(context.Background())
		if err != nil || s.Runner.Position() < info.State.LastSeq {
			return false
		}
		for _, j := range s.Supervisor.Judge(time.Now()) {
			if j.Deliberation == id {
				return false
			}
		}
		return true
	})
}

func exportStream(t *testing.T, js jetstream.JetStream, id string) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := archive.Export(context.Background(), js, id, recording.Stream, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func auditOf(t *testing.T, rec []byte) *audit.Report {
	t.Helper()
	r, err := recording.NewReader(bytes.NewReader(rec))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Run(r)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// live -> export -> audit -> import -> export: byte-identical; the audit's
// digest is the live one; import under another id reads the same state
// and digest back. From and into either layout of the record: a
// recording holds the subjects as published, whichever layout stored
// them.
func TestArchive_RoundTrip(t *testing.T) {
	for _, c := range []struct{ from, into bool }{{false, false}, {true, true}, {false, true}, {true, false}} {
		t.Run(fmt.Sprintf("partitioned %v into %v", c.from, c.into), func(t *testing.T) { archiveRoundTrip(t, c.from, c.into) })
	}
}

func archiveRoundTrip(t *testing.T, from, into bool) {
	ctx := context.Background()
	s1, nc1 := engineOn(t, false, from)
	js1, _ := jetstream.New(nc1)
	alice, _ := client.New(nc1, "alice")
	id := recordedDeliberation(t, s1, alice, js1)
	live, _ := s1.Queries.Get(id)
	rec := exportStream(t, js1, id)

	rep := auditOf(t, rec)
	if !rep.OK || rep.StateDigest != live.StateDigest.String() || rep.Supervisor != 2 || rep.Status != "completed" ||
		rep.Rejections["json.syntax"] != 1 || rep.Rejections["limit.artifact_size"] != 1 || len(rep.Decisions) != 1 || !rep.Decisions[0].OK {
		t.Fatalf("audit %+v (live digest %s)\n%s", rep, live.StateDigest, rep.Text())
	}
	// The same recording gives the same report.
	if a, b := auditOf(t, rec), auditOf(t, rec); a.Text() != b.Text() {
		t.Error("two audits differ")
	}

	if !bytes.Contains(rec, []byte(`"subject":"parley.`+id+`.art.alice"`)) || bytes.Contains(rec, []byte(partition.Prefix)) {
		t.Errorf("the recording does not hold the subjects as published:\n%s", rec)
	}

	s2, nc2 := engineOn(t, false, into)
	js2, _ := jetstream.New(operatorConn(t, s2), jetstream.WithPublishAsyncMaxPending(4096)) // a recording holds _supervisor messages
	r, _ := recording.NewReader(bytes.NewReader(rec))
	res, err := archive.Import(ctx, js2, r, "", nil)
	if err != nil || res.Published != res.Messages || !res.Atomic {
		t.Fatalf("import %+v %v", res, err)
	}
	info, _ := s2.Stream.Info(ctx)
	s2.Runner.WaitFor(ctx, info.State.LastSeq)
	supervisorDone(t, s2, id) // the second engine's supervisor must find nothing to add
	if again := exportStream(t, js2, id); !bytes.Equal(again, rec) {
		t.Fatalf("re-export differs:\n%s\n---\n%s", again, rec)
	}
	// Under another id: the same state and digest.
	other := "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a99"
	r, _ = recording.NewReader(bytes.NewReader(rec))
	if _, err := archive.Import(ctx, js2, r, other, nil); err != nil {
		t.Fatal(err)
	}
	info, _ = s2.Stream.Info(ctx)
	s2.Runner.WaitFor(ctx, info.State.LastSeq)
	v, _ := s2.Queries.Get(other)
	if v.StateDigest != live.StateDigest || v.Status != live.Status || v.Artifacts != live.Artifacts {
		t.Errorf("imported as %s: %+v\nlive %+v", other, v, live)
	}
	// Importing again: the same recording resumes with nothing to do; a
	// different one is refused.
	r, _ = recording.NewReader(bytes.NewReader(rec))
	if res, err := archive.Import(ctx, js2, r, "", nil); err != nil || res.Published != 0 || res.Skipped != res.Messages {
		t.Errorf("re-import %+v %v", res, err)
	}
	alice2, _ := client.New(nc2, "alice")
	id2, _ := alice2.Open(ctx, client.Charter{Title: "another"})
	r, _ = recording.NewReader(bytes.NewReader(rec))
	if _, err := archive.Import(ctx, js2, r, id2, nil); !errors.Is(err, archive.ErrTaken) {
		t.Errorf("overwrite: %v", err)
	}
}

// An interrupted import resumes without duplicates.
func TestArchive_ResumeImport(t *testing.T) {
	ctx := context.Background()
	s1, nc1 := engineWith(t, false)
	js1, _ := jetstream.New(nc1)
	alice, _ := client.New(nc1, "alice")
	id := recordedDeliberation(t, s1, alice, js1)
	rec := exportStream(t, js1, id)
	lines := strings.Split(strings.TrimSpace(string(rec)), "\n")
	prefix := strings.Join(lines[:4], "\n") + "\n" // the header and 3 messages: an import cut short
	s2, _ := engineWith(t, true)
	js2, _ := jetstream.New(operatorConn(t, s2))
	r, _ := recording.NewReader(strings.NewReader(prefix))
	if res, err := archive.Import(ctx, js2, r, "", nil); err != nil || res.Published != 3 || res.Complete {
		t.Fatalf("%+v %v", res, err)
	}
	r, _ = recording.NewReader(bytes.NewReader(rec))
	res, err := archive.Import(ctx, js2, r, "", nil)
	if err != nil || res.Skipped != 3 || res.Published != res.Messages-3 || !res.Complete {
		t.Fatalf("resume %+v %v", res, err)
	}
	info, _ := s2.Stream.Info(ctx)
	if int(info.State.Msgs) != res.Messages+1 { // and the end of the import
		t.Errorf("stream holds %d messages, the recording %d", info.State.Msgs, res.Messages)
	}
	if again := exportStream(t, js2, id); !bytes.Equal(again, rec) {
		t.Error("the resumed import exports differently")
	}
}

// On a stream that does not allow atomic batches (one created before they
// were used), import publishes with asynchronous acknowledgements, to the
// same result.
func TestArchive_ImportWithoutAtomicBatches(t *testing.T) {
	ctx := context.Background()
	s1, nc1 := engineWith(t, false)
	js1, _ := jetstream.New(nc1)
	alice, _ := client.New(nc1, "alice")
	id := recordedDeliberation(t, s1, alice, js1)
	rec := exportStream(t, js1, id)
	// The old stream, on a server without authorization (nobody's
	// credentials may update the stream on the embedded default), with an
	// engine of its own.
	ns, err := embedded.Start(embedded.Config{Dir: t.TempDir(), Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { embedded.Stop(ns) })
	nc2, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc2.Close)
	js2, _ := jetstream.New(nc2)
	cfg := ledger.StreamConfig(1)
	cfg.AllowAtomicPublish = false
	if _, err := js2.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	s2, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), NATS: ns.ClientURL(), HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	r, _ := recording.NewReader(bytes.NewReader(rec))
	res, err := archive.Import(ctx, js2, r, "", nil)
	if err != nil || res.Atomic || res.Published != res.Messages {
		t.Fatalf("import %+v %v", res, err)
	}
	if again := exportStream(t, js2, id); !bytes.Equal(again, rec) {
		t.Error("the import exports differently")
	}
}

// The audit catches a changed byte, a removed line, a moved line and a
// forged supervisor emission, each with its finding.
func TestAudit_Tampering(t *testing.T) {
	s, nc := engineWith(t, false)
	js, _ := jetstream.New(nc)
	alice, _ := client.New(nc, "alice")
	id := recordedDeliberation(t, s, alice, js)
	rec := exportStream(t, js, id)
	lines := strings.Split(strings.TrimSpace(string(rec)), "\n")
	join := func(ls []string) []byte { return []byte(strings.Join(ls, "\n") + "\n") }
	has := func(rep *audit.Report, code string) bool {
		for _, f := range rep.Findings {
			if f.Code == code {
				return true
			}
		}
		return false
	}

	// A changed byte in the claim's data.
	var l map[string]any
	json.Unmarshal([]byte(lines[2]), &l)
	data, _ := base64.StdEncoding.DecodeString(l["data"].(string))
	data = bytes.Replace(data, []byte("ship it"), []byte("ship It"), 1)
	l["data"] = base64.StdEncoding.EncodeToString(data)
	b, _ := json.Marshal(l)
	tampered := append([]string{}, lines...)
	tampered[2] = string(b)
	if rep := auditOf(t, join(tampered)); rep.OK || !has(rep, audit.CodeChainBroken) {
		t.Errorf("changed byte: %+v", rep.Findings)
	}
	// A removed line.
	removed := append(append([]string{}, lines[:3]...), lines[4:]...)
	if rep := auditOf(t, join(removed)); rep.OK || !has(rep, audit.CodeChainBroken) || !has(rep, audit.CodeCount) {
		t.Errorf("removed line: %+v", rep.Findings)
	}
	// A moved line.
	moved := append([]string{}, lines...)
	moved[2], moved[3] = moved[3], moved[2]
	if rep := auditOf(t, join(moved)); rep.OK || !has(rep, audit.CodeOrder) || !has(rep, audit.CodeChainBroken) {
		t.Errorf("moved line: %+v", rep.Findings)
	}
	// A cut recording.
	if rep := auditOf(t, join(lines[:len(lines)-1])); rep.OK || !has(rep, audit.CodeNoTrailer) {
		t.Errorf("cut: %+v", rep.Findings)
	}
	// A forged supervisor FAILURE, with the chain recomputed by the forger.
	r, _ := recording.NewReader(bytes.NewReader(rec))
	var forged bytes.Buffer
	w, _ := recording.NewWriter(&forged, recording.Stream, id)
	fake := events.MustSeal(events.Draft{Type: events.TypeFailure, Payload: events.Failure{Code: "deadlock.idle", Description: "forged", Retryable: false}})
	for i := 0; ; i++ {
		m, err := r.Next()
		if err != nil {
			break
		}
		w.Write(m)
		if i == 2 {
			w.Write(recording.Message{Position: m.Position + 1, Subject: wire.ArtifactSubject(id, wire.SupervisorToken), Time: m.Time, Data: fake.Canonical})
		}
	}
	w.Close()
	rep := auditOf(t, forged.Bytes())
	if rep.OK || !has(rep, audit.CodeUnjustified) || has(rep, audit.CodeChainBroken) {
		t.Errorf("forged emission: %+v", rep.Findings)
	}
}
