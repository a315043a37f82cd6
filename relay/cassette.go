package relay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A cassette records each participant call (the request it stands for, the
// response, the usage; never a key or an auth header) under the hash of the
// request, and replays them with no network: --record DIR, --replay DIR.
// The request is the participant's configuration (without secrets) and the
// turn, less what changes from run to run without changing the call (the
// deliberation id, stream positions). A replay miss is an error that names
// the nearest recording and what differs.
type cassette struct {
	inner       Participant // nil when replaying
	dir         string
	participant string
	fingerprint map[string]any
}

type cassetteEntry struct {
	Key       string           `json:"key"`
	Request   json.RawMessage  `json:"request"`
	Output    string           `json:"output"`
	Model     map[string]any   `json:"model,omitempty"`
	Usage     map[string]int64 `json:"usage,omitempty"`
	Truncated bool             `json:"truncated,omitempty"`
	LatencyMS int64            `json:"latency_ms"`
}

func newCassette(inner Participant, dir string, p ParticipantConfig) *cassette {
	fp := map[string]any{"id": p.ID, "adapter": p.Adapter, "role": p.Role, "instructions": p.Instructions,
		"base_url": p.BaseURL, "model": p.Model, "max_tokens": p.MaxTokens, "response_format": p.ResponseFormat,
		"command": p.Command, "script": p.Script}
	if p.Temperature != nil {
		fp["temperature"] = *p.Temperature
	}
	if p.Seed != nil {
		fp["seed"] = *p.Seed
	}
	return &cassette{inner: inner, dir: dir, participant: p.ID, fingerprint: fp}
}

func (c *cassette) request(t Turn) ([]byte, string) {
	t.Deliberation = ""
	ctx := make([]ContextArtifact, len(t.Context))
	for i, a := range t.Context {
		ctx[i] = ContextArtifact{Participant: a.Participant, Artifact: a.Artifact}
	}
	t.Context = ctx
	b, _ := json.Marshal(map[string]any{"participant": c.fingerprint, "turn": t})
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:])
}

func (c *cassette) path(key string) string {
	return filepath.Join(c.dir, c.participant+"-"+key[:32]+".json")
}

func (c *cassette) Take(ctx context.Context, t Turn) (Response, error) {
	req, key := c.request(t)
	if c.inner == nil {
		b, err := os.ReadFile(c.path(key))
		if err != nil {
			return Response{}, c.miss(req, key, t)
		}
		var e cassetteEntry
		if err := json.Unmarshal(b, &e); err != nil {
			return Response{}, fmt.Errorf("relay: replay: %s: %w", c.path(key), err)
		}
		return Response{Output: []byte(e.Output), Model: e.Model, Usage: e.Usage, Truncated: e.Truncated,
			Latency: time.Duration(e.LatencyMS) * time.Millisecond}, nil
	}
	res, err := c.inner.Take(ctx, t)
	if err != nil {
		return res, err // failed calls are not recorded: a replay calls again
	}
	e := cassetteEntry{Key: "sha256:" + key, Request: req, Output: string(res.Output), Model: res.Model, Usage: res.Usage,
		Truncated: res.Truncated, LatencyMS: res.Latency.Milliseconds()}
	b, _ := json.MarshalIndent(e, "", " ")
	if err := os.MkdirAll(c.dir, 0o750); err != nil {
		return res, err
	}
	if err := os.WriteFile(c.path(key), b, 0o640); err != nil {
		return res, fmt.Errorf("relay: record: %w", err)
	}
	return res, nil
}

// ErrReplayMiss is returned, wrapped, when a replay has no recording of a
// call; the run stops (a replay must not diverge silently).
var ErrReplayMiss = errors.New("relay: replay miss")

// miss explains a replay miss against the participant's nearest recording.
func (c *cassette) miss(req []byte, key string, t Turn) error {
	files, _ := filepath.Glob(filepath.Join(c.dir, c.participant+"-*.json"))
	msg := fmt.Sprintf("no recording of %s, round %d (request sha256:%s)", c.participant, t.Round, key)
	if len(files) == 0 {
		return fmt.Errorf("%w: %s; the cassette has none of this participant", ErrReplayMiss, msg)
	}
	var want map[string]any
	json.Unmarshal(req, &want)
	best, bestDiff := "", ""
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var e cassetteEntry
		if json.Unmarshal(b, &e) != nil {
			continue
		}
		var got map[string]any
		json.Unmarshal(e.Request, &got)
		d := firstDiff("", got, want)
		if best == "" || (!strings.Contains(d, "turn.round") && strings.Contains(bestDiff, "turn.round")) {
			best, bestDiff = f, d
		}
	}
	return fmt.Errorf("%w: %s; nearest recording %s differs at %s", ErrReplayMiss, msg, filepath.Base(best), bestDiff)
}

// firstDiff names the first path where two decoded JSON values differ.
func firstDiff(path string, a, b any) string {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return path
		}
		for k, v := range x {
			if d := firstDiff(path+"."+k, v, y[k]); d != "" {
				return d
			}
		}
		for k := range y {
			if _, ok := x[k]; !ok {
				return path + "." + k
			}
		}
		return ""
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return fmt.Sprintf("%s (length %d, now %d)", path, len(x), lenOf(b))
		}
		for i := range x {
			if d := firstDiff(fmt.Sprintf("%s[%d]", path, i), x[i], y[i]); d != "" {
				return d
			}
		}
		return ""
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		return fmt.Sprintf("%s (recorded %v, now %v)", strings.TrimPrefix(path, "."), a, b)
	}
	return ""
}

func lenOf(v any) int {
	if x, ok := v.([]any); ok {
		return len(x)
	}
	return -1
}
