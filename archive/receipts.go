package archive

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/termination"
)

// Receipts folds deliberation id from the stream as Export does, rebuilds
// its log, and returns the receipt (docs/VERIFY.md, "Receipts") of each
// message asked for by its ordinal (1 for the open): in the first
// checkpoint that covers it. An ordinal that is not in the record, or that
// no checkpoint covers yet, gets an error of its own
// (projector.ErrNotCovered, ErrNoOrdinal) instead.
func Receipts(ctx context.Context, js jetstream.JetStream, id string, ordinals []uint64, verify provenance.Verifier) (map[uint64][]byte, map[uint64]error, error) {
	want := map[uint64]bool{}
	for _, o := range ordinals {
		if o > 0 {
			want[o-1] = true
		}
	}
	b := projector.NewLogBuilder(func(i uint64) bool { return want[i] })
	p := projector.New(projector.Options{Rules: termination.Rules{}})
	n, err := messages(ctx, js, id, func(m streamMsg) error {
		msg := m.msg
		p.Prepare(&msg, verify)
		b.Add(msg, p.Apply(msg))
		return nil
	})
	if err == nil && n == 0 {
		err = ErrNoDeliberation
	}
	if err != nil {
		return nil, nil, err
	}
	out, errs := map[uint64][]byte{}, map[uint64]error{}
	for _, o := range ordinals {
		if o == 0 || o > b.Tree.Size() {
			errs[o] = ErrNoOrdinal
			continue
		}
		r, err := b.Receipt(id, o-1)
		if err != nil {
			errs[o] = err
			continue
		}
		out[o] = r
	}
	return out, errs, nil
}

// ErrNoOrdinal: no message of the deliberation's record has the ordinal.
var ErrNoOrdinal = errors.New("archive: no message of the record has that ordinal")
