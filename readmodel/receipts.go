package readmodel

import (
	"context"
	"errors"
	"strconv"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/projector"
)

// ReceiptsFunc rebuilds a deliberation's log from the stream and returns
// the receipts of the messages of the ordinals asked, or each one's error
// (archive.Receipts, which the assembly gives).
type ReceiptsFunc func(ctx context.Context, id string, ordinals []uint64) (map[uint64][]byte, map[uint64]error, error)

// receiptSlots bounds the receipt reads at once: each reads the whole
// deliberation from the stream.
const receiptSlots = 2

// Receipts returns the receipts of the messages of deliberation id with
// the ordinals asked (at most api.MaxReceipts): each in the first
// checkpoint of the deliberation's log that covers it. admit (nil:
// always) admits the read, which reads the deliberation's whole record.
func (q *Queries) Receipts(ctx context.Context, id string, ordinals []uint64, admit func() (*Ticket, error)) (api.ReceiptList, error) {
	out := api.ReceiptList{Deliberation: id, Receipts: []api.ReceiptItem{}}
	switch {
	case q.receipts == nil:
		return out, &api.Error{Kind: api.KindUnavailable, Code: api.CodeUnavailable, Message: "this engine gives no receipts"}
	case len(ordinals) == 0:
		return out, &api.Error{Kind: api.KindInvalid, Code: api.CodeBadRequest, Message: "no ordinal asked"}
	case len(ordinals) > api.MaxReceipts:
		return out, &api.Error{Kind: api.KindInvalid, Code: api.CodeBadRequest, Message: "at most " + strconv.Itoa(api.MaxReceipts) + " ordinals a request"}
	}
	var size uint64
	if !q.r.ReadDeliberation(id, func(d *projector.Deliberation) { size = d.LogSize() }) {
		return out, q.missing(id)
	}
	if size > q.maxReceiptLog {
		return out, &api.Error{Kind: api.KindUnprocessable, Code: api.CodeReceiptLogTooLarge,
			Message: "the deliberation's record holds " + strconv.FormatUint(size, 10) + " messages, past the " + strconv.FormatUint(q.maxReceiptLog, 10) + " a receipt read rebuilds: export it and audit the recording"}
	}
	if admit != nil {
		t, err := admit()
		if err != nil {
			return out, err
		}
		t.release()
	}
	select {
	case q.receiptSem <- struct{}{}:
		defer func() { <-q.receiptSem }()
	case <-ctx.Done():
		return out, ctx.Err()
	}
	got, errs, err := q.receipts(ctx, id, ordinals)
	if err != nil {
		return out, err
	}
	for _, o := range ordinals {
		it := api.ReceiptItem{Ordinal: o}
		if r, ok := got[o]; ok {
			it.Receipt = string(r)
		} else if e := errs[o]; errors.Is(e, projector.ErrNotCovered) {
			it.Code, it.Message = api.CodeReceiptNotCovered, "no checkpoint covers the message yet: the engine publishes one after the next judgment and at the end"
		} else {
			// archive.ErrNoOrdinal
			it.Code, it.Message = api.CodeReceiptNoOrdinal, "no message of the record has ordinal "+strconv.FormatUint(o, 10)
		}
		out.Receipts = append(out.Receipts, it)
	}
	return out, nil
}
