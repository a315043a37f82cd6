package readmodel

import (
	"context"
	"errors"
	"testing"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/wire"
)

// A receipt read is refused before it reads anything when the
// deliberation's log is past the bound (limit.receipt_log): a hostile
// publisher who fills a deliberation with junk cannot make a reader's
// receipt request hold a tree of its size.
func TestReceipts_LogBound(t *testing.T) {
	r := runner.NewInMemory(1, projector.Options{})
	const id = "019ad3f0-0000-7000-8000-0000000000ab"
	r.ApplyInMemory(projector.Msg{Seq: 1, Subject: wire.ControlSubject(id), Data: []byte(`{"op":"open","charter":{"title":"t"}}`)})
	for seq := uint64(2); seq <= 5; seq++ {
		r.ApplyInMemory(projector.Msg{Seq: seq, Subject: wire.ArtifactSubject(id, "junk"), Data: []byte("junk")})
	}
	read := 0
	q := New(Config{Runner: r, MaxReceiptLog: 4, Receipts: func(context.Context, string, []uint64) (map[uint64][]byte, map[uint64]error, error) {
		read++
		return map[uint64][]byte{1: []byte("r")}, nil, nil
	}})
	_, err := q.Receipts(context.Background(), id, []uint64{1}, nil)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeReceiptLogTooLarge || read != 0 {
		t.Fatalf("a log of 5 past a bound of 4: %v, %d reads", err, read)
	}
	q = New(Config{Runner: r, MaxReceiptLog: 5, Receipts: func(context.Context, string, []uint64) (map[uint64][]byte, map[uint64]error, error) {
		read++
		return map[uint64][]byte{1: []byte("r")}, nil, nil
	}})
	if l, err := q.Receipts(context.Background(), id, []uint64{1}, nil); err != nil || read != 1 || l.Receipts[0].Receipt != "r" {
		t.Fatalf("a log at the bound: %+v %v", l, err)
	}
}
