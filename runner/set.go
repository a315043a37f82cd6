package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"log/slog"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
)

// NewSet returns a runner over every stream of a partitioned layout of
// several streams: parts[k] is the runner of the layout's stream of
// index k (New over that stream). A deliberation is in one stream, so
// each part folds its own deliberations and the set routes a read to the
// part that holds it; a position names its stream (ledger.Layout.Position),
// so a wait for one is the wait of that stream's part. Reads that span
// every deliberation merge the parts' answers, in order of position: by
// stream, then by sequence.
//
// The set's Run runs every part and ends when one ends; its supervisor
// (NewSupervisor) judges every part's deliberations.
func NewSet(parts []*Runner) (*Runner, error) {
	if len(parts) < 2 {
		return nil, errors.New("runner: a set has at least two parts")
	}
	l := parts[0].layout
	if l.N() != len(parts) {
		return nil, fmt.Errorf("runner: %d parts for a layout of %d streams", len(parts), l.N())
	}
	for k, p := range parts {
		if p.layout != l || p.base != l.Position(k, 0) {
			return nil, fmt.Errorf("runner: part %d reads %s, not the stream %s of the layout", k, p.Stream(), l.StreamAt(k))
		}
	}
	return &Runner{layout: l, parts: parts, clock: parts[0].clock, log: parts[0].log, consumerPrefix: parts[0].consumerPrefix}, nil
}

// NewOwnedSet returns a set over the n streams of layout l whose parts
// come and go: the engine holds no stream until Attach gives it one's
// runner, and Detach takes it away (engine serve --own-streams: the
// engines share the streams by leases). Reads of a deliberation of a
// stream not held answer ErrNotHeld; the set's Run waits for its
// context (each part is run by whoever attached it).
func NewOwnedSet(l ledger.Layout, log *slog.Logger) (*Runner, error) {
	if l.N() < 2 {
		return nil, errors.New("runner: a set has at least two streams")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runner{layout: l, parts: make([]*Runner, l.N()), owned: true, clock: time.Now, log: log}, nil
}

// ErrNotHeld is returned, wrapped, for a deliberation or a position of a
// stream whose runner the set does not hold (NewOwnedSet): another engine
// owns it, or will once its lease is taken.
var ErrNotHeld = errors.New("runner: this engine does not hold the stream")

func (r *Runner) notHeld(id string) error {
	return fmt.Errorf("%w %s (deliberation %s)", ErrNotHeld, r.layout.StreamOf(id), id)
}

func (r *Runner) notHeldAt(position uint64) error {
	k, _, _ := r.layout.Split(position)
	return fmt.Errorf("%w %s (position %d)", ErrNotHeld, r.layout.StreamAt(min(k, r.layout.N()-1)), position)
}

// Attach gives an owned set the runner of its stream of index k (New
// over that stream); it replaces none: a stream held is detached first.
func (r *Runner) Attach(k int, p *Runner) error {
	if !r.owned {
		return errors.New("runner: Attach on a set that is not owned (NewOwnedSet)")
	}
	if k < 0 || k >= len(r.parts) || p.layout != r.layout || p.base != r.layout.Position(k, 0) {
		return fmt.Errorf("runner: the runner of %s is not the stream %d of the layout", p.Stream(), k)
	}
	r.partsMu.Lock()
	defer r.partsMu.Unlock()
	if r.parts[k] != nil {
		return fmt.Errorf("runner: the stream %s is held already", r.layout.StreamAt(k))
	}
	r.parts[k] = p
	if r.consumerPrefix == "" {
		r.consumerPrefix = p.consumerPrefix
	}
	return nil
}

// Detach takes the runner of stream k from an owned set and returns it
// (nil when the set did not hold it); its reads answer ErrNotHeld from
// then on.
func (r *Runner) Detach(k int) *Runner {
	if !r.owned || k < 0 || k >= len(r.parts) {
		return nil
	}
	r.partsMu.Lock()
	defer r.partsMu.Unlock()
	p := r.parts[k]
	r.parts[k] = nil
	return p
}

// Holds reports whether the runner holds deliberation id's stream: always
// but for an owned set (NewOwnedSet) not holding it.
func (r *Runner) Holds(id string) bool { return !r.owned || r.partOf(id) != nil }

// Part is the runner of the stream of index k in a set (nil when the set
// does not hold it, or for a runner of one stream).
func (r *Runner) Part(k int) *Runner { return r.slot(k) }

// HoldsStream reports whether the runner holds the stream of index k.
func (r *Runner) HoldsStream(k int) bool { return !r.owned || r.slot(k) != nil }

// Parts are the runners of a set's streams, in order of their index (nil
// for a runner of one stream; nil entries for the streams an owned set
// does not hold).
func (r *Runner) Parts() []*Runner {
	r.partsMu.RLock()
	defer r.partsMu.RUnlock()
	return slices.Clone(r.parts)
}

// held are the parts the set holds (every one but in an owned set).
func (r *Runner) held() []*Runner {
	r.partsMu.RLock()
	defer r.partsMu.RUnlock()
	out := make([]*Runner, 0, len(r.parts))
	for _, p := range r.parts {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// slot is the part of stream k (nil when not held).
func (r *Runner) slot(k int) *Runner {
	r.partsMu.RLock()
	defer r.partsMu.RUnlock()
	if k < 0 || k >= len(r.parts) {
		return nil
	}
	return r.parts[k]
}

// partOf is the part holding deliberation id (nil when not held).
func (r *Runner) partOf(id string) *Runner { return r.slot(r.layout.Index(id)) }

// partAt is the part of the stream a position names (the first for a
// position of no stream of the layout; nil when not held).
func (r *Runner) partAt(position uint64) *Runner {
	k, _, ok := r.layout.Split(position)
	if !ok {
		k = 0
	}
	return r.slot(k)
}

// PositionAt is the position up to which every message of the stream
// that position names is applied: Position for a runner of one stream.
// A read that waited for min_position says with it how far the
// projection is.
func (r *Runner) PositionAt(position uint64) uint64 {
	if r.parts == nil {
		return r.Position()
	}
	if p := r.partAt(position); p != nil {
		return p.Position()
	}
	return 0
}

// PositionOf is the position up to which every message of the stream
// that holds deliberation id is applied.
func (r *Runner) PositionOf(id string) uint64 {
	if r.parts == nil {
		return r.Position()
	}
	if p := r.partOf(id); p != nil {
		return p.Position()
	}
	return 0
}

// setRun runs every part; the first to end ends the others, and its
// error is returned (nil when ctx ended).
func (r *Runner) setRun(ctx context.Context) error {
	if r.owned {
		<-ctx.Done()
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(r.parts))
	var wg sync.WaitGroup
	for k, p := range r.Parts() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = p.Run(ctx)
			cancel()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (r *Runner) setSnapshot() error {
	var errs []error
	for _, p := range r.held() {
		errs = append(errs, p.Snapshot())
	}
	return errors.Join(errs...)
}

func (r *Runner) setInFlight() BudgetStats {
	var out BudgetStats
	for _, p := range r.held() {
		st := p.InFlight()
		out.Max += st.Max
		out.Used += st.Used
		out.Peak += st.Peak
		out.Waits += st.Waits
		if st.LastWait.After(out.LastWait) {
			out.LastWait = st.LastWait
		}
	}
	return out
}

func (r *Runner) setKeptBytes() (used, max int64, dropped uint64, last time.Time) {
	for _, p := range r.held() {
		u, m, d, l := p.KeptBytes()
		used, max, dropped = used+u, max+m, dropped+d
		if l.After(last) {
			last = l
		}
	}
	return used, max, dropped, last
}

func (r *Runner) setBreaches() (held int64, dropped uint64) {
	for _, p := range r.held() {
		h, d := p.Breaches()
		held, dropped = held+h, dropped+d
	}
	return held, dropped
}

// setDeliberationsBefore walks the parts from the last stream to the
// first: positions order by stream, then by sequence.
func (r *Runner) setDeliberationsBefore(before uint64, fn func(*projector.Deliberation) bool) {
	more := true
	parts := r.Parts()
	for k := len(parts) - 1; k >= 0 && more; k-- {
		p := parts[k]
		if p == nil {
			continue
		}
		b := before
		if before > 0 {
			bk, _, _ := r.layout.Split(before)
			switch {
			case bk < k:
				continue // every position of the stream is at or after before
			case bk > k:
				b = 0 // every position of the stream is before it
			}
		}
		p.DeliberationsBefore(b, func(d *projector.Deliberation) bool {
			more = fn(d)
			return more
		})
	}
}

// setUnroutedAfter merges the parts' pages: each part keeps its own
// (its share of the bound), in order of position.
func (r *Runner) setUnroutedAfter(after uint64, limit int) UnroutedPage {
	var out UnroutedPage
	for _, p := range r.held() {
		pg := p.UnroutedAfter(after, limit+1)
		out.Rejections = append(out.Rejections, pg.Rejections...)
		out.More = out.More || pg.More
		out.Kept += pg.Kept
		out.Total += pg.Total
		for c, n := range pg.ByCode {
			if out.ByCode == nil {
				out.ByCode = map[string]int{}
			}
			out.ByCode[c] += n
		}
	}
	slices.SortFunc(out.Rejections, func(a, b api.Rejection) int { return cmp.Compare(a.Position, b.Position) })
	if limit >= 0 && len(out.Rejections) > limit {
		out.Rejections, out.More = out.Rejections[:limit], true
	}
	return out
}

func (r *Runner) setUnrouted() ([]api.Rejection, int) {
	var all []api.Rejection
	total := 0
	for _, p := range r.held() {
		kept, n := p.Unrouted()
		all = append(all, kept...)
		total += n
	}
	slices.SortFunc(all, func(a, b api.Rejection) int { return cmp.Compare(a.Position, b.Position) })
	return all, total
}

// setStart is the parts' start positions' smallest.
func (r *Runner) setStart() uint64 {
	var low uint64
	for i, p := range r.held() {
		if i == 0 || p.StartPosition() < low {
			low = p.StartPosition()
		}
	}
	return low
}

func (r *Runner) setNotUsed() error {
	var errs []error
	for _, p := range r.held() {
		errs = append(errs, p.SnapshotsNotUsed())
	}
	return errors.Join(errs...)
}

// DeliberationsBeforeIn is DeliberationsBefore over the deliberations of
// the stream of index k alone; false when the runner does not hold it
// (an owned set, NewOwnedSet). A position before names its stream: the
// stream k's deliberations all come after a position of an earlier
// stream, and all before one of a later stream.
func (r *Runner) DeliberationsBeforeIn(k int, before uint64, fn func(*projector.Deliberation) bool) bool {
	if r.parts == nil {
		if k != 0 {
			return false
		}
		r.DeliberationsBefore(before, fn)
		return true
	}
	p := r.slot(k)
	if p == nil {
		return false
	}
	if before > 0 {
		bk, _, _ := r.layout.Split(before)
		switch {
		case bk < k:
			return true // every position of the stream is at or after before
		case bk > k:
			before = 0
		}
	}
	p.DeliberationsBefore(before, fn)
	return true
}

// Owned reports whether the runner is an owned set (NewOwnedSet), whose
// streams come and go.
func (r *Runner) Owned() bool { return r.owned }
