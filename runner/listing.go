package runner

import (
	"cmp"
	"slices"
	"sort"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/projector"
)

// openedDelib is a deliberation in its shard's index by open position.
type openedDelib struct {
	at uint64 // its open position (projector.Deliberation.OpenedAt)
	d  *projector.Deliberation
	l  *delibLock
}

// noteOpened adds a deliberation the shard's goroutine just created (under
// s.mu). A shard applies in stream order and a deliberation is created by
// its open message, so the index grows at its end; entries below a length
// read under s.mu never change afterwards, and a walk reads them without
// the lock. Were one ever to come out of order, it goes into a new array,
// so that walks under way keep theirs.
func (s *shard) noteOpened(d *projector.Deliberation) {
	e := openedDelib{at: d.OpenedAt, d: d, l: s.locks[d.ID]}
	if n := len(s.opened); n == 0 || s.opened[n-1].at < e.at {
		s.opened = append(s.opened, e)
		return
	}
	k := sort.Search(len(s.opened), func(k int) bool { return s.opened[k].at > e.at })
	s.opened = slices.Insert(slices.Clip(s.opened), k, e)
}

// indexOpened builds the index of a projection read from a snapshot.
func (s *shard) indexOpened() {
	s.opened = s.opened[:0:0]
	s.proj.Deliberations(func(d *projector.Deliberation) {
		s.opened = append(s.opened, openedDelib{at: d.OpenedAt, d: d, l: s.locks[d.ID]})
	})
	slices.SortFunc(s.opened, func(a, b openedDelib) int { return cmp.Compare(a.at, b.at) })
}

// DeliberationsBefore runs fn with the deliberations opened at positions
// before before (0: every one), newest opened first, each under its own
// read lock, until fn returns false. It walks the shards' indexes by open
// position, merged, so that a page of the list costs the page and no more
// memory, whatever the number of deliberations. Deliberations opened while
// it runs may or may not be visited.
func (r *Runner) DeliberationsBefore(before uint64, fn func(*projector.Deliberation) bool) {
	if r.parts != nil {
		r.setDeliberationsBefore(before, fn)
		return
	}

	heads := make([][]openedDelib, len(r.shards))
	for i, s := range r.shards {
		s.mu.RLock()
		l := s.opened
		s.mu.RUnlock()
		if before > 0 {
			l = l[:sort.Search(len(l), func(k int) bool { return l[k].at >= before })]
		}
		heads[i] = l
	}
	for {
		best := -1
		for i, l := range heads {
			if len(l) > 0 && (best < 0 || l[len(l)-1].at > heads[best][len(heads[best])-1].at) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		l := heads[best]
		e := l[len(l)-1]
		heads[best] = l[:len(l)-1]
		e.l.rlock()
		more := fn(e.d)
		e.l.runlock()
		if !more {
			return
		}
	}
}

// UnroutedPage is a page of the rejections of messages that belong to no
// open deliberation.
type UnroutedPage struct {
	Rejections []api.Rejection // in stream order
	More       bool            // more follow the page
	// Kept is the number kept in detail (the most recent MaxKept), ByCode
	// theirs by code, Total every one ever recorded.
	Kept   int
	ByCode map[string]int
	Total  int
}

// UnroutedAfter returns up to limit of the kept unrouted rejections at
// positions after after, in stream order. Each shard keeps its own, in
// stream order (it records them as it applies its messages); of all
// shards', the most recent MaxKept are kept. The page is merged from the
// shards' lists under their read locks, copying no more than the page.
func (r *Runner) UnroutedAfter(after uint64, limit int) UnroutedPage {
	if r.parts != nil {
		return r.setUnroutedAfter(after, limit)
	}

	lists := make([][]api.Rejection, len(r.shards))
	var out UnroutedPage
	for i, s := range r.shards {
		s.mu.RLock()
		defer s.mu.RUnlock()
		var n int
		lists[i], n = s.proj.Unrouted()
		out.Total += n
	}
	// The cutoff: the smallest position among the most recent MaxKept.
	countFrom := func(pos uint64) int {
		n := 0
		for _, l := range lists {
			n += len(l) - sort.Search(len(l), func(k int) bool { return l[k].Position >= pos })
		}
		return n
	}
	maxKept := r.shards[0].proj.MaxKept()
	var cutoff uint64
	if all := countFrom(0); all > maxKept {
		// The largest position from which at least MaxKept are kept.
		var hi uint64
		for _, l := range lists {
			if len(l) > 0 {
				hi = max(hi, l[len(l)-1].Position)
			}
		}
		lo := uint64(0) // countFrom(lo) >= maxKept; countFrom(hi+1) == 0 < maxKept
		hi++
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if countFrom(mid) >= maxKept {
				lo = mid
			} else {
				hi = mid
			}
		}
		cutoff = lo
	}
	out.ByCode = map[string]int{}
	from := max(after+1, cutoff)
	heads := make([][]api.Rejection, len(lists))
	for i, l := range lists {
		for _, rj := range l[sort.Search(len(l), func(k int) bool { return l[k].Position >= cutoff }):] {
			out.Kept++
			out.ByCode[rj.Code]++
		}
		heads[i] = l[sort.Search(len(l), func(k int) bool { return l[k].Position >= from }):]
	}
	for {
		best := -1
		for i, l := range heads {
			if len(l) > 0 && (best < 0 || l[0].Position < heads[best][0].Position) {
				best = i
			}
		}
		if best < 0 {
			return out
		}
		if len(out.Rejections) == limit {
			out.More = true
			return out
		}
		out.Rejections = append(out.Rejections, heads[best][0])
		heads[best] = heads[best][1:]
	}
}
