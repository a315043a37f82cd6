package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"
)

// LocalCredentials returns the option that connects to a local engine's
// embedded default as its participant user, read from the credentials
// file (credentials.json) in the engine's data directory dataDir
// ("./parley-data" when empty): there a client without credentials may
// only read. It fails when the file is missing (no engine runs with that
// data directory), unreadable (another user's engine: its mode is 0600),
// or names no participant user (the engine runs on a NATS configuration
// of its own, whose users are given out by its operator).
func LocalCredentials(dataDir string) (nats.Option, error) {
	if dataDir == "" {
		dataDir = "./parley-data"
	}
	path := filepath.Join(dataDir, "credentials.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("client: %s does not exist: is an engine running with --data %s?", path, dataDir)
	}
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	var c struct {
		User     string `json:"nats_participant_user"`
		Password string `json:"nats_participant_password"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("client: %s: %w", path, err)
	}
	if c.User == "" || c.Password == "" {
		return nil, fmt.Errorf("client: %s names no participant user: that engine does not own its NATS server's users; connect with the credentials its operator gave you", path)
	}
	return nats.UserInfo(c.User, c.Password), nil
}
