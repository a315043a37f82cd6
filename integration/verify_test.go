package integration

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/audit"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/signing"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/tlog"
	"github.com/parley-engine/parley/wire"
)

// An auditor who received a recording from someone else, with the
// engine's public key alone:
//
//   - the recording as the engine exported it audits OK, and says that the
//     supervisor's emissions and the checkpoints rest on the engine's key;
//   - the same record rewritten (the objection, the FAILURE it caused and
//     the second decision removed, the supervisor's computable completion
//     appended, the chain and the trailer's digest recomputed) still
//     audits OK without the key — what the recording alone can show — and
//     fails with it: the appended completion is not signed by the engine,
//     and no checkpoint of the engine covers the end;
//   - bob's receipt of his objection fails the rewritten recording: its
//     message is not there;
//   - rewritten by someone who also holds the engine's key (the operator),
//     re-signed and re-checkpointed, it passes on its own, and the
//     engine's earlier checkpoint kept by anyone (a participant, from a
//     receipt) shows two histories under one key.
func TestVerify_RewrittenRecordingFailsWithTheEngineKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	s, err := service.Start(ctx, service.Config{DataDir: dir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	alice, _ := client.New(nc, "alice")
	bob, _ := client.New(nc, "bob")
	engineKey := s.Credentials().EngineKey
	id, err := alice.Open(ctx, client.Charter{Title: "rewrite me", Participants: []string{"alice", "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	cl, _, _ := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "ship it"}})
	obj, objAck, _ := bob.Publish(ctx, id, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "untested", Blocking: true},
		References: []events.Reference{{Target: cl.ID, Relation: events.ObjectsTo}}})
	// A final decision that ignores the blocking objection: the supervisor's FAILURE.
	alice.Publish(ctx, id, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "ship", Status: events.Final},
		References: []events.Reference{{Target: cl.ID, Relation: events.Decides}}})
	waitState(t, alice, id, func(v api.View) bool { return v.Counts[events.TypeFailure] == 1 && !v.Log.CheckpointDue })
	alice.Publish(ctx, id, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "ship, tested", Status: events.Final,
		ObjectionDispositions: []events.Disposition{{Objection: obj.ID, Disposition: events.Addressed, Rationale: "tested"}}},
		References: []events.Reference{{Target: cl.ID, Relation: events.Decides}}})
	live := waitState(t, alice, id, func(v api.View) bool { return v.Status == api.StatusCompleted && !v.Log.CheckpointDue })

	// bob keeps the receipt of his objection.
	ord := ordinalOf(t, s, id, objAck.Sequence)
	list, err := bob.Receipts(ctx, id, ord)
	if err != nil || len(list.Receipts) != 1 || list.Receipts[0].Receipt == "" {
		t.Fatalf("bob's receipt: %+v %v", list, err)
	}
	bobReceipt := []byte(list.Receipts[0].Receipt)

	ejs, _ := jetstream.New(operatorConn(t, s))
	rec := exportStream(t, ejs, id)
	trust := &audit.Trust{EngineKeys: []string{engineKey}, Receipts: [][]byte{bobReceipt}}
	rep := trustedAudit(t, rec, trust)
	if !rep.OK || rep.StateDigest != live.StateDigest.String() || rep.Log == nil || rep.Log.Covered != rep.Log.Size {
		t.Fatalf("the engine's recording: %s", rep.Text())
	}
	if len(rep.Signers) != 1 || rep.Signers[0].Key != engineKey || rep.Signers[0].Artifacts != 2 || rep.Signers[0].Checkpoints < 2 {
		t.Fatalf("signers %+v, want the engine's key for the FAILURE, the TERMINATION and the checkpoints", rep.Signers)
	}
	// The engine's last checkpoint, as anyone who read the record kept it.
	lastCheckpoint := lastOn(t, rec, wire.CheckpointSubject(id))

	// The rewrite, by someone without the engine's key.
	forged := rewrite(t, rec, id, obj.ID.String(), nil)
	if rep := auditOf(t, forged); !rep.OK {
		t.Fatalf("without keys the rewritten recording should pass (what the recording alone shows): %s", rep.Text())
	}
	rep = trustedAudit(t, forged, &audit.Trust{EngineKeys: []string{engineKey}})
	if rep.OK || !hasFinding(rep, audit.CodeUnsignedEmission) || !hasFinding(rep, audit.CodeUncovered) {
		t.Fatalf("the rewritten recording with the engine's key: %s", rep.Text())
	}
	rep = trustedAudit(t, forged, &audit.Trust{EngineKeys: []string{engineKey}, Receipts: [][]byte{bobReceipt}})
	if !hasFinding(rep, audit.CodeReceipt) {
		t.Fatalf("bob's receipt against the rewritten recording: %s", rep.Text())
	}

	// The rewrite, by someone who holds the engine's key: signed and
	// checkpointed anew, it passes alone; the engine's earlier checkpoint
	// shows the split view.
	seed, err := os.ReadFile(filepath.Join(dir, service.EngineKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	kp, err := signing.KeyPair(strings.TrimSpace(string(seed)))
	if err != nil {
		t.Fatal(err)
	}
	resigned := rewrite(t, rec, id, obj.ID.String(), kp)
	if rep := trustedAudit(t, resigned, &audit.Trust{EngineKeys: []string{engineKey}}); !rep.OK {
		t.Fatalf("re-signed with the engine's key, alone: %s", rep.Text())
	}
	rep = trustedAudit(t, resigned, &audit.Trust{EngineKeys: []string{engineKey}, Checkpoints: [][]byte{lastCheckpoint}})
	if !hasFinding(rep, audit.CodeSplitView) {
		t.Fatalf("the engine's earlier checkpoint against the re-signed history: %s", rep.Text())
	}
	rep = trustedAudit(t, resigned, &audit.Trust{EngineKeys: []string{engineKey}, Receipts: [][]byte{bobReceipt}})
	if !hasFinding(rep, audit.CodeReceipt) {
		t.Fatalf("bob's receipt against the re-signed history: %s", rep.Text())
	}
	// And a key the auditor does not trust proves nothing.
	stranger, _ := nkeys.CreateUser()
	strangerKey, _ := stranger.PublicKey()
	if rep := trustedAudit(t, rec, &audit.Trust{EngineKeys: []string{strangerKey}}); rep.OK || !hasFinding(rep, audit.CodeUnsignedEmission) || !hasFinding(rep, audit.CodeBadCheckpoint) {
		t.Fatalf("the engine's recording under another trusted key: %s", rep.Text())
	}
}

func trustedAudit(t *testing.T, rec []byte, trust *audit.Trust) *audit.Report {
	t.Helper()
	r, err := recording.NewReader(bytes.NewReader(rec))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := audit.RunTrusted(r, nil, trust)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func hasFinding(rep *audit.Report, code string) bool {
	for _, f := range rep.Findings {
		if f.Code == code {
			return true
		}
	}
	return false
}

// ordinalOf is the ordinal of the message at a stream position.
func ordinalOf(t *testing.T, s *service.Service, id string, seq uint64) uint64 {
	t.Helper()
	var o uint64
	s.Runner.ReadDeliberation(id, func(d *projector.Deliberation) { o = d.Ordinal(seq) })
	if o == 0 {
		t.Fatalf("no ordinal at position %d", seq)
	}
	return o
}

// lastOn is the data of the recording's last message on subject.
func lastOn(t *testing.T, rec []byte, subject string) []byte {
	t.Helper()
	r, _ := recording.NewReader(bytes.NewReader(rec))
	var last []byte
	for {
		m, err := r.Next()
		if err != nil {
			break
		}
		if m.Subject == subject {
			last = m.Data
		}
	}
	if last == nil {
		t.Fatalf("no message on %s", subject)
	}
	return last
}

// rewrite removes from a recording the objection, everything after it but
// the claim's first decision (the FAILURE, the second decision, the
// TERMINATION, the checkpoints after the objection), appends the
// supervisor's completion the rules compute for what is left, and
// recomputes the chain and the trailer's digest. With kp (the engine's
// key), the completion is signed and a checkpoint of the forged log
// appended, as the engine would.
func rewrite(t *testing.T, rec []byte, id, objection string, kp nkeys.KeyPair) []byte {
	t.Helper()
	r, _ := recording.NewReader(bytes.NewReader(rec))
	var keep []recording.Message
	decisions := 0
	for {
		m, err := r.Next()
		if err != nil {
			break
		}
		_, _, token := wire.Parse(m.Subject)
		a, _ := events.Validate(m.Data)
		switch {
		case token == wire.SupervisorToken, token == wire.CheckpointToken:
			continue
		case a != nil && a.ID.String() == objection:
			continue
		case a != nil && a.Type == events.TypeDecision:
			decisions++
			if decisions > 1 {
				continue
			}
		}
		keep = append(keep, m)
	}
	p := projector.New(projector.Options{Rules: termination.Rules{}})
	b := projector.NewLogBuilder(nil)
	var last recording.Message
	for _, m := range keep {
		msg := projector.Msg{Seq: m.Position, Subject: m.Subject, Data: m.Data, Time: m.Time, Signature: m.Signature}
		b.Add(msg, p.Apply(msg))
		last = m
	}
	d := p.Deliberation(id)
	ems := termination.Decide(d, last.Time)
	if len(ems) == 0 {
		t.Fatal("the rules call for nothing on the rewritten record")
	}
	var out bytes.Buffer
	w, _ := recording.NewWriter(&out, recording.Stream, id)
	for _, m := range keep {
		w.Write(m)
	}
	pos, at := last.Position, last.Time
	for _, e := range ems {
		pos, at = pos+1, at.Add(time.Millisecond)
		m := recording.Message{Position: pos, Subject: wire.ArtifactSubject(id, wire.SupervisorToken), Time: at, Data: e.Artifact.Canonical}
		if kp != nil {
			h, err := signing.Sign(kp, id, wire.SupervisorToken, e.Artifact.ID.String())
			if err != nil {
				t.Fatal(err)
			}
			m.Signature = h
		}
		msg := projector.Msg{Seq: m.Position, Subject: m.Subject, Data: m.Data, Time: m.Time, Signature: m.Signature}
		b.Add(msg, p.Apply(msg))
		w.Write(m)
	}
	if kp != nil {
		seed, _ := kp.Seed()
		pub, _ := kp.PublicKey()
		origin, _ := tlog.Origin(id)
		signer, err := tlog.NewSigner(seed, origin)
		if err != nil {
			t.Fatal(err)
		}
		note, err := tlog.Sign(tlog.Checkpoint{Origin: origin, Size: d.LogSize(), Root: d.LogRoot()}, signer)
		if err != nil {
			t.Fatal(err)
		}
		pos, at = pos+1, at.Add(time.Millisecond)
		m := recording.Message{Position: pos, Subject: wire.CheckpointSubject(id), Time: at, Data: note, Signature: signing.Headers{Key: pub}}
		msg := projector.Msg{Seq: m.Position, Subject: m.Subject, Data: m.Data, Time: m.Time, Signature: m.Signature}
		if out := p.Apply(msg); out.CheckpointErr != nil {
			t.Fatalf("the forged checkpoint: %v", out.CheckpointErr)
		}
		w.Write(m)
	}
	w.StateDigest = d.StateDigest().String()
	w.Close()
	return out.Bytes()
}
