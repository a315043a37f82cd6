package client

import (
	"context"
	"encoding/json"
	"time"

	"github.com/parley-engine/parley/api"
)

// Receipts asks the engine for the receipts of messages of deliberation
// id by their ordinals (at most api.MaxReceipts): each a C2SP tlog-proof
// of the message in the first checkpoint of the deliberation's log that
// covers it, or why there is none (api.CodeReceiptNotCovered: ask again
// after the next judgment or the end). Verify one with
// tlog.VerifyReceipt and the engine's key (EngineKey); docs/VERIFY.md.
func (c *Client) Receipts(ctx context.Context, id string, ordinals ...uint64) (api.ReceiptList, error) {
	var out api.ReceiptList
	b, err := c.requestWithin(ctx, "receipts", "receipts", max(c.opts.VerifyTimeout, 30*time.Second),
		c.fresh(map[string]any{"id": id, "ordinals": ordinals}, 0))
	if err != nil {
		return out, err
	}
	return out, json.Unmarshal(b, &out)
}

// EngineKey asks the engine for its public key: what signs its
// supervisor's emissions, its principals' resolutions and its
// checkpoints.
func (c *Client) EngineKey(ctx context.Context) (string, error) {
	var out api.EngineInfo
	b, err := c.request(ctx, "engine", "engine", map[string]any{})
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return "", err
	}
	return out.Key, nil
}
