package service

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// CredentialsFile is the name of the file, in the data directory, where a
// running engine writes the credentials it generated (mode 0600; removed
// when the engine stops).
const CredentialsFile = "credentials.json"

// SnapshotFile is where the projection's snapshots are kept in the data
// directory, one file per shard (SnapshotFile.<i>-of-<n>); those of the
// partitioned record have the stream's name before it
// (PARLEY_0000_1023.projection.snapshot.<i>-of-<n>: natsconn.SnapshotName).
const SnapshotFile = "projection.snapshot"

// Credentials are what a running engine generated at start, for its
// operator: the NATS operator user of the embedded default (which may
// publish on every parley subject, as engine import needs, but not delete,
// purge or update the stream) and the HTTP token the engine drew. Whoever
// can read the file holds these powers: its 0600 mode is the boundary.
type Credentials struct {
	// NATSURL, NATSUser and NATSPassword are set only on the embedded
	// default (without --nats-config or --nats the engine owns the
	// server's users).
	NATSURL      string `json:"nats_url,omitempty"`
	NATSUser     string `json:"nats_user,omitempty"`
	NATSPassword string `json:"nats_password,omitempty"`
	// NATSParticipantUser and NATSParticipantPassword are the participant
	// user of the embedded default: what a local participant connects
	// with to publish (a client without credentials may only read). The
	// password is kept across restarts (ParticipantSecretFile).
	NATSParticipantUser     string `json:"nats_participant_user,omitempty"`
	NATSParticipantPassword string `json:"nats_participant_password,omitempty"`
	// HTTPURL is the API's address; HTTPToken the token the engine drew
	// and HTTPParticipant the participant it stands for (none when the
	// tokens were given with --http-token).
	HTTPURL         string `json:"http_url"`
	HTTPToken       string `json:"http_token,omitempty"`
	HTTPParticipant string `json:"http_participant,omitempty"`
	// SignInURL is BindURL with the drawn token: the address that signs a
	// browser in. It is here, and on a terminal, and never in a log.
	SignInURL string `json:"sign_in_url,omitempty"`
	// EngineKey is the engine's public key ("U…"): what signs its
	// supervisor's emissions, its principals' resolutions and its
	// checkpoints, and what an auditor trusts (engine audit
	// --trusted-key).
	EngineKey string `json:"engine_key,omitempty"`
}

// ParticipantSecretFile holds, in the data directory, the password of
// the embedded default's participant user (mode 0600), drawn at the first
// start and kept, so that participants reconnect across restarts.
const ParticipantSecretFile = "participant.secret"

// loadSecret reads the secret in path, drawing and writing a new one
// (mode 0600) when there is none.
func loadSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		s := strings.TrimSpace(string(b))
		if len(s) < 16 {
			return "", fmt.Errorf("service: %s holds no secret of at least 16 characters (remove it to draw a new one)", path)
		}
		return s, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("service: %w", err)
	}
	s := secret()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("service: %w", err)
	}
	_, werr := f.WriteString(s + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		return "", fmt.Errorf("service: %s: %w", path, err)
	}
	return s, nil
}

// BindURL is the /bind page's address, with the token when there is one:
// opening it in a browser signs the browser in (the engine sets a cookie
// and drops the token from the address).
func (c Credentials) BindURL() string {
	u := c.HTTPURL + "/bind"
	if c.HTTPToken != "" {
		u += "?token=" + url.QueryEscape(c.HTTPToken)
	}
	return u
}

// ErrNoCredentials is returned, wrapped, when a data directory holds no
// credentials file (no engine runs there, or it was started before this
// file existed).
var ErrNoCredentials = errors.New("service: no credentials file")

// ReadCredentials reads the credentials file of the engine whose data
// directory is dir.
func ReadCredentials(dir string) (*Credentials, error) {
	path := filepath.Join(dir, CredentialsFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s (is an engine running with --data %s?)", ErrNoCredentials, path, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("service: credentials: %w", err)
	}
	var c Credentials
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("service: credentials %s: %w", path, err)
	}
	return &c, nil
}

// writeCredentials writes c to dir's credentials file, readable by its
// owner only: a fresh file renamed over the old one, so that the secrets
// are never in a file of wider mode.
func writeCredentials(dir string, c Credentials) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".credentials-*") // mode 0600
	if err != nil {
		return fmt.Errorf("service: credentials: %w", err)
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("service: credentials: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("service: credentials: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("service: credentials: %w", err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, CredentialsFile)); err != nil {
		return fmt.Errorf("service: credentials: %w", err)
	}
	return nil
}

// secret returns 256 random bits in hex: the HTTP token the engine draws.
func secret() string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}
