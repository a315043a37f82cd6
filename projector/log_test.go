package projector_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/tlog"
	"github.com/parley-engine/parley/wire"
)

// checkpointMsg is a checkpoint of delib's log at size and root, signed
// with kp and carrying key as its Parley-Key.
func checkpointMsg(t *testing.T, kp nkeys.KeyPair, key string, size uint64, root tlog.Hash) (data []byte, header string) {
	t.Helper()
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	origin, _ := tlog.Origin(delib)
	s, err := tlog.NewSigner(seed, origin)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tlog.Sign(tlog.Checkpoint{Origin: origin, Size: size, Root: root}, s)
	if err != nil {
		t.Fatal(err)
	}
	return b, key
}

// The fold keeps each deliberation's log: a leaf for every message of its
// record, whose root a tree rebuilt from the messages alone reproduces;
// a judgment (a decision) makes a checkpoint due; a checkpoint of the log
// just before it, signed by the key it names, is admitted and covers the
// judgment; one of another size or root, or whose signature is not by its
// named key, is refused (and is a leaf all the same: the log is the
// record).
func TestLog_CheckpointsOfTheRecord(t *testing.T) {
	f := newFeed(t)
	tree := tlog.NewTree()
	start := time.Unix(1_800_000_000, 0)
	apply := func(subject string, data []byte, key string) projector.Outcome {
		f.seq++
		m := projector.Msg{Seq: f.seq, Subject: subject, Data: data, Time: start.Add(time.Duration(f.seq) * time.Second)}
		m.Signature.Key = key
		out := f.p.Apply(m)
		if d := f.p.Deliberation(delib); d != nil && d.LogSize() == tree.Size()+1 {
			tree.AppendLeaf(projector.LeafOf(m))
		}
		return out
	}
	apply(wire.ControlSubject(delib), []byte(`{"op":"open","charter":{"title":"log"}}`), "")
	c := claim("the log is the record")
	apply(wire.ArtifactSubject(delib, "alice"), c.Canonical, "")
	apply(wire.ArtifactSubject(delib, "bob"), []byte("junk"), "") // a rejection is a message of the record
	if d := f.d(); d.CheckpointDue() || d.LogSize() != 3 || d.LogRoot() != tree.Root() {
		t.Fatalf("before a judgment: due %v, size %d, root %x, rebuilt %x", d.CheckpointDue(), d.LogSize(), d.LogRoot(), tree.Root())
	}
	dec := decision(events.Final, c.ID)
	apply(wire.ArtifactSubject(delib, "alice"), dec.Canonical, "")
	if !f.d().CheckpointDue() {
		t.Fatal("a decision made no checkpoint due")
	}

	engine := userKey(t, 7)
	other := userKey(t, 8)
	size, root := f.d().LogSize(), f.d().LogRoot()
	// Refused: another size, another root, signed by a key it does not name.
	for name, tc := range map[string]struct {
		kp   nkeys.KeyPair
		key  string
		size uint64
		root tlog.Hash
		code string
	}{
		"size":     {engine, pub(t, engine), size - 1, root, tlog.ErrInconsistent.Code},
		"root":     {engine, pub(t, engine), size, tlog.EmptyRoot, tlog.ErrInconsistent.Code},
		"key":      {other, pub(t, engine), size, root, tlog.ErrSignature.Code},
		"no key":   {engine, "", size, root, tlog.ErrKey.Code},
		"bad note": {engine, pub(t, engine), 0, root, tlog.ErrCheckpoint.Code},
	} {
		data, key := checkpointMsg(t, tc.kp, tc.key, tc.size, tc.root)
		if name == "bad note" {
			data = []byte("not a note")
		}
		if name != "bad note" && name != "size" && name != "root" {
			data, key = checkpointMsg(t, tc.kp, tc.key, size, root)
		}
		out := apply(wire.CheckpointSubject(delib), data, key)
		var te *tlog.Error
		if out.Rejection != nil || out.Control != projector.OpCheckpoint || !errors.As(out.CheckpointErr, &te) || te.Code != tc.code {
			t.Errorf("%s: %+v, want a checkpoint that does not verify: %s", name, out, tc.code)
		}
		if !f.d().CheckpointDue() {
			t.Errorf("%s: a refused checkpoint covered the judgment", name)
		}
	}
	size, root = f.d().LogSize(), f.d().LogRoot()
	data, key := checkpointMsg(t, engine, pub(t, engine), size, root)
	out := apply(wire.CheckpointSubject(delib), data, key)
	if out.Rejection != nil || out.Control != projector.OpCheckpoint {
		t.Fatalf("a checkpoint of the log: %+v", out)
	}
	d := f.d()
	if n, covered := d.Checkpoints(); n != 1 || covered != size || d.CheckpointDue() {
		t.Fatalf("after the checkpoint: %d checkpoints covering %d (want 1, %d), due %v", n, covered, size, d.CheckpointDue())
	}
	if d.LogSize() != size || d.LogRoot() != tree.Root() || d.Ordinal(f.seq) != 0 {
		t.Fatalf("a checkpoint is no message of the record: size %d (want %d), ordinal %d, root agrees %v", d.LogSize(), size, d.Ordinal(f.seq), d.LogRoot() == tree.Root())
	}
	// A stale checkpoint: one of the log before a message it lacks.
	apply(wire.ArtifactSubject(delib, "alice"), claim("another").Canonical, "")
	if out := apply(wire.CheckpointSubject(delib), data, key); !errors.Is(out.CheckpointErr, tlog.ErrInconsistent) {
		t.Fatalf("a stale checkpoint: %+v", out)
	}
	if d := f.d(); d.BadCheckpoints() != 6 || d.View().Rejections != 1 {
		t.Fatalf("%d bad checkpoints, %d rejections; want 6 and 1 (the junk): a checkpoint is never refused", d.BadCheckpoints(), d.View().Rejections)
	}
	// The log survives a snapshot.
	var buf bytes.Buffer
	if err := f.p.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	p2, err := projector.ReadSnapshot(&buf, projector.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d2 := p2.Deliberation(delib); d2.LogSize() != f.d().LogSize() || d2.LogRoot() != f.d().LogRoot() || d2.CheckpointDue() != f.d().CheckpointDue() {
		t.Fatal("the log changed through a snapshot")
	}
}
