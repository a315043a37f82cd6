package witness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/tlog"
	"github.com/parley-engine/parley/tlog/cosign"
	"github.com/parley-engine/parley/wire"
	"github.com/parley-engine/parley/witness"
)

// witnessUser is the block of a witness's NATS user (docs/OPERATIONS.md):
// it reads the stream as a participant does, and answers requests on its
// own subject.
const witnessUser = `
      {
        user: witness
        password: "change-me-witness"
        permissions: {
          publish: {
            allow: ["$JS.API.INFO", "$JS.API.STREAM.INFO.PARLEY",
                    "$JS.API.CONSUMER.CREATE.PARLEY.>", "$JS.API.CONSUMER.DELETE.PARLEY.*", "$JS.FC.>"]
          }
          subscribe: {allow: ["_INBOX.>", "parley.witness.w1.checkpoint"]}
          allow_responses: true
        }
      }
`

// engine is a real engine, with its NATS server configured as
// deploy/nats.conf with a witness user, and connections to it: as the
// admin (the operator, who holds the engine's key too), and as the
// witness.
type engine struct {
	s       *service.Service
	dir     string
	admin   *nats.Conn
	witness *nats.Conn
	key     string
}

func startEngine(t testing.TB, ctx context.Context) *engine {
	t.Helper()
	conf, err := os.ReadFile("../deploy/nats.conf")
	if err != nil {
		t.Fatal(err)
	}
	users := "    users: [\n"
	if !bytes.Contains(conf, []byte(users)) {
		t.Fatal("deploy/nats.conf has no users list")
	}
	confPath := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(confPath, bytes.Replace(conf, []byte(users), []byte(users+witnessUser), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := service.Start(ctx, service.Config{DataDir: dir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", NATSConfig: confPath, User: "engine", Password: "change-me-engine"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e := &engine{s: s, dir: dir, key: s.Credentials().EngineKey}
	for user, nc := range map[string]**nats.Conn{"admin": &e.admin, "witness": &e.witness} {
		c, err := nats.Connect(s.NATSURL(), nats.UserInfo(user, "change-me-"+user), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			t.Errorf("%s: %v", user, err)
		}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		*nc = c
	}
	return e
}

// signer is the engine's own checkpoint signer for id's log.
func (e *engine) signer(t *testing.T, id string) *tlog.Signer {
	t.Helper()
	seed, err := os.ReadFile(filepath.Join(e.dir, service.EngineKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	origin, _ := tlog.Origin(id)
	s, err := tlog.NewSigner(bytes.TrimSpace(seed), origin)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// completed runs a deliberation to its completion and returns its id and
// final state, once a checkpoint covers its end.
func completed(t *testing.T, ctx context.Context, e *engine) (string, api.View) {
	t.Helper()
	alice, _ := client.New(e.admin, "alice")
	bob, _ := client.New(e.admin, "bob")
	id, err := alice.Open(ctx, client.Charter{Title: "witnessed", Participants: []string{"alice", "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	cl, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "ship it"}})
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := bob.Publish(ctx, id, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "untested", Blocking: true},
		References: []events.Reference{{Target: cl.ID, Relation: events.ObjectsTo}}})
	if err != nil {
		t.Fatal(err)
	}
	// A decision that ignores the blocking objection: the supervisor's
	// FAILURE, a judgment, and a checkpoint; then one that addresses it.
	if _, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "ship", Status: events.Final},
		References: []events.Reference{{Target: cl.ID, Relation: events.Decides}}}); err != nil {
		t.Fatal(err)
	}
	for {
		v, err := alice.State(ctx, id)
		if err == nil && v.Counts[events.TypeFailure] == 1 && !v.Log.CheckpointDue {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no FAILURE: %+v %v", v, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "ship, tested", Status: events.Final,
		ObjectionDispositions: []events.Disposition{{Objection: obj.ID, Disposition: events.Addressed, Rationale: "tested"}}},
		References: []events.Reference{{Target: cl.ID, Relation: events.Decides}}}); err != nil {
		t.Fatal(err)
	}
	for {
		v, err := alice.State(ctx, id)
		if err == nil && v.Status.Terminal() && !v.Log.CheckpointDue && v.Log.Covered == v.Log.Size {
			return id, v
		}
		if ctx.Err() != nil {
			t.Fatalf("the deliberation never ended with a checkpoint: %+v %v", v, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// follow starts a witness on e, its verdicts sent to the returned channel.
func follow(t *testing.T, ctx context.Context, e *engine, name string, seed []byte, dir string) (*witness.Witness, <-chan witness.Verdict) {
	t.Helper()
	ch := make(chan witness.Verdict, 256)
	w, err := witness.New(witness.Config{Name: name, Seed: seed, EngineKeys: []string{e.key}, Dir: dir, Report: func(v witness.Verdict) { ch <- v }})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := w.Serve(e.witness)
	if err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Follow(fctx, e.witness) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("follow: %v", err)
		}
		sub.Unsubscribe()
	})
	return w, ch
}

// until reads verdicts until one satisfies ok.
func until(t *testing.T, ctx context.Context, ch <-chan witness.Verdict, ok func(witness.Verdict) bool) []witness.Verdict {
	t.Helper()
	var seen []witness.Verdict
	for {
		select {
		case v := <-ch:
			seen = append(seen, v)
			if ok(v) {
				return seen
			}
		case <-ctx.Done():
			t.Fatalf("no such verdict; saw %+v", seen)
		}
	}
}

func newSeed(t testing.TB) ([]byte, string) {
	t.Helper()
	kp, _ := nkeys.CreateUser()
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	return seed, pub
}

// A witness follows a deliberation to its end and cosigns each of its
// checkpoints; the cosignatures verify with the witness's verifier key,
// are kept in its directory and served on its subject; a forged
// checkpoint signed with the engine's key for another log is refused,
// kept apart, and never cosigned.
func TestWitness_CosignsTheLogAndRefusesASecondHistory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := startEngine(t, ctx)
	seed, pub := newSeed(t)
	dir := t.TempDir()
	w, ch := follow(t, ctx, e, "w1", seed, dir)
	if want, _ := cosign.VerifierKey(pub, "w1"); w.VerifierKey() != want {
		t.Fatalf("verifier key %s, want %s", w.VerifierKey(), want)
	}
	id, view := completed(t, ctx, e)
	origin, _ := tlog.Origin(id)
	ev, _ := tlog.NewVerifier(e.key, origin)
	wv, err := cosign.Verifier(w.VerifierKey(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	seen := until(t, ctx, ch, func(v witness.Verdict) bool {
		return v.Deliberation == id && v.Size == view.Log.Size && v.Cosigned != nil
	})
	var cosigned int
	for _, v := range seen {
		if v.Deliberation != id {
			continue
		}
		if v.Refused != nil {
			t.Fatalf("an honest checkpoint refused: %+v", v)
		}
		c, _, err := tlog.Open(v.Cosigned, origin, ev, wv)
		if err != nil || c.Size != v.Size {
			t.Fatalf("cosigned note of %d: %v %+v", v.Size, err, c)
		}
		kept, err := os.ReadFile(filepath.Join(dir, id, strconv.FormatUint(v.Size, 10)+".note"))
		if err != nil || !bytes.Equal(kept, v.Cosigned) {
			t.Fatalf("the kept note of %d: %v", v.Size, err)
		}
		cosigned++
	}
	if cosigned < 2 {
		t.Fatalf("%d checkpoints cosigned, want one after the decision and one at the end", cosigned)
	}
	last := w.Latest(id)
	if c, _, err := tlog.Open(last, origin, ev, wv); err != nil || c.Size != view.Log.Size {
		t.Fatalf("latest: %v %+v", err, c)
	}
	// Without the witness's cosignature it does not open with its verifier.
	engineOnly := lastCheckpoint(t, ctx, e, id)
	if _, _, err := tlog.Open(engineOnly, origin, ev, wv); !errors.Is(err, tlog.ErrSignature) {
		t.Fatalf("the engine's note alone with the witness required: %v", err)
	}

	// The witness's subject.
	req, _ := json.Marshal(witness.Request{ID: id})
	r, err := e.admin.RequestWithContext(ctx, witness.Subject("w1"), req)
	if err != nil || !bytes.Equal(r.Data, last) {
		t.Fatalf("request: %v %v", err, r)
	}
	for body, status := range map[string]string{`{"id":"0f8c2a54-9e1b-4c6d-8a3f-5b7e9d1c2a40"}`: "404", `{"id":"nope"}`: "400", `not json`: "400"} {
		r, err := e.admin.RequestWithContext(ctx, witness.Subject("w1"), []byte(body))
		if err != nil || r.Header.Get("Nats-Service-Error-Code") != status {
			t.Fatalf("request %s: %v %v, want %s", body, err, r.Header, status)
		}
	}

	// The operator, who holds the engine's key, signs another log of the
	// same size, and one longer than the stream holds, and publishes them.
	op := e.admin
	signer := e.signer(t, id)
	publish := func(c tlog.Checkpoint) []byte {
		b, err := tlog.Sign(c, signer)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(wire.CheckpointSubject(id))
		m.Data = b
		m.Header.Set("Parley-Key", e.key)
		if err := op.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		return b
	}
	forged := publish(tlog.Checkpoint{Origin: origin, Size: view.Log.Size, Root: tlog.Hash{1, 2, 3}})
	v := until(t, ctx, ch, func(v witness.Verdict) bool { return v.Deliberation == id && v.Refused != nil })
	got := v[len(v)-1]
	if !got.SecondHistory() || got.Cosigned != nil || got.Size != view.Log.Size {
		t.Fatalf("the forged checkpoint: %+v", got)
	}
	if got.Kept != filepath.Join(dir, id, "refused-"+strconv.FormatUint(view.Log.Size, 10)+".note") {
		t.Fatalf("kept in %q", got.Kept)
	}
	if b, err := os.ReadFile(got.Kept); err != nil || !bytes.Equal(b, forged) {
		t.Fatalf("the refused note is not kept: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, id, strconv.FormatUint(view.Log.Size, 10)+".note")); !bytes.Equal(b, last) || !bytes.Equal(w.Latest(id), last) {
		t.Fatal("the cosigned note changed")
	}
	publish(tlog.Checkpoint{Origin: origin, Size: view.Log.Size + 5, Root: tlog.Hash{4}})
	v = until(t, ctx, ch, func(v witness.Verdict) bool { return v.Deliberation == id && v.Refused != nil })
	if got := v[len(v)-1]; !got.SecondHistory() || got.Size != view.Log.Size+5 {
		t.Fatalf("the longer forged checkpoint: %+v", got)
	}
	// A key the witness does not accept: refused, not a second history.
	stranger, _ := nkeys.CreateServer()
	sseed, _ := stranger.Seed()
	ssigner, _ := tlog.NewSigner(sseed, origin)
	b, _ := tlog.Sign(tlog.Checkpoint{Origin: origin, Size: view.Log.Size, Root: tlog.Hash{9}}, ssigner)
	if err := op.Publish(wire.CheckpointSubject(id), b); err != nil {
		t.Fatal(err)
	}
	v = until(t, ctx, ch, func(v witness.Verdict) bool { return v.Deliberation == id && v.Refused != nil })
	if got := v[len(v)-1]; got.SecondHistory() || !strings.Contains(got.Refused.Error(), witness.CodeUnsigned) {
		t.Fatalf("a stranger's checkpoint: %+v", got)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, id))
	for _, f := range entries {
		if strings.HasSuffix(f.Name(), ".note") && !strings.HasPrefix(f.Name(), "refused-") {
			b, _ := os.ReadFile(filepath.Join(dir, id, f.Name()))
			if c, _, err := tlog.Open(b, origin, ev, wv); err != nil || c.Root == (tlog.Hash{1, 2, 3}) || c.Root == (tlog.Hash{9}) {
				t.Fatalf("%s: %v %+v", f.Name(), err, c)
			}
		}
	}

	// The witness restarted on its directory: it knows what it cosigned
	// before reading anything, and reading the stream again it keeps each
	// note as it was.
	w2, err := witness.New(witness.Config{Name: "w1", Seed: seed, EngineKeys: []string{e.key}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w2.Latest(id), last) {
		t.Fatal("the restarted witness does not serve the note it kept")
	}
	var again []witness.Verdict
	for _, m := range streamOf(t, ctx, e) {
		if v, ok := w2.Apply(m); ok && v.Deliberation == id {
			again = append(again, v)
		}
	}
	if len(again) != cosigned+3 {
		t.Fatalf("verdicts on the second reading: %d, want %d", len(again), cosigned+3)
	}
	for _, v := range again[:cosigned] {
		kept, _ := os.ReadFile(filepath.Join(dir, id, strconv.FormatUint(v.Size, 10)+".note"))
		if v.Refused != nil || !bytes.Equal(v.Cosigned, kept) {
			t.Fatalf("second reading: %+v", v)
		}
	}
	if !bytes.Equal(w2.Latest(id), last) {
		t.Fatal("the restarted witness rewrote its note")
	}
}

// streamOf reads the whole stream as the fold takes it.
func streamOf(t testing.TB, ctx context.Context, e *engine) []projector.Msg {
	t.Helper()
	js, _ := e.admin.JetStream()
	info, err := js.StreamInfo(wire.StreamName, nats.Context(ctx))
	if err != nil {
		t.Fatal(err)
	}
	rd, err := ledger.Read(ctx, e.witness, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Stop()
	var out []projector.Msg
	for uint64(len(out)) < info.State.Msgs {
		m, err := rd.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := witness.MsgOf(m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, msg)
	}
	return out
}

// lastCheckpoint reads the last checkpoint of id in the stream.
func lastCheckpoint(t *testing.T, ctx context.Context, e *engine, id string) []byte {
	t.Helper()
	js, _ := e.admin.JetStream()
	m, err := js.GetLastMsg(wire.StreamName, wire.CheckpointSubject(id), nats.Context(ctx))
	if err != nil {
		t.Fatal(err)
	}
	return m.Data
}

// A witness whose directory holds notes of a deliberation, reading a
// stream whose log of it is another (the stream rewritten since, by whoever
// holds the engine's key, or another engine's stream under the same id):
// it says so at the size of the first note the log does not reproduce,
// cosigns nothing more of that deliberation, and keeps its notes as they
// were.
func TestWitness_RefusesAStreamRewrittenSinceItCosigned(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := startEngine(t, ctx)
	seed, _ := newSeed(t)
	dir := t.TempDir()
	_, ch := follow(t, ctx, a, "w1", seed, dir)
	id, view := completed(t, ctx, a)
	seen := until(t, ctx, ch, func(v witness.Verdict) bool {
		return v.Deliberation == id && v.Size == view.Log.Size && v.Cosigned != nil
	})
	kept := map[string][]byte{}
	for _, v := range seen {
		if v.Cosigned != nil {
			kept[strconv.FormatUint(v.Size, 10)+".note"] = v.Cosigned
		}
	}
	first := seen[0].Size

	b := startEngine(t, ctx)
	alice, _ := client.New(b.admin, "alice")
	if err := alice.OpenID(ctx, id, client.Charter{Title: "rewritten", Participants: []string{"alice"}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; uint64(i) < first; i++ {
		if _, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "claim " + strconv.Itoa(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := alice.Cancel(ctx, id, "enough"); err != nil {
		t.Fatal(err)
	}
	for {
		v, err := alice.State(ctx, id)
		if err == nil && v.Status.Terminal() && !v.Log.CheckpointDue && v.Log.Covered == v.Log.Size {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no checkpoint of the end: %+v %v", v, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	w, err := witness.New(witness.Config{Name: "w1", Seed: seed, EngineKeys: []string{a.key, b.key}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var verdicts []witness.Verdict
	for _, m := range streamOf(t, ctx, b) {
		if v, ok := w.Apply(m); ok && v.Deliberation == id {
			verdicts = append(verdicts, v)
		}
	}
	if len(verdicts) == 0 {
		t.Fatal("no checkpoint in the second stream")
	}
	for _, v := range verdicts {
		if v.Cosigned != nil || !v.SecondHistory() || !strings.Contains(v.Refused.Error(), "no longer holds the history it cosigned") {
			t.Fatalf("a checkpoint of the rewritten log: %+v", v)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(dir, id))
	for _, f := range entries {
		if strings.HasPrefix(f.Name(), ".tmp") || strings.HasPrefix(f.Name(), "refused-") && kept[f.Name()] == nil {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(dir, id, f.Name()))
		if !bytes.Equal(b, kept[f.Name()]) {
			t.Fatalf("%s changed, or was written anew", f.Name())
		}
	}
	if got := w.Latest(id); !bytes.Equal(got, kept[strconv.FormatUint(view.Log.Size, 10)+".note"]) {
		t.Fatal("the latest note is not the one the witness cosigned")
	}
}

// BenchmarkWitness_CatchUp is a witness reading a stream it has not seen:
// 40 deliberations of 25 messages each and their checkpoints, folded,
// checked and cosigned (each note written and synced).
func BenchmarkWitness_CatchUp(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := startEngine(b, ctx)
	alice, _ := client.New(e.admin, "alice")
	var ids []string
	for range 40 {
		id, err := alice.Open(ctx, client.Charter{Title: "bench", Participants: []string{"alice"}})
		if err != nil {
			b.Fatal(err)
		}
		for i := range 23 {
			if _, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "claim " + strconv.Itoa(i)}}); err != nil {
				b.Fatal(err)
			}
		}
		if err := alice.Cancel(ctx, id, "enough"); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		for {
			v, err := alice.State(ctx, id)
			if err == nil && v.Status.Terminal() && !v.Log.CheckpointDue && v.Log.Covered == v.Log.Size {
				break
			}
			if ctx.Err() != nil {
				b.Fatal("no checkpoint of the end")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	msgs := streamOf(b, ctx, e)
	seed, _ := newSeed(b)
	b.ResetTimer()
	for range b.N {
		w, err := witness.New(witness.Config{Name: "w1", Seed: seed, EngineKeys: []string{e.key}, Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		cosigned := 0
		for _, m := range msgs {
			if v, ok := w.Apply(m); ok && v.Cosigned != nil {
				cosigned++
			}
		}
		if cosigned != len(ids) {
			b.Fatalf("%d cosigned, want %d", cosigned, len(ids))
		}
	}
	b.ReportMetric(float64(len(msgs)*b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(ids)), "µs/checkpoint")
}
