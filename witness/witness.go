// Package witness cosigns the engine's checkpoints of each deliberation's
// log, once it has checked them against the log it rebuilt from the
// stream itself, so that an operator who holds the engine's key cannot
// show two histories of one deliberation to two parties (docs/VERIFY.md,
// "Witnesses").
//
// A Witness reads the stream in order, as a participant does, and folds
// every message as the engine does (package projector), feeding each
// deliberation's log (the messages the fold counts as its record) into an
// RFC 6962 frontier. For every checkpoint message it sees it checks that
// the note opens under an accepted engine key for the deliberation's
// origin, that its size is the log's and its root the log's root at that
// size, and that it extends the last checkpoint it cosigned for that
// deliberation; then it adds its cosignature (C2SP tlog-cosignature,
// package tlog/cosign) and keeps the cosigned note in its directory,
// DIR/<deliberation>/<size>.note. A checkpoint signed by an accepted key
// whose root is not the log's at its size is a second history: it is
// never cosigned, kept as DIR/<deliberation>/refused-<size>.note, and
// reported as such.
//
// Memory: per deliberation, the fold's state (as the engine holds it,
// bounded by projector.Options), a frontier of at most 64 hashes (the
// roots of the perfect subtrees covering the log: O(log n), never the
// whole tree) and the root of each checkpoint it cosigned (40 bytes
// each). The frontier gives the root at the current size only: a
// checkpoint of a smaller size that the witness did not cosign cannot be
// checked and is refused.
package witness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nkeys"
	"golang.org/x/mod/sumdb/note"

	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/tlog"
	"github.com/parley-engine/parley/tlog/cosign"
	"github.com/parley-engine/parley/wire"
)

// DefaultName is a witness's name when none is given.
const DefaultName = "parley-witness"

// Config is what a Witness needs.
type Config struct {
	// Name is the witness's note key name, and the token of its request
	// subject (parley.witness.<name>.checkpoint): a participant token's
	// grammar (wire.ValidToken).
	Name string
	// Seed is the witness's nkeys seed (engine keygen writes one).
	Seed []byte
	// EngineKeys are the engine public keys (nkeys, "U…" or "N…") whose
	// checkpoints the witness accepts.
	EngineKeys []string
	// Dir keeps the cosigned notes, DIR/<deliberation>/<size>.note, and
	// the refused second histories, DIR/<deliberation>/refused-<size>.note.
	Dir string
	// Report, when set, is told of every verdict, in stream order.
	Report func(Verdict)
}

// Verdict is what the witness made of one checkpoint message.
type Verdict struct {
	Deliberation string
	// Position is the checkpoint message's stream position.
	Position uint64
	// Size and Key: the checkpoint's size and the engine key it opened
	// under (zero when it opened under none).
	Size uint64
	Key  string
	// Cosigned: the note the witness cosigned and keeps (nil if refused).
	Cosigned []byte
	// Refused says why it was not cosigned (nil when cosigned); it is a
	// *Error whose Code is one of the Code constants.
	Refused error
	// Kept is the file a refused second history was kept in
	// (DIR/<deliberation>/refused-<size>.note), if any.
	Kept string
}

// SecondHistory says whether the verdict is a checkpoint signed by an
// accepted engine key for a history the stream does not hold.
func (v Verdict) SecondHistory() bool {
	var e *Error
	return errors.As(v.Refused, &e) && e.Code == CodeSecondHistory
}

// Codes of the reasons a checkpoint is refused.
const (
	// CodeUnsigned: the note does not open under any accepted engine key
	// for the deliberation's origin (not a checkpoint, another origin,
	// another key).
	CodeUnsigned = "witness.unsigned"
	// CodeSecondHistory: the note opens under an accepted engine key, and
	// its root is not the log's at its size, or it covers more messages
	// than the stream holds before it, or the stream no longer holds the
	// history of a checkpoint the witness cosigned.
	CodeSecondHistory = "witness.second_history"
	// CodeUncheckable: a checkpoint of fewer messages than the log, that
	// the witness did not cosign: the frontier knows the root at the
	// current size only.
	CodeUncheckable = "witness.uncheckable"
	// CodeOlder: a checkpoint of the log, of fewer messages than the last
	// the witness cosigned of the deliberation.
	CodeOlder = "witness.older"
	// CodeStorage: the cosigned note could not be kept.
	CodeStorage = "witness.storage"
)

// Codes lists the codes of the reasons a checkpoint is refused.
var Codes = []string{CodeUnsigned, CodeSecondHistory, CodeOlder, CodeUncheckable, CodeStorage}

// Error is a refusal, with a stable code.
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return e.Code + ": " + e.Msg }

// ErrorCode returns the stable code.
func (e *Error) ErrorCode() string { return e.Code }

func refuse(code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// ErrConfig is returned, wrapped, by New for a configuration it cannot use.
var ErrConfig = errors.New("witness: bad configuration")

// Witness follows the stream and cosigns checkpoints. Apply is called by
// one goroutine (Run's); Latest may be called from any.
type Witness struct {
	cfg      Config
	signer   note.Signer
	verifier note.Verifier
	vkey     string
	fold     *projector.Projection
	logs     map[string]*dlog

	mu     sync.Mutex
	latest map[string][]byte // the latest cosigned note of each deliberation
}

// dlog is what the witness keeps of one deliberation's log.
type dlog struct {
	frontier *tlog.Frontier
	// cosigned: the root at each size the witness cosigned (kept in Dir),
	// and the largest of them.
	cosigned map[uint64]tlog.Hash
	last     uint64
	// diverged: the stream does not hold the history of a checkpoint the
	// witness cosigned; it cosigns no more of this deliberation.
	diverged error
}

// New returns a witness, with the cosigned notes Dir already holds: each
// must open under an accepted engine key and the witness's own key, and
// the log the witness rebuilds must reproduce them.
func New(cfg Config) (*Witness, error) {
	if !wire.ValidToken(cfg.Name) || strings.HasPrefix(cfg.Name, "_") {
		return nil, fmt.Errorf("%w: the name %q is not a token ([A-Za-z0-9][A-Za-z0-9_-]{0,63})", ErrConfig, cfg.Name)
	}
	if len(cfg.EngineKeys) == 0 {
		return nil, fmt.Errorf("%w: no engine key to accept", ErrConfig)
	}
	for _, k := range cfg.EngineKeys {
		if _, err := tlog.PublicKey(k); err != nil {
			return nil, fmt.Errorf("%w: engine key %q: %v", ErrConfig, k, err)
		}
	}
	if cfg.Dir == "" {
		return nil, fmt.Errorf("%w: no directory", ErrConfig)
	}
	s, err := cosign.Signer(cfg.Seed, cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("%w: the key: %v", ErrConfig, err)
	}
	pub, err := publicKeyOf(cfg.Seed)
	if err != nil {
		return nil, fmt.Errorf("%w: the key: %v", ErrConfig, err)
	}
	vkey, err := cosign.VerifierKey(pub, cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("%w: the key: %v", ErrConfig, err)
	}
	v, err := cosign.Verifier(vkey, cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("%w: the key: %v", ErrConfig, err)
	}
	w := &Witness{cfg: cfg, signer: s, verifier: v, vkey: vkey,
		fold: projector.New(projector.Options{MaxKept: 16, Rules: termination.Rules{}}),
		logs: map[string]*dlog{}, latest: map[string][]byte{}}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if err := w.load(); err != nil {
		return nil, err
	}
	return w, nil
}

// VerifierKey is the witness's cosignature verifier key
// ("<name>+<key hash>+<base64 of 0x04 || public key>"), what an auditor
// gives engine audit --witness.
func (w *Witness) VerifierKey() string { return w.vkey }

// Name is the witness's name.
func (w *Witness) Name() string { return w.cfg.Name }

// Latest returns the latest note the witness cosigned of deliberation id,
// nil if none.
func (w *Witness) Latest(id string) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latest[id]
}

func (w *Witness) log(id string) *dlog {
	l := w.logs[id]
	if l == nil {
		l = &dlog{frontier: tlog.NewFrontier(), cosigned: map[uint64]tlog.Hash{}}
		w.logs[id] = l
	}
	return l
}

// load reads the cosigned notes Dir holds.
func (w *Witness) load() error {
	entries, err := os.ReadDir(w.cfg.Dir)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	for _, e := range entries {
		id := e.Name()
		if !e.IsDir() || !wire.ValidDeliberation(id) {
			continue
		}
		files, err := os.ReadDir(filepath.Join(w.cfg.Dir, id))
		if err != nil {
			return fmt.Errorf("%w: %v", ErrConfig, err)
		}
		for _, f := range files {
			size, ok := noteSize(f.Name())
			if !ok {
				continue
			}
			path := filepath.Join(w.cfg.Dir, id, f.Name())
			b, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("%w: %v", ErrConfig, err)
			}
			c, _, err := w.open(id, b, w.verifier)
			if err != nil || c.Size != size {
				return fmt.Errorf("%w: %s is not a checkpoint of %d messages cosigned by this witness under an accepted engine key: %v", ErrConfig, path, size, err)
			}
			l := w.log(id)
			l.cosigned[size] = c.Root
			if size >= l.last {
				l.last = size
				w.latest[id] = b
			}
		}
	}
	return nil
}

// noteSize reads "<size>.note".
func noteSize(name string) (uint64, bool) {
	s, ok := strings.CutSuffix(name, ".note")
	if !ok || s == "" || s != strings.TrimLeft(s, "0") && s != "0" {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// open opens a checkpoint of id's log under the first accepted engine key
// it is signed by, with the cosignatures of witnesses required.
func (w *Witness) open(id string, b []byte, witnesses ...note.Verifier) (tlog.Checkpoint, string, error) {
	origin, err := tlog.Origin(id)
	if err != nil {
		return tlog.Checkpoint{}, "", err
	}
	var last error
	for _, k := range w.cfg.EngineKeys {
		v, err := tlog.NewVerifier(k, origin)
		if err != nil {
			last = err
			continue
		}
		c, _, err := tlog.Open(b, origin, v, witnesses...)
		if err == nil {
			return c, k, nil
		}
		last = err
	}
	return tlog.Checkpoint{}, "", last
}

// Apply folds one message of the stream (as archive reads it: its time,
// signature headers and import headers set) and, when it is a checkpoint,
// judges and cosigns it. It returns the verdict on a checkpoint message,
// and ok false for any other message.
func (w *Witness) Apply(m projector.Msg) (Verdict, bool) {
	w.fold.Prepare(&m, nil)
	out := w.fold.Apply(m)
	id := out.Deliberation
	if out.Logged && id != "" {
		l := w.log(id)
		l.frontier.Append(out.LeafHash)
		if r, ok := l.cosigned[l.frontier.Size()]; ok && r != l.frontier.Root() && l.diverged == nil {
			l.diverged = refuse(CodeSecondHistory, "the stream's log at %d messages has the root %x, and the witness cosigned %x: the stream no longer holds the history it cosigned", l.frontier.Size(), l.frontier.Root(), r)
			v := Verdict{Deliberation: id, Position: m.Seq, Size: l.frontier.Size(), Refused: l.diverged}
			w.report(v)
		}
	}
	if out.Control != projector.OpCheckpoint || id == "" {
		return Verdict{}, false
	}
	v := w.checkpoint(id, m)
	w.report(v)
	return v, true
}

func (w *Witness) report(v Verdict) {
	if w.cfg.Report != nil {
		w.cfg.Report(v)
	}
}

// checkpoint judges a checkpoint message of deliberation id, whose log is
// as it was just before it.
func (w *Witness) checkpoint(id string, m projector.Msg) Verdict {
	v := Verdict{Deliberation: id, Position: m.Seq}
	c, key, err := w.open(id, m.Data)
	if err != nil {
		v.Refused = refuse(CodeUnsigned, "not a checkpoint of %s signed by an accepted engine key: %v", id, err)
		return v
	}
	v.Size, v.Key = c.Size, key
	l := w.log(id)
	size, root := l.frontier.Size(), l.frontier.Root()
	switch {
	case c.Size > size:
		v.Refused = refuse(CodeSecondHistory, "signed by %s for %d messages, and the stream holds %d before it", key, c.Size, size)
	case c.Size == size && c.Root != root:
		v.Refused = refuse(CodeSecondHistory, "signed by %s, its root at %d messages is %x, and the stream's log has %x", key, size, c.Root, root)
	case c.Size < size:
		if r, ok := l.cosigned[c.Size]; ok && r != c.Root {
			v.Refused = refuse(CodeSecondHistory, "signed by %s, its root at %d messages is %x, and the witness cosigned %x", key, c.Size, c.Root, r)
		} else if ok {
			v.Cosigned = w.Latest(id) // one it cosigned already, republished
			if b, err := os.ReadFile(w.path(id, c.Size)); err == nil {
				v.Cosigned = b
			}
			return v
		} else {
			v.Refused = refuse(CodeUncheckable, "a checkpoint of %d messages, and the log has %d: the witness knows the root at the current size only", c.Size, size)
		}
	default:
		// The log's at this size: cosigned already (a restart reads the
		// stream again), or to be cosigned if it extends the last one.
		if _, ok := l.cosigned[c.Size]; ok && l.diverged == nil {
			if b, err := os.ReadFile(w.path(id, c.Size)); err == nil {
				v.Cosigned = b
				return v
			}
		}
		switch {
		case l.diverged != nil:
			v.Refused = l.diverged
		case c.Size < l.last:
			v.Refused = refuse(CodeOlder, "a checkpoint of %d messages, and the witness cosigned one of %d", c.Size, l.last)
		}
	}
	if v.Refused != nil {
		if v.SecondHistory() {
			path := filepath.Join(w.cfg.Dir, id, "refused-"+strconv.FormatUint(c.Size, 10)+".note")
			if err := writeFile(path, m.Data); err != nil {
				v.Refused = refuse(CodeSecondHistory, "%s (and it could not be kept: %v)", v.Refused.(*Error).Msg, err)
			} else {
				v.Kept = path
			}
		}
		return v
	}
	// The log's root at this size, and (the frontier only grows, and
	// was checked at the size of every checkpoint cosigned before) an
	// extension of the last one: consistent.
	origin, _ := tlog.Origin(id)
	ev, _ := tlog.NewVerifier(key, origin)
	b, err := tlog.Cosign(m.Data, origin, ev, w.signer)
	if err != nil {
		v.Refused = refuse(CodeStorage, "cosigning: %v", err)
		return v
	}
	if err := writeFile(w.path(id, c.Size), b); err != nil {
		v.Refused = refuse(CodeStorage, "keeping the cosigned note: %v", err)
		return v
	}
	l.cosigned[c.Size] = c.Root
	l.last = c.Size
	w.mu.Lock()
	w.latest[id] = b
	w.mu.Unlock()
	v.Cosigned = b
	return v
}

func (w *Witness) path(id string, size uint64) string {
	return filepath.Join(w.cfg.Dir, id, strconv.FormatUint(size, 10)+".note")
}

// writeFile writes b to path atomically: a temporary file in the same
// directory, synced, then renamed over path.
func writeFile(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// Deliberations returns the ids of the deliberations the witness has
// cosigned checkpoints of, sorted.
func (w *Witness) Deliberations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ids []string
	for id := range w.latest {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// publicKeyOf returns the nkeys public key of a seed.
func publicKeyOf(seed []byte) (string, error) {
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return "", err
	}
	return kp.PublicKey()
}
