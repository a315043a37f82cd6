package relay

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/archive"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/substrate"
)

// The files a signed run adds to its directory.
const (
	// KeysFile holds the public keys the run's charter binds.
	KeysFile = "keys.json"
	// RecordingFile is the deliberation as a stream recording, with
	// every artifact's signature, for engine audit.
	RecordingFile = "recording.jsonl"
)

// errSignFork: a fork's prefix is republished under the new deliberation,
// whose signatures its participants' keys cannot have made (a signature
// names its deliberation).
var errSignFork = errors.New("relay: a signed run cannot fork a recording: the prefix's artifacts carry no signature for the new deliberation")

// runKeys is a signed run's key pairs: one user key per participant,
// drawn for the run and held in memory only (the seeds are never written:
// no one may sign for the run's participants after it).
type runKeys struct {
	pairs map[string]nkeys.KeyPair
	pub   map[string]string
}

func newRunKeys(cfg *Config) (*runKeys, error) {
	k := &runKeys{pairs: map[string]nkeys.KeyPair{}, pub: map[string]string{}}
	for _, p := range cfg.Participants {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, err
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, err
		}
		k.pairs[p.ID], k.pub[p.ID] = kp, pub
	}
	return k, nil
}

// wipe forgets the seeds.
func (k *runKeys) wipe() {
	if k == nil {
		return
	}
	for id, kp := range k.pairs {
		kp.Wipe()
		delete(k.pairs, id)
	}
}

// keysDoc is keys.json.
type keysDoc struct {
	Deliberation      string            `json:"deliberation"`
	Keys              map[string]string `json:"keys"`
	RequireSignatures bool              `json:"require_signatures"`
}

// writeKeys writes the public keys the charter binds to dir/keys.json.
func writeKeys(dir, id string, k *runKeys) error {
	b, err := json.MarshalIndent(keysDoc{Deliberation: id, Keys: k.pub, RequireSignatures: true}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, KeysFile), append(b, '\n'), 0o640)
}

// writeRecording exports the deliberation id, as the stream holds it, to
// dir/recording.jsonl: a stream recording whose trailer's state digest is
// the fold's over it, signatures re-verified, provenance re-verified
// against roots (the embedded engine's).
func writeRecording(ctx context.Context, js jetstream.JetStream, dir, id string, roots []string) error {
	var verify provenance.Verifier
	if len(roots) > 0 {
		rv, err := substrate.NewReverifier(roots...)
		if err != nil {
			return err
		}
		defer rv.Close()
		verify = rv.Verify
	}
	path := filepath.Join(dir, RecordingFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	_, err = archive.ExportWith(ctx, js, id, recording.Stream, f, verify)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReceiptsDir and EngineKeyFile are what a signed run also writes: the
// receipt of every message of the record that a checkpoint covers
// (ReceiptsDir/<ordinal>.tlog-proof, C2SP tlog-proof documents), and the
// engine's public key, which signs the supervisor's emissions and the
// checkpoints. With them the recording verifies on a machine with no
// engine:
//
//	engine audit --trusted-key engine.pub --receipt receipts/2.tlog-proof recording.jsonl
const (
	ReceiptsDir   = "receipts"
	EngineKeyFile = "engine.pub"
)

// writeReceipts writes the engine's key and the receipts of every message
// of deliberation id's record that a checkpoint covers; it returns the
// key and the number of receipts written.
func writeReceipts(ctx context.Context, c *client.Client, dir, id string) (string, int, error) {
	key, err := c.EngineKey(ctx)
	if err != nil {
		return "", 0, err
	}
	if err := os.WriteFile(filepath.Join(dir, EngineKeyFile), []byte(key+"\n"), 0o640); err != nil {
		return "", 0, err
	}
	v, err := c.State(ctx, id)
	if err != nil {
		return key, 0, err
	}
	if err := os.MkdirAll(filepath.Join(dir, ReceiptsDir), 0o750); err != nil {
		return key, 0, err
	}
	n := 0
	for from := uint64(1); from <= v.Log.Size; from += api.MaxReceipts {
		var ords []uint64
		for o := from; o <= v.Log.Size && o < from+api.MaxReceipts; o++ {
			ords = append(ords, o)
		}
		list, err := c.Receipts(ctx, id, ords...)
		if err != nil {
			return key, n, err
		}
		for _, it := range list.Receipts {
			if it.Receipt == "" {
				continue // the last checkpoint itself: none covers it
			}
			name := filepath.Join(dir, ReceiptsDir, strconv.FormatUint(it.Ordinal, 10)+".tlog-proof")
			if err := os.WriteFile(name, []byte(it.Receipt), 0o640); err != nil {
				return key, n, err
			}
			n++
		}
	}
	return key, n, nil
}
