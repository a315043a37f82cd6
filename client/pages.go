package client

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/wire"
)

// ListOptions select what a listing gives and how it is asked for.
type ListOptions struct {
	// Status keeps the deliberations of these statuses (none: any).
	Status []api.Status
	// PageSize is how many items each request asks for (0:
	// wire.MaxPageLimit, the most the engine gives at once).
	PageSize int
}

// pageReq is a page request of the micro service.
type pageReq struct {
	ID     string `json:"id,omitempty"`
	Limit  int    `json:"limit"`
	Cursor string `json:"cursor,omitempty"`
	Status string `json:"status,omitempty"`
	// MinPosition: read-your-writes, as every read carries it (fresh).
	MinPosition uint64 `json:"min_position,omitempty"`
}

func (o ListOptions) req(id, cursor string) pageReq {
	r := pageReq{ID: id, Limit: o.PageSize, Cursor: cursor}
	if r.Limit <= 0 {
		r.Limit = wire.MaxPageLimit
	}
	if len(o.Status) > 0 {
		s := make([]string, len(o.Status))
		for i, st := range o.Status {
			s[i] = string(st)
		}
		r.Status = strings.Join(s, ",")
	}
	return r
}

// page asks a listing endpoint for one page and decodes it into v; it
// returns the cursor of the next page ("" at the end).
//
// A page carries the client's last acknowledged publish as min_position,
// as every read does: an engine still catching up (one that joined a fleet
// a moment ago) waits for it, or answers projection.behind and the read
// is retried, instead of answering that the deliberation does not exist.
func (c *Client) page(ctx context.Context, op, endpoint string, req pageReq, v any) (string, error) {
	if !c.opts.NoReadYourWrites {
		req.MinPosition = c.seenFor(req.ID)
	}
	msg, err := c.requestMsg(ctx, op, endpoint, req)
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(msg.Data, v); err != nil {
		return "", fmt.Errorf("client: %s: %w", op, err)
	}
	return msg.Header.Get(wire.NextCursorHeader), nil
}

// DeliberationPage asks for one page of the deliberations, newest opened
// first, after cursor ("" for the first page), and returns it with the
// cursor of the next page ("" at the end). A cursor stays good while
// deliberations open: each deliberation there when the first page was read
// is on exactly one page.
func (c *Client) DeliberationPage(ctx context.Context, opts ListOptions, cursor string) ([]api.Summary, string, error) {
	var out []api.Summary
	next, err := c.page(ctx, "deliberations", "deliberations", opts.req("", cursor), &out)
	return out, next, err
}

// ArtifactPage asks for one page of a deliberation's artifacts, in stream
// order, after cursor ("" for the first page).
func (c *Client) ArtifactPage(ctx context.Context, id string, opts ListOptions, cursor string) ([]api.ArtifactEntry, string, error) {
	var out []api.ArtifactEntry
	next, err := c.page(ctx, "artifacts", "artifacts", opts.req(id, cursor), &out)
	return out, next, err
}

// RejectionPage asks for one page of a deliberation's kept rejections, in
// stream order, with their counts, after cursor ("" for the first page);
// the cursor of the next page is in NextCursor.
func (c *Client) RejectionPage(ctx context.Context, id string, opts ListOptions, cursor string) (api.RejectionList, error) {
	var out api.RejectionList
	_, err := c.page(ctx, "rejections", "rejections", opts.req(id, cursor), &out)
	return out, err
}

// Deliberations lists every deliberation, newest opened first, page by
// page: it asks for the next page when the loop has taken the last one,
// and stops when the loop breaks. An error is the last thing it yields.
func (c *Client) Deliberations(ctx context.Context, opts ListOptions) iter.Seq2[api.Summary, error] {
	return pages(func(cursor string) ([]api.Summary, string, error) {
		return c.DeliberationPage(ctx, opts, cursor)
	})
}

// Artifacts lists a deliberation's artifacts in stream order, page by page.
func (c *Client) Artifacts(ctx context.Context, id string, opts ListOptions) iter.Seq2[api.ArtifactEntry, error] {
	return pages(func(cursor string) ([]api.ArtifactEntry, string, error) {
		return c.ArtifactPage(ctx, id, opts, cursor)
	})
}

// Rejections lists a deliberation's kept rejections in stream order, page
// by page.
func (c *Client) Rejections(ctx context.Context, id string, opts ListOptions) iter.Seq2[api.Rejection, error] {
	return pages(func(cursor string) ([]api.Rejection, string, error) {
		l, err := c.RejectionPage(ctx, id, opts, cursor)
		return l.Rejections, l.NextCursor, err
	})
}

func pages[T any](fetch func(cursor string) ([]T, string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		cursor := ""
		for {
			page, next, err := fetch(cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, x := range page {
				if !yield(x, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			cursor = next
		}
	}
}
