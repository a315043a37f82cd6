package partition_test

import (
	"errors"
	"hash/fnv"
	"strings"
	"testing"
	"testing/quick"

	"github.com/parley-engine/parley/partition"
	"github.com/parley-engine/parley/wire"
)

// Of agrees with the standard library's FNV-1a, modulo Count.
func TestOf_IsFNV1aModCount(t *testing.T) {
	oracle := func(s string) int {
		h := fnv.New32a()
		h.Write([]byte(s))
		return int(h.Sum32() % partition.Count)
	}
	if err := quick.Check(func(s string) bool { return partition.Of(s) == oracle(s) }, &quick.Config{MaxCount: 5000}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"", "a", "0195b3c1-7c2a-7d4e-8f10-2a3b4c5d6e7f"} {
		if partition.Of(s) != oracle(s) {
			t.Fatalf("Of(%q) = %d, want %d", s, partition.Of(s), oracle(s))
		}
	}
}

func TestSubject_Original(t *testing.T) {
	const d = "0195b3c1-7c2a-7d4e-8f10-2a3b4c5d6e7f"
	n := partition.Token(partition.Of(d))
	wrong := partition.Token((partition.Of(d) + 1) % partition.Count)
	for _, c := range []struct {
		name, in, want string
	}{
		{"artifact", wire.ArtifactSubject(d, "alice"), "parley.p." + n + "." + d + ".art.alice"},
		{"control", wire.ControlSubject(d), "parley.p." + n + "." + d + ".ctl"},
		{"supervisor", wire.ArtifactSubject(d, wire.SupervisorToken), "parley.p." + n + "." + d + ".art._supervisor"},
		{"binding", wire.BindingSubject(d), ""},
		{"api", "parley.api.deliberations", ""},
		{"deliberation filter", wire.DeliberationFilter(d), ""},
		{"artifact with no participant", "parley." + d + ".art.", ""},
		{"artifact with two tokens", "parley." + d + ".art.a.b", ""},
		{"no prefix", "other." + d + ".ctl", ""},
		{"empty deliberation", "parley..ctl", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := partition.Subject(c.in)
			if got != c.want || ok != (c.want != "") {
				t.Fatalf("Subject(%q) = %q, %v; want %q", c.in, got, ok, c.want)
			}
			if !ok {
				return
			}
			orig, p, err := partition.Original(got)
			if err != nil || orig != c.in || partition.Token(p) != n {
				t.Fatalf("Original(%q) = %q, %d, %v", got, orig, p, err)
			}
		})
	}
	for _, c := range []struct {
		name, in string
		want     error
	}{
		{"not mapped", wire.ControlSubject(d), partition.ErrNotMapped},
		{"no tail", "parley.p." + n, partition.ErrNotMapped},
		{"padded number", "parley.p.0" + n + "." + d + ".ctl", partition.ErrNotMapped},
		{"past count", "parley.p.1024." + d + ".ctl", partition.ErrNotMapped},
		{"negative", "parley.p.-1." + d + ".ctl", partition.ErrNotMapped},
		{"not a number", "parley.p.x." + d + ".ctl", partition.ErrNotMapped},
		{"not a record subject", "parley.p." + n + "." + d + ".binding", partition.ErrNotMapped},
		{"wrong partition", "parley.p." + wrong + "." + d + ".ctl", partition.ErrMisplaced},
		{"refused", partition.Refused, partition.ErrNotMapped},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := partition.Original(c.in)
			if !errors.Is(err, c.want) {
				t.Fatalf("Original(%q): %v, want %v", c.in, err, c.want)
			}
			var pe *partition.Error
			if !errors.As(err, &pe) || pe.Subject != c.in {
				t.Fatalf("Original(%q): %#v does not name the subject", c.in, err)
			}
		})
	}
	if got := partition.DeliberationFilter(d); got != "parley.p."+n+"."+d+".>" {
		t.Fatalf("DeliberationFilter = %q", got)
	}
}

// Every stream count from 1 to Count: the ranges are contiguous, cover
// every partition once, differ in size by at most one, and StreamOf
// finds each partition's range.
func TestLayout_StreamOf(t *testing.T) {
	for n := 1; n <= partition.Count; n++ {
		l, err := partition.NewLayout(n)
		if err != nil {
			t.Fatal(err)
		}
		rs := l.Streams()
		if len(rs) != n || rs[0].First != 0 || rs[n-1].End != partition.Count {
			t.Fatalf("n=%d: %d ranges from %d to %d", n, len(rs), rs[0].First, rs[n-1].End)
		}
		lo, hi := partition.Count, 0
		for k, r := range rs {
			if r.Index != k || (k > 0 && r.First != rs[k-1].End) {
				t.Fatalf("n=%d: range %d is %+v after %+v", n, k, r, rs[max(k-1, 0)])
			}
			lo, hi = min(lo, r.End-r.First), max(hi, r.End-r.First)
		}
		if lo < 1 || hi-lo > 1 {
			t.Fatalf("n=%d: range sizes from %d to %d", n, lo, hi)
		}
		for p := range partition.Count {
			k := l.StreamOf(p)
			if k < 0 || k >= n || !rs[k].Contains(p) {
				t.Fatalf("n=%d: StreamOf(%d) = %d, %+v does not hold it", n, p, k, rs[max(0, min(k, n-1))])
			}
		}
	}
	for _, n := range []int{0, -1, partition.Count + 1} {
		if _, err := partition.NewLayout(n); !errors.Is(err, partition.ErrStreams) {
			t.Fatalf("NewLayout(%d): %v, want %v", n, err, partition.ErrStreams)
		}
		if _, err := partition.Streams(n); !errors.Is(err, partition.ErrStreams) {
			t.Fatalf("Streams(%d): %v, want %v", n, err, partition.ErrStreams)
		}
	}
	if rs, err := partition.Streams(4); err != nil || len(rs) != 4 || rs[3] != (partition.Range{Index: 3, First: 768, End: 1024}) {
		t.Fatalf("Streams(4) = %v, %v", rs, err)
	}
}

func TestRange_NameSubjects(t *testing.T) {
	one, _ := partition.NewLayout(1)
	r := one.Streams()[0]
	if r.Name() != "PARLEY_0000_1023" || strings.Join(r.Subjects(), " ") != "parley.p.*.*.art.* parley.p.*.*.ctl" {
		t.Fatalf("one stream: %s %v", r.Name(), r.Subjects())
	}
	four, _ := partition.NewLayout(4)
	r = four.Streams()[1]
	subs := r.Subjects()
	if r.Name() != "PARLEY_0256_0511" || len(subs) != 512 || subs[0] != "parley.p.256.*.art.*" || subs[511] != "parley.p.511.*.ctl" {
		t.Fatalf("second of four: %s, %d subjects %s … %s", r.Name(), len(subs), subs[0], subs[len(subs)-1])
	}
}

// Original accepts exactly the subjects Subject makes, and never panics.
func FuzzOriginal(f *testing.F) {
	const d = "0195b3c1-7c2a-7d4e-8f10-2a3b4c5d6e7f"
	m, _ := partition.Subject(wire.ArtifactSubject(d, "alice"))
	for _, s := range []string{m, "parley.p.1." + d + ".ctl", "parley.p..x.ctl", "parley.p.0", partition.Refused} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		orig, p, err := partition.Original(s)
		if err != nil {
			return
		}
		again, ok := partition.Subject(orig)
		if !ok || again != s || p != partition.Of(wire.DeliberationOf(orig)) {
			t.Fatalf("Original(%q) = %q, %d; Subject of that = %q, %v", s, orig, p, again, ok)
		}
	})
}
