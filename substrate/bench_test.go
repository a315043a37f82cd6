package substrate_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/internal/gittest"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/substrate"
)

// BenchmarkReverify: one re-verification per class, each against the real
// substrate (a 400-line file, a git repository), uncached (a TTL of 1 ns)
// and from the cache, side by side.
func BenchmarkReverify(b *testing.B) {
	dir := b.TempDir()
	var text strings.Builder
	for i := range 400 {
		fmt.Fprintf(&text, "line %d of the changelog, with some words to read\n", i+1)
	}
	gittest.Init(b, dir)
	gittest.Write(b, dir, "CHANGELOG.md", text.String())
	head := gittest.Commit(b, dir, "changelog")
	obs, err := substrate.NewReverifier(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer obs.Close()
	cases := []struct {
		class string
		loc   provenance.Locator
	}{
		{provenance.CodeRead, provenance.Locator{Path: "CHANGELOG.md", Offset: 100, Limit: 50}},
		{provenance.Grep, provenance.Locator{Path: "CHANGELOG.md", Pattern: `^line 2\d\d of`}},
		{provenance.FSMtime, provenance.Locator{Path: "CHANGELOG.md"}},
		{provenance.GitLog, provenance.Locator{Ref: "main", Path: "CHANGELOG.md", Pattern: "line 399 of"}},
	}
	for _, c := range cases {
		id, err := obs.Observe(c.class, c.loc)
		if err != nil {
			b.Fatal(err)
		}
		if c.class == provenance.GitLog && id != head {
			b.Fatal(id)
		}
		a := provenance.Annotation{Assertion: "a", Class: c.class, ObservationID: id, Locator: &c.loc}
		for _, mode := range []string{"uncached", "cached"} {
			b.Run(filepath.Base(c.class)+"/"+mode, func(b *testing.B) {
				rv, _ := substrate.NewReverifier(dir)
				defer rv.Close()
				rv.TTL = time.Hour
				if mode == "uncached" {
					rv.TTL = time.Nanosecond
				}
				for b.Loop() {
					if v := rv.Verify(a); !v.Verified {
						b.Fatal(v.Detail)
					}
				}
			})
		}
	}
}
