package service

import (
	"context"
	"strings"

	"github.com/parley-engine/parley/health"
	"github.com/parley-engine/parley/ledger"
)

// watchSet is the watches of the record's streams, the engine's first:
// one report and one halt for them all. A layout of one stream has one.
type watchSet []*health.Watch

// Halted is the first watch's error that has halted the engine (nil:
// none has).
func (ws watchSet) Halted() error {
	for _, w := range ws {
		if err := w.Halted(); err != nil {
			return err
		}
	}
	return nil
}

// Report is the first watch's report, with the others' problems and lag:
// healthy only when every stream is.
func (ws watchSet) Report(ctx context.Context) health.Health {
	h := ws[0].Report(ctx)
	for _, w := range ws[1:] {
		o := w.Report(ctx)
		h.OK = h.OK && o.OK
		h.Halted = h.Halted || o.Halted
		h.Lag += o.Lag
		h.Problems = append(h.Problems, o.Problems...)
		h.Error = strings.Join(nonEmpty(h.Error, o.Error), "; ")
	}
	return h
}

func nonEmpty(ss ...string) []string {
	out := ss[:0]
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// streamNames are the record's streams' names when there are several
// (api.EngineInfo.Streams), none for one.
func streamNames(l ledger.Layout) []string {
	if l.N() == 1 {
		return nil
	}
	return l.Streams()
}
