package partition

import (
	"fmt"
	"strconv"
)

// Range is the partitions one stream holds: [First, End).
type Range struct {
	Index int // the stream's index, 0..n-1
	First int // the first partition it holds
	End   int // one past the last
}

// Name is the stream's name, PARLEY_<first>_<last> with the last
// partition inclusive and both numbers on four digits: PARLEY_0000_1023
// for a single stream, PARLEY_0256_0511 for the second of four. A change
// of the stream count changes the names, so that a stream is never
// reused for a range it was not made for.
func (r Range) Name() string {
	return fmt.Sprintf("%s_%04d_%04d", streamPrefix, r.First, r.End-1)
}

const streamPrefix = "PARLEY"

// Contains reports whether the stream holds partition p.
func (r Range) Contains(p int) bool { return p >= r.First && p < r.End }

// Subjects are the stream's subject filters: for each of its partitions,
// the mapped artifact and control subjects (parley.p.<n>.*.art.* and
// parley.p.<n>.*.ctl), in partition order. A stream that holds every
// partition filters them with two wildcards instead.
func (r Range) Subjects() []string {
	if r.First == 0 && r.End == Count {
		return []string{Prefix + "*.*.art.*", Prefix + "*.*.ctl"}
	}
	out := make([]string, 0, 2*(r.End-r.First))
	for p := r.First; p < r.End; p++ {
		t := Prefix + strconv.Itoa(p)
		out = append(out, t+".*.art.*", t+".*.ctl")
	}
	return out
}

// Layout is an assignment of the partitions to n streams.
type Layout struct {
	n int
}

// NewLayout spreads the Count partitions over n streams (1 <= n <=
// Count) in contiguous ranges whose sizes differ by at most one.
func NewLayout(n int) (Layout, error) {
	if n < 1 || n > Count {
		return Layout{}, &Error{Code: CodeStreams, Detail: fmt.Sprintf("%d streams: want 1 to %d", n, Count)}
	}
	return Layout{n: n}, nil
}

// Streams returns the n ranges, in order: stream k holds
// [k*Count/n, (k+1)*Count/n).
func (l Layout) Streams() []Range {
	out := make([]Range, l.n)
	for k := range l.n {
		out[k] = Range{Index: k, First: k * Count / l.n, End: (k + 1) * Count / l.n}
	}
	return out
}

// N is the number of streams.
func (l Layout) N() int { return l.n }

// StreamOf returns the index of the stream holding partition p (0 <= p <
// Count): the k with k*Count/n <= p < (k+1)*Count/n.
func (l Layout) StreamOf(p int) int {
	return ((p+1)*l.n - 1) / Count
}

// Stream returns the range of the stream holding deliberation's
// partition.
func (l Layout) Stream(deliberation string) Range {
	k := l.StreamOf(Of(deliberation))
	return Range{Index: k, First: k * Count / l.n, End: (k + 1) * Count / l.n}
}

// Streams returns the ranges of n streams: NewLayout(n).Streams().
func Streams(n int) ([]Range, error) {
	l, err := NewLayout(n)
	if err != nil {
		return nil, err
	}
	return l.Streams(), nil
}
