package projector

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/tlog"
	"github.com/parley-engine/parley/wire"
)

// The log of a deliberation (docs/VERIFY.md, "The log of a deliberation"):
// every message of its record, in order — the messages its ordinals count,
// from its open on; the engine's checkpoints are statements about the
// record, not messages of it — is a leaf of an RFC 6962 Merkle tree: the
// message of ordinal k is leaf k-1. The fold keeps
// the tree's frontier (O(log n) hashes), so that it knows the log's root
// at every message, and checks every checkpoint the engine publishes into
// the record (parley.<deliberation>.art._checkpoint) against it: a
// checkpoint is admitted only when it is signed by the key its Parley-Key
// header names and its size and root are the log's just before it.

// LeafOf returns the leaf of a message of the record as the fold recorded
// it: its subject (for an importer's message, the subject of the message
// it restores), the time the fold gave it (Outcome.Time), its bytes and
// its signature headers.
func LeafOf(m Msg) tlog.Leaf {
	subject := m.Subject
	if m.Import != nil && m.Import.Subject != "" {
		subject = m.Import.Subject
	}
	l := tlog.Leaf{UnixNano: m.Time.UnixNano(), Subject: subject, Key: m.Signature.Key, Signature: m.Signature.Signature}
	if m.DataHashed {
		l.DataHash = m.DataHash
	} else {
		l.DataHash = sha256.Sum256(m.Data)
	}
	return l
}

// PrepareLeaf hashes m's bytes ahead of the fold (Msg.DataHash), the part
// of a leaf that costs with the message's size. Pure: a runner calls it
// on every core.
func PrepareLeaf(m *Msg) {
	m.DataHash, m.DataHashed = sha256.Sum256(m.Data), true
}

// appendLeaf adds m, a message of d's record, to d's log, and notes a
// judgment the next checkpoint must cover.
func (d *Deliberation) appendLeaf(m Msg, out *Outcome) {
	if d.log == nil {
		d.log = tlog.NewFrontier()
	}
	h := LeafOf(m).Hash()
	d.log.Append(h)
	out.Logged, out.LeafHash = true, h
	if judgment(out) || d.Status.Terminal() && !d.ended {
		d.judgedSize = d.log.Size()
	}
	d.ended = d.Status.Terminal()
}

// judgment says whether an outcome is one a checkpoint must follow: an
// accepted DECISION (the closure verifier judges it), FAILURE or
// TERMINATION.
func judgment(out *Outcome) bool {
	for _, a := range out.Admitted {
		switch a.Artifact.Type {
		case events.TypeDecision, events.TypeFailure, events.TypeTermination:
			return true
		}
	}
	return false
}

// LogSize is the number of leaves of d's log: the messages of its record.
func (d *Deliberation) LogSize() uint64 {
	if d.log == nil {
		return 0
	}
	return d.log.Size()
}

// LogRoot is the root of d's log.
func (d *Deliberation) LogRoot() tlog.Hash {
	if d.log == nil {
		return tlog.EmptyRoot
	}
	return d.log.Root()
}

// Checkpoints returns the number of checkpoints admitted, and the size
// the last one covers.
func (d *Deliberation) Checkpoints() (n int, size uint64) { return d.ckptN, d.ckptSize }

// JudgedSize is the size of the log just after its last judgment (0:
// none yet): what a checkpoint must cover.
func (d *Deliberation) JudgedSize() uint64 { return d.judgedSize }

// CheckpointDue says whether a judgment (an accepted DECISION, FAILURE or
// TERMINATION, or the end of the deliberation) is in the log and no
// checkpoint covers it yet: what the engine publishes a checkpoint for.
// It is a function of the record alone, so every engine agrees on it.
func (d *Deliberation) CheckpointDue() bool { return d.judgedSize > d.ckptSize }

// checkpoint applies a checkpoint message: a signed note whose key is the
// message's Parley-Key, of the log just before it. It is never refused:
// a checkpoint is the engine's statement, which its signature stands for
// and an auditor judges with the keys they trust (engine audit
// --trusted-key). The fold records whether it verifies (signed by the key
// it names, of this deliberation, of the log just before it), and one that
// does covers the log so far; so does one restored by an import, which
// was the original deliberation's (under another id it cannot verify).
func (d *Deliberation) checkpoint(m Msg) Outcome {
	d.now = m.Time
	d.Position, d.ckptAt = m.Seq, m.Seq
	if err := d.checkCheckpoint(m); err != nil {
		d.ckptBad++
		if m.Import != nil {
			d.ckptSize = d.LogSize()
		}
		return Outcome{Deliberation: d.ID, Control: OpCheckpoint, CheckpointErr: err}
	}
	d.ckptN++
	d.ckptSize = d.LogSize()
	return Outcome{Deliberation: d.ID, Control: OpCheckpoint}
}

// BadCheckpoints is the number of checkpoint messages that did not verify.
func (d *Deliberation) BadCheckpoints() int { return d.ckptBad }

// OpCheckpoint is what an Outcome's Control says of an admitted
// checkpoint.
const OpCheckpoint = "checkpoint"

func (d *Deliberation) checkCheckpoint(m Msg) error {
	origin, err := tlog.Origin(d.ID)
	if err != nil {
		return err
	}
	v, err := tlog.NewVerifier(m.Signature.Key, origin)
	if err != nil {
		return err
	}
	c, _, err := tlog.Open(m.Data, origin, v)
	if err != nil {
		return err
	}
	size, root := d.LogSize(), d.LogRoot()
	switch {
	case c.Size != size:
		return &tlog.Error{Code: tlog.ErrInconsistent.Code, Msg: "the checkpoint covers " + strconv.FormatUint(c.Size, 10) + " messages, and the log has " + strconv.FormatUint(size, 10)}
	case c.Root != root:
		return &tlog.Error{Code: tlog.ErrInconsistent.Code, Msg: "the checkpoint's root is not the log's at size " + strconv.FormatUint(size, 10)}
	}
	return nil
}

// isCheckpoint says whether participant is the checkpoint token.
func isCheckpoint(participant string) bool { return participant == wire.CheckpointToken }

// LogBuilder rebuilds a deliberation's log from the outcomes of a fold of
// its messages (an export, an audit of a recording): the whole tree, which
// gives inclusion and consistency proofs, and the checkpoints admitted in
// it. Keep, when set, says which leaves (by index) to keep whole, for
// receipts.
type LogBuilder struct {
	Tree        *tlog.Tree
	Checkpoints []LoggedCheckpoint
	Leaves      map[uint64]tlog.Leaf
	Keep        func(index uint64) bool
	opened      map[int]tlog.Checkpoint // Checkpoints[i], opened once for every receipt it gives
}

// LoggedCheckpoint is a checkpoint in a deliberation's record that
// verified: the size of the log it covers (Index: every message before
// it), its signed note and the key its message named.
type LoggedCheckpoint struct {
	Index uint64
	Note  []byte
	Key   string
}

// NewLogBuilder returns a builder of an empty log.
func NewLogBuilder(keep func(uint64) bool) *LogBuilder {
	return &LogBuilder{Tree: tlog.NewTree(), Leaves: map[uint64]tlog.Leaf{}, Keep: keep}
}

// Add takes m, a message of the deliberation as given to Apply, and what
// Apply did with it.
func (b *LogBuilder) Add(m Msg, out Outcome) {
	if out.Control == OpCheckpoint && out.CheckpointErr == nil {
		b.Checkpoints = append(b.Checkpoints, LoggedCheckpoint{Index: b.Tree.Size(), Note: m.Data, Key: m.Signature.Key})
	}
	if !out.Logged {
		return
	}
	i := b.Tree.Append(out.LeafHash)
	if b.Keep != nil && b.Keep(i) {
		m.Time = out.Time
		b.Leaves[i] = LeafOf(m)
	}
}

// ErrNotCovered: no checkpoint in the log covers the message yet (the
// engine publishes one after the next judgment, and at the end).
var ErrNotCovered = errors.New("projector: no checkpoint covers the message yet")

// Receipt returns the receipt of leaf index (kept: Keep) in the first
// checkpoint that covers it.
func (b *LogBuilder) Receipt(deliberation string, index uint64) ([]byte, error) {
	leaf, ok := b.Leaves[index]
	if !ok {
		return nil, fmt.Errorf("projector: leaf %d was not kept", index)
	}
	origin, err := tlog.Origin(deliberation)
	if err != nil {
		return nil, err
	}
	for i, c := range b.Checkpoints {
		if c.Index <= index {
			continue
		}
		cp, ok := b.opened[i]
		if !ok {
			v, err := tlog.NewVerifier(c.Key, origin)
			if err != nil {
				return nil, err
			}
			if cp, _, err = tlog.Open(c.Note, origin, v); err != nil {
				return nil, err
			}
			if b.opened == nil {
				b.opened = map[int]tlog.Checkpoint{}
			}
			b.opened[i] = cp
		}
		r, err := tlog.NewReceipt(b.Tree, index, leaf, cp, c.Note)
		if err != nil {
			return nil, err
		}
		return r.Marshal(), nil
	}
	return nil, ErrNotCovered
}

// LogState is the log as the API shows it.
func (d *Deliberation) LogState() api.LogState {
	root := d.LogRoot()
	return api.LogState{Size: d.LogSize(), Root: base64.StdEncoding.EncodeToString(root[:]), Checkpoints: d.ckptN, Covered: d.ckptSize,
		BadCheckpoints: d.ckptBad, CheckpointDue: d.CheckpointDue()}
}
