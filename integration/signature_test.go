package integration

import (
	"bytes"
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/archive"
	"github.com/parley-engine/parley/audit"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/signing"
)

// A deliberation whose charter requires signatures, signed by its
// participants' clients: exported, its recording carries every signature
// and audits OK (the audit verifies them again, offline); imported, the
// engine verifies them again and re-exports the same bytes. A recording
// whose signature was stripped, with its chain recomputed as a forger
// would, audits with the artifact refused and the digest mismatched.
func TestSignatures_RecordAuditImport(t *testing.T) {
	ctx := context.Background()
	s1, nc1 := engineWith(t, false)
	js1, _ := jetstream.New(nc1)
	newKey := func() (nkeys.KeyPair, string) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		return kp, pub
	}
	aliceKey, alicePub := newKey()
	bobKey, bobPub := newKey()
	alice, err := client.NewWithOptions(nc1, "alice", client.Options{SigningKey: aliceKey})
	if err != nil {
		t.Fatal(err)
	}
	bob, _ := client.NewWithOptions(nc1, "bob", client.Options{SigningKey: bobKey})
	unsigned, _ := client.New(nc1, "alice")
	id, err := alice.Open(ctx, client.Charter{Title: "signed", Participants: []string{"alice", "bob"},
		Keys: map[string]string{"alice": alicePub, "bob": bobPub}, RequireSignatures: true})
	if err != nil {
		t.Fatal(err)
	}
	cl, _, _ := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "ship it"}})
	o, _, _ := bob.Publish(ctx, id, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "untested", Blocking: true},
		References: []events.Reference{{Target: cl.ID, Relation: events.ObjectsTo}}})
	unsigned.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "not signed"}})
	alice.Publish(ctx, id, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "ship", Status: events.Final,
		ObjectionDispositions: []events.Disposition{{Objection: o.ID, Disposition: events.Addressed, Rationale: "tested"}}},
		References: []events.Reference{{Target: cl.ID, Relation: events.Decides}}})
	// The supervisor's TERMINATION is signed with the engine's key, which no charter binds.
	live := waitState(t, alice, id, func(v api.View) bool { return v.Status == api.StatusCompleted })
	supervisorDone(t, s1, id)
	live, _ = s1.Queries.Get(id)
	if live.Artifacts != 4 || live.RejectionsByCode["signature.missing"] != 1 {
		t.Fatalf("live: %d artifacts, rejections %v", live.Artifacts, live.RejectionsByCode)
	}

	rec := exportStream(t, js1, id)
	r, _ := recording.NewReader(bytes.NewReader(rec))
	signed := 0
	for {
		m, err := r.Next()
		if err != nil {
			break
		}
		if m.Signature != (signing.Headers{}) {
			signed++
		}
	}
	// alice's claim and decision, bob's objection; the supervisor's
	// TERMINATION, signed by the engine; the checkpoint after it, whose
	// Parley-Key names the engine's key.
	if r.Header().Version != recording.Version || signed != 5 {
		t.Fatalf("recording version %d with %d signed messages, want 5", r.Header().Version, signed)
	}
	rep := auditOf(t, rec)
	if !rep.OK || rep.StateDigest != live.StateDigest.String() || rep.Rejections["signature.missing"] != 1 {
		t.Fatalf("audit %+v (live digest %s)\n%s", rep, live.StateDigest, rep.Text())
	}

	// The claim's signature stripped, the chain recomputed: the audit's
	// fold refuses the claim (and so what rests on it), and its digest is
	// not the one the engine reported.
	r, _ = recording.NewReader(bytes.NewReader(rec))
	var forged bytes.Buffer
	w, _ := recording.NewWriter(&forged, recording.Stream, id)
	for {
		m, err := r.Next()
		if err != nil {
			break
		}
		if bytes.Equal(m.Data, cl.Canonical) {
			m.Signature = signing.Headers{}
		}
		w.Write(m)
	}
	w.StateDigest = r.Trailer().StateDigest
	w.Close()
	rep = auditOf(t, forged.Bytes())
	has := func(code string) bool {
		for _, f := range rep.Findings {
			if f.Code == code {
				return true
			}
		}
		return false
	}
	if rep.OK || !has(audit.CodeDigest) || has(audit.CodeChainBroken) || rep.Rejections["signature.missing"] != 2 {
		t.Errorf("stripped signature: %+v\n%s", rep.Rejections, rep.Text())
	}

	// Imported: the engine verifies the signatures it republishes, and
	// the deliberation reads and re-exports as it was.
	s2, _ := engineWith(t, false)
	js2, _ := jetstream.New(operatorConn(t, s2), jetstream.WithPublishAsyncMaxPending(4096))
	r, _ = recording.NewReader(bytes.NewReader(rec))
	if _, err := archive.Import(ctx, js2, r, "", nil); err != nil {
		t.Fatal(err)
	}
	info, _ := s2.Stream.Info(ctx)
	s2.Runner.WaitFor(ctx, info.State.LastSeq)
	supervisorDone(t, s2, id)
	if v, _ := s2.Queries.Get(id); v.StateDigest != live.StateDigest || v.Artifacts != 4 {
		t.Errorf("imported: %+v", v)
	}
	if again := exportStream(t, js2, id); !bytes.Equal(again, rec) {
		t.Errorf("re-export differs:\n%s\n---\n%s", again, rec)
	}
}
