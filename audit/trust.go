package audit

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/signing"
	"github.com/parley-engine/parley/tlog"
	"github.com/parley-engine/parley/tlog/cosign"
	"github.com/parley-engine/parley/wire"
)

// Trust is what an auditor trusts and holds beside a recording: the
// engine's public keys (nkeys user keys, "U…"; an engine's key signs its
// supervisor's emissions, the resolutions it publishes for principals and
// its checkpoints of the log), and receipts and checkpoints obtained
// elsewhere (from the engine while the deliberation ran, from a
// participant, from a witness) that the recording must agree with.
// Witnesses are the witnesses whose cosignature every checkpoint given
// must carry, each as WitnessVerifier reads it.
type Trust struct {
	EngineKeys  []string
	Receipts    [][]byte
	Checkpoints [][]byte
	Witnesses   []string
}

// WitnessVerifier reads a witness's key: its cosignature verifier key
// ("<name>+<key hash>+<base64 of 0x04 || public key>", as
// tlog/cosign.VerifierKey makes it and engine witness prints), or
// "<name>:<nkeys public key>".
func WitnessVerifier(key string) (note.Verifier, error) {
	if name, rest, ok := strings.Cut(key, "+"); ok {
		// A cosignature key's algorithm is 0x04 (cosignature/v1); a log's
		// verifier key (0x01) names no witness.
		_, k, _ := strings.Cut(rest, "+")
		if b, err := base64.StdEncoding.DecodeString(k); err != nil || len(b) == 0 || b[0] != 0x04 {
			return nil, fmt.Errorf("%w: not a cosignature/v1 verifier key (its key is 0x04 and the public key, in base64)", tlog.ErrKey)
		}
		return cosign.Verifier(key, name)
	}
	name, pub, ok := strings.Cut(key, ":")
	if !ok {
		return nil, fmt.Errorf("%w: a witness is its verifier key (name+hash+key) or name:public key", tlog.ErrKey)
	}
	return cosign.Verifier(pub, name)
}

// Finding codes of the checks with trusted keys (docs/VERIFY.md).
const (
	// CodeUnsignedEmission: a supervisor emission not signed by a trusted
	// engine key (anyone who rewrote the record could have written it).
	CodeUnsignedEmission = "audit.unsigned_emission"
	// CodeBadCheckpoint: a checkpoint in the record that does not verify,
	// or is not signed by a trusted key.
	CodeBadCheckpoint = "audit.bad_checkpoint"
	// CodeUncovered: a judgment (a DECISION, FAILURE or TERMINATION, or
	// the end) that no checkpoint of a trusted key covers: the record
	// after the last trusted checkpoint rests on the recording alone.
	CodeUncovered = "audit.uncovered"
	// CodeReceipt: a receipt that does not verify with a trusted key, or
	// whose message the recording does not hold at its index.
	CodeReceipt = "audit.receipt_mismatch"
	// CodeSplitView: a checkpoint given beside the recording, signed by a
	// trusted key, that the recording's log does not reproduce: the
	// engine's key signed two histories, or the recording is not the one
	// it signed.
	CodeSplitView = "audit.split_view"
	// CodeNotWitnessed: a checkpoint given beside the recording without
	// a valid cosignature of a witness the auditor requires.
	CodeNotWitnessed = "audit.not_witnessed"
)

// TrustCodes lists the finding codes of the checks with trusted keys.
var TrustCodes = []string{CodeUnsignedEmission, CodeBadCheckpoint, CodeUncovered, CodeReceipt, CodeSplitView, CodeNotWitnessed}

// Signer is a key and what rests on it in the recording.
type Signer struct {
	Key string `json:"key"`
	// Role: "engine (trusted)", "engine (not trusted)", or "charter:
	// <token>" (a key the charter binds to a participant).
	Role string `json:"role"`
	// Artifacts it signed, checkpoints it signed.
	Artifacts   int `json:"artifacts"`
	Checkpoints int `json:"checkpoints"`
}

// trustCheck follows a stream audit with trusted keys.
type trustCheck struct {
	t       *Trust
	trusted map[string]bool
	log     *projector.LogBuilder
	signers map[string]*Signer
	// covered is the size the last trusted, valid checkpoint covers.
	covered uint64
}

func newTrustCheck(t *Trust) *trustCheck {
	tc := &trustCheck{t: t, trusted: map[string]bool{}, signers: map[string]*Signer{}}
	for _, k := range t.EngineKeys {
		tc.trusted[k] = true
	}
	tc.log = projector.NewLogBuilder(nil)
	return tc
}

func (tc *trustCheck) signer(key string) *Signer {
	s := tc.signers[key]
	if s == nil {
		s = &Signer{Key: key, Role: "engine (not trusted)"}
		if tc.trusted[key] {
			s.Role = "engine (trusted)"
		}
		tc.signers[key] = s
	}
	return s
}

// add checks one message of the recording, with what the fold did.
func (tc *trustCheck) add(rep *Report, id string, m recording.Message, msg projector.Msg, out projector.Outcome) {
	tc.log.Add(msg, out)
	_, kind, token := wire.Parse(m.Subject)
	if kind == "art" && token == wire.SupervisorToken {
		tc.emission(rep, id, m)
	}
	if out.Control == projector.OpCheckpoint {
		s := tc.signer(m.Signature.Key)
		switch {
		case out.CheckpointErr != nil:
			rep.find(CodeBadCheckpoint, m.Position, "", "a checkpoint that does not verify: %v", out.CheckpointErr)
		case !tc.trusted[m.Signature.Key]:
			rep.find(CodeBadCheckpoint, m.Position, "", "a checkpoint signed by %s, which is not a trusted key", m.Signature.Key)
		default:
			s.Checkpoints++
			tc.covered = tc.log.Tree.Size()
		}
	}
	for _, a := range out.Admitted {
		if h := m.Signature; h.Key != "" && token != wire.SupervisorToken {
			s := tc.signers[h.Key]
			if s == nil {
				s = &Signer{Key: h.Key, Role: "charter: " + a.Participant}
				if tc.trusted[h.Key] {
					s.Role = "engine (trusted), for " + a.Participant
				}
				tc.signers[h.Key] = s
			}
			s.Artifacts++
		}
	}
}

// emission checks a supervisor emission's signature: by a trusted key,
// over this deliberation.
func (tc *trustCheck) emission(rep *Report, id string, m recording.Message) {
	a, err := events.Validate(m.Data)
	if err != nil {
		return // the fold refused it: the audit reports that already
	}
	h := m.Signature
	switch {
	case h == (signing.Headers{}):
		rep.find(CodeUnsignedEmission, m.Position, a.ID.String(), "the supervisor's %s is not signed", a.Type)
	case !tc.trusted[h.Key]:
		rep.find(CodeUnsignedEmission, m.Position, a.ID.String(), "the supervisor's %s is signed by %s, which is not a trusted key", a.Type, h.Key)
	default:
		if err := signing.VerifyKey(id, wire.SupervisorToken, a.ID.String(), h); err != nil {
			rep.find(CodeUnsignedEmission, m.Position, a.ID.String(), "the supervisor's %s: %v", a.Type, err)
			return
		}
		tc.signer(h.Key).Artifacts++
	}
}

// finish checks coverage, receipts and external checkpoints once the
// recording is read.
func (tc *trustCheck) finish(rep *Report, id string, d *projector.Deliberation) {
	// The fold's judgments (an accepted DECISION, FAILURE or TERMINATION,
	// or the end): the last must be covered.
	if judged := d.JudgedSize(); judged > tc.covered {
		rep.find(CodeUncovered, 0, "", "no checkpoint of a trusted key covers the record's last judgment (message %d of %d): what follows the last trusted checkpoint (%d messages) rests on the recording alone", judged, tc.log.Tree.Size(), tc.covered)
	}
	origin, err := tlog.Origin(id)
	if err != nil {
		return
	}
	// open opens a signed checkpoint with the first trusted key that signed
	// it, and returns that key's verifier.
	open := func(signed []byte) (tlog.Checkpoint, string, note.Verifier, error) {
		var last error
		for _, k := range tc.t.EngineKeys {
			v, err := tlog.NewVerifier(k, origin)
			if err != nil {
				last = err
				continue
			}
			c, _, err := tlog.Open(signed, origin, v)
			if err == nil {
				return c, k, v, nil
			}
			last = err
		}
		if last == nil {
			last = tlog.ErrSignature
		}
		return tlog.Checkpoint{}, "", nil, last
	}
	for i, b := range tc.t.Receipts {
		r, err := tlog.ParseReceipt(b)
		if err != nil {
			rep.find(CodeReceipt, 0, "", "receipt %d: %v", i+1, err)
			continue
		}
		_, key, v, err := open(r.Checkpoint)
		if err != nil {
			rep.find(CodeReceipt, 0, "", "receipt %d: its checkpoint: %v", i+1, err)
			continue
		}
		_, _, c, err := tlog.VerifyReceipt(b, origin, v)
		if err != nil {
			rep.find(CodeReceipt, 0, "", "receipt %d: %v", i+1, err)
			continue
		}
		// The recording must hold that message at that index, in a log
		// whose root at the checkpoint's size is the checkpoint's.
		if err := tc.log.Tree.Check(c); err != nil {
			rep.find(CodeReceipt, 0, "", "receipt %d (message %d, signed by %s): the recording's log does not reproduce its checkpoint of %d messages: %v", i+1, r.Index+1, key, c.Size, err)
			continue
		}
		if h, err := tc.log.Tree.LeafHash(r.Index); err != nil || h != tlog.LeafHash(r.Leaf) {
			rep.find(CodeReceipt, 0, "", "receipt %d: the recording does not hold its message at ordinal %d", i+1, r.Index+1)
		}
	}
	for i, b := range tc.t.Checkpoints {
		c, key, ev, err := open(b)
		if err != nil {
			rep.find(CodeSplitView, 0, "", "checkpoint %d: %v", i+1, err)
			continue
		}
		if err := tc.log.Tree.Check(c); err != nil {
			rep.find(CodeSplitView, 0, "", "checkpoint %d of %d messages, signed by %s: the recording's log does not reproduce it (%v): two histories bear the key, or this recording is not the one it signed", i+1, c.Size, key, err)
		}
		for _, w := range tc.t.Witnesses {
			wv, err := WitnessVerifier(w)
			if err == nil {
				_, _, err = tlog.Open(b, origin, ev, wv)
			}
			if err != nil {
				rep.find(CodeNotWitnessed, 0, "", "checkpoint %d of %d messages: no valid cosignature of the witness %s: %v", i+1, c.Size, w, err)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(tc.signers)) {
		rep.Signers = append(rep.Signers, *tc.signers[k])
	}
	rep.Log = &LogReport{Size: tc.log.Tree.Size(), Root: fmt.Sprintf("%x", tc.log.Tree.Root()), Covered: tc.covered,
		Checkpoints: len(tc.log.Checkpoints), Receipts: len(tc.t.Receipts), ExternalCheckpoints: len(tc.t.Checkpoints)}
}

// LogReport is what the audit found of the deliberation's log.
type LogReport struct {
	Size                uint64 `json:"size"`
	Root                string `json:"root"`
	Covered             uint64 `json:"covered"`
	Checkpoints         int    `json:"checkpoints"`
	Receipts            int    `json:"receipts"`
	ExternalCheckpoints int    `json:"external_checkpoints"`
}

// trustText renders the trust section of a report.
func (rep *Report) trustText(b *strings.Builder) {
	if rep.Log == nil {
		return
	}
	fmt.Fprintf(b, "log          %d messages, root %s; trusted checkpoints cover %d; %d receipts and %d checkpoints checked against it\n",
		rep.Log.Size, rep.Log.Root, rep.Log.Covered, rep.Log.Receipts, rep.Log.ExternalCheckpoints)
	for _, s := range rep.Signers {
		fmt.Fprintf(b, "key          %s %s: %d artifacts, %d checkpoints\n", s.Key, s.Role, s.Artifacts, s.Checkpoints)
	}
}
