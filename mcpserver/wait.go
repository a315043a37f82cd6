package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/wire"
)

// DefaultMaxWait is how long wait_artifacts waits at most, unless
// Options.MaxWait says otherwise.
const DefaultMaxWait = 30 * time.Second

// maxWaitLimit is the most wait_artifacts returns at once.
const maxWaitLimit = 100

type waitIn struct {
	Deliberation string `json:"deliberation"`
	After        uint64 `json:"after,omitempty" jsonschema:"return the artifacts whose ordinal is greater than this (0: from the first); pass the next_after of the previous answer"`
	TimeoutSec   int    `json:"timeout_seconds,omitempty" jsonschema:"how long to wait for one, in seconds (default and most: the server's maximum, 30 unless configured)"`
	Limit        int    `json:"limit,omitempty" jsonschema:"the most artifacts to return (default 20, at most 100)"`
}

// WaitedArtifact is one artifact in a wait_artifacts answer.
type WaitedArtifact struct {
	Ordinal     uint64         `json:"ordinal"`
	Position    uint64         `json:"position"`
	Participant string         `json:"participant"`
	Type        string         `json:"artifact_type"`
	ArtifactID  string         `json:"artifact_id"`
	Artifact    map[string]any `json:"artifact" jsonschema:"the artifact, as published"`
}

type waitOut struct {
	Artifacts []WaitedArtifact `json:"artifacts,omitempty"`
	// NextAfter is the ordinal to wait after next time.
	NextAfter uint64 `json:"next_after,omitempty" jsonschema:"the ordinal to pass as after next time"`
	More      bool   `json:"more,omitempty" jsonschema:"more artifacts are there already: ask again at once"`
	TimedOut  bool   `json:"timed_out,omitempty" jsonschema:"no artifact came within the timeout"`
	Status    string `json:"status,omitempty" jsonschema:"the deliberation's status: once it is completed, cancelled, deadlock or exhausted, no artifact will be admitted any more"`
	Verdict
}

func (t *tools) wait(ctx context.Context, _ *mcp.CallToolRequest, in waitIn) (waitOut, Verdict) {
	out, err := t.waitArtifacts(ctx, in)
	if err != nil {
		out.Verdict = verdictOf(err)
	}
	return out, out.Verdict
}

func (t *tools) waitArtifacts(ctx context.Context, in waitIn) (waitOut, error) {
	out := waitOut{NextAfter: in.After}
	timeout := t.maxWait
	switch {
	case in.TimeoutSec < 0:
		return out, refuse(CodeInvalidArgument, "timeout_seconds %d is negative", in.TimeoutSec)
	case in.TimeoutSec > 0 && time.Duration(in.TimeoutSec)*time.Second < timeout:
		timeout = time.Duration(in.TimeoutSec) * time.Second
	}
	limit := 20
	switch {
	case in.Limit < 0 || in.Limit > maxWaitLimit:
		return out, refuse(CodeInvalidArgument, "limit %d is not within 1..%d", in.Limit, maxWaitLimit)
	case in.Limit > 0:
		limit = in.Limit
	}
	if !wire.ValidDeliberation(in.Deliberation) {
		return out, refuse(CodeInvalidArgument, "deliberation %q is not a deliberation id (a UUID in lowercase)", in.Deliberation)
	}
	c, err := t.client()
	if err != nil {
		return out, err
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, err := c.State(ctx, in.Deliberation)
	if err != nil {
		return out, err
	}
	var rd *ledger.Reader
	defer func() {
		if rd != nil {
			rd.Stop()
		}
	}()
	for {
		out.Status = string(v.Status)
		found, more, err := t.artifactsAfter(ctx, c, in.Deliberation, in.After, limit)
		if err != nil {
			return out, err
		}
		if len(found) > 0 || v.Status.Terminal() {
			out.Artifacts, out.More = found, more
			if len(found) > 0 {
				out.NextAfter = found[len(found)-1].Ordinal
			}
			out.Verdict = Verdict{Outcome: OutcomeOK, Position: v.Position}
			return out, nil
		}
		// Nothing yet: wait for the deliberation's next message.
		if rd == nil {
			if rd, err = readDeliberation(wctx, t.nc, in.Deliberation, v.Position+1); err != nil {
				if wctx.Err() != nil {
					break
				}
				return out, err
			}
		}
		msg, err := rd.Next(wctx)
		if err != nil {
			if wctx.Err() != nil {
				break
			}
			return out, err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return out, err
		}
		if meta.NumPending > 0 {
			continue // judge once caught up
		}
		if v, err = c.WaitPosition(wctx, in.Deliberation, ledger.MsgPosition(meta)); err != nil {
			if wctx.Err() != nil {
				break
			}
			return out, err
		}
	}
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	out.TimedOut = true
	out.Verdict = Verdict{Outcome: OutcomeOK, Position: v.Position}
	return out, nil
}

// artifactsAfter lists the artifacts of deliberation id whose ordinal is
// greater than after, the first limit of them with their content, and
// whether there are more.
func (t *tools) artifactsAfter(ctx context.Context, c *client.Client, id string, after uint64, limit int) ([]WaitedArtifact, bool, error) {
	var found []WaitedArtifact
	for e, err := range c.Artifacts(ctx, id, client.ListOptions{}) {
		if err != nil {
			return nil, false, err
		}
		if e.Ordinal <= after {
			continue
		}
		if len(found) == limit {
			return found, true, nil
		}
		found = append(found, WaitedArtifact{Ordinal: e.Ordinal, Position: e.Position, Participant: e.Participant, Type: e.Type, ArtifactID: e.ArtifactID.String()})
	}
	for i := range found {
		b, ok, err := c.Artifact(ctx, id, found[i].ArtifactID)
		if err != nil {
			return nil, false, err
		}
		if ok {
			json.Unmarshal(b, &found[i].Artifact)
		}
	}
	return found, false, nil
}

// DeliberationURI is the URI of a deliberation's resource.
func DeliberationURI(id string) string { return deliberationPrefix + id }

const deliberationPrefix = "parley://deliberations/"

// maxWatched bounds the deliberations whose resources are subscribed to
// at once.
const maxWatched = 256

// readResource answers a read of parley://deliberations/{id}: the
// deliberation's state, as get_state gives it.
func (t *tools) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, ok := strings.CutPrefix(uri, deliberationPrefix)
	if !ok || !wire.ValidDeliberation(id) {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	c, err := t.client()
	if err != nil {
		return nil, err
	}
	v, err := c.State(ctx, id)
	var se *client.ServiceError
	if errors.As(err, &se) && se.Code == api.CodeNotFound {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}

// watchers tell subscribers of a deliberation's resource when it moves.
type watchers struct {
	mu sync.Mutex
	m  map[string]*watcher // by URI
}

// A watcher holds the sessions subscribed to one deliberation's resource.
// A session that ends without unsubscribing is dropped at the next
// message: the watcher stops when it has none left.
type watcher struct {
	sessions map[*mcp.ServerSession]bool
	stop     context.CancelFunc
}

func (t *tools) subscribe(_ context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	id, ok := strings.CutPrefix(uri, deliberationPrefix)
	if !ok || !wire.ValidDeliberation(id) {
		return fmt.Errorf("%s is not a deliberation's resource (%s<id>)", uri, deliberationPrefix)
	}
	t.watch.mu.Lock()
	defer t.watch.mu.Unlock()
	if w := t.watch.m[uri]; w != nil {
		w.sessions[req.Session] = true
		return nil
	}
	if len(t.watch.m) >= maxWatched {
		return fmt.Errorf("this server already watches %d deliberations, its most", maxWatched)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rd, err := readDeliberation(ctx, t.nc, id, 0)
	if err != nil {
		cancel()
		return err
	}
	if t.watch.m == nil {
		t.watch.m = map[string]*watcher{}
	}
	t.watch.m[uri] = &watcher{sessions: map[*mcp.ServerSession]bool{req.Session: true}, stop: cancel}
	go t.notify(ctx, rd, id, uri)
	return nil
}

// notify sends resource-updated notifications for uri each time the
// engine has projected new messages of deliberation id, until ctx ends.
func (t *tools) notify(ctx context.Context, rd *ledger.Reader, id, uri string) {
	defer rd.Stop()
	c, err := t.client()
	if err != nil {
		return
	}
	for {
		msg, err := rd.Next(ctx)
		if err != nil {
			return
		}
		meta, err := msg.Metadata()
		if err != nil || meta.NumPending > 0 {
			continue
		}
		if _, err := c.WaitPosition(ctx, id, ledger.MsgPosition(meta)); err != nil && ctx.Err() != nil {
			return
		}
		if !t.stillWatched(uri) {
			return
		}
		t.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
	}
}

// stillWatched drops the sessions of uri's watcher that have ended, and
// stops the watcher when none is left.
func (t *tools) stillWatched(uri string) bool {
	live := map[*mcp.ServerSession]bool{}
	for ss := range t.srv.Sessions() {
		live[ss] = true
	}
	t.watch.mu.Lock()
	defer t.watch.mu.Unlock()
	w := t.watch.m[uri]
	if w == nil {
		return false
	}
	for ss := range w.sessions {
		if !live[ss] {
			delete(w.sessions, ss)
		}
	}
	if len(w.sessions) == 0 {
		w.stop()
		delete(t.watch.m, uri)
		return false
	}
	return true
}

func (t *tools) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	t.watch.mu.Lock()
	defer t.watch.mu.Unlock()
	w := t.watch.m[req.Params.URI]
	if w == nil {
		return nil
	}
	delete(w.sessions, req.Session)
	if len(w.sessions) == 0 {
		w.stop()
		delete(t.watch.m, req.Params.URI)
	}
	return nil
}

// readDeliberation reads deliberation id's messages from position from
// in the record's stream, whichever layout the server holds
// (ledger.Locate).
func readDeliberation(ctx context.Context, nc *nats.Conn, id string, from uint64) (*ledger.Reader, error) {
	l, err := ledger.LocateConn(ctx, nc)
	if err != nil {
		return nil, err
	}
	return l.Read(ctx, nc, l.Filter(id), from)
}
