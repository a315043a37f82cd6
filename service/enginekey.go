package service

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/signing"
)

// EngineKeyFile is the engine's key in its data directory, when
// Config.EngineKey names none: an nkeys user seed ("SU…", mode 0600),
// created at the first start. The engine signs its supervisor's
// emissions, the resolutions it publishes for principals and the
// checkpoints of every deliberation's log with it (docs/VERIFY.md).
const EngineKeyFile = "engine.nk"

// loadEngineKey reads the engine's key from path, creating it (a new
// key, mode 0600) when create is set and nothing is there.
func loadEngineKey(path string, create bool) (nkeys.KeyPair, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, err
		}
		seed, err := kp.Seed()
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("service: the engine's key %s: %w", path, err)
		}
		_, werr := f.Write(append(seed, '\n'))
		if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
			return nil, fmt.Errorf("service: the engine's key %s: %w", path, err)
		}
		return kp, nil
	}
	if err != nil {
		return nil, fmt.Errorf("service: the engine's key: %w", err)
	}
	kp, err := signing.KeyPair(string(bytes.TrimSpace(b)))
	if err != nil {
		return nil, fmt.Errorf("service: the engine's key %s: %w (an nkeys user seed, from engine keygen)", path, err)
	}
	return kp, nil
}
