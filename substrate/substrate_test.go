package substrate_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/internal/gittest"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/substrate"
)

// gitRepo makes a repository in dir with two commits on main and one on a
// side branch; it returns the commits (main's first, main's head, side).
func gitRepo(t *testing.T, dir string) (first, head, side string) {
	t.Helper()
	gittest.Init(t, dir)
	write(t, filepath.Join(dir, "CHANGELOG.md"), "# Changelog\n\n## 2026-05-25\n- first entry\n")
	first = gittest.Commit(t, dir, "changelog: first entry dated 2026-05-25")
	write(t, filepath.Join(dir, "CHANGELOG.md"), "# Changelog\n\n## 2026-05-26\n- second\n\n## 2026-05-25\n- first entry\n")
	head = gittest.Commit(t, dir, "changelog: second entry")
	gittest.Git(t, dir, "checkout", "-q", "-b", "side", first)
	write(t, filepath.Join(dir, "side.txt"), "side\n")
	side = gittest.Commit(t, dir, "a commit only on side")
	gittest.Git(t, dir, "checkout", "-q", "main")
	return first, head, side
}

var at = time.Date(2026, 5, 28, 12, 0, 0, 0, time.UTC)

func ts(d time.Duration) *time.Time { t := at.Add(-d); return &t }

func codes(v provenance.Verdict) []string {
	var c []string
	for _, r := range v.Reasons {
		c = append(c, r.Code)
	}
	return c
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func newRV(t *testing.T, dirs ...string) *substrate.Reverifier {
	t.Helper()
	rv, err := substrate.NewReverifier(dirs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rv.Close() })
	return rv
}

func observe(t *testing.T, rv *substrate.Reverifier, class string, l provenance.Locator) string {
	t.Helper()
	id, err := rv.Observe(class, l)
	if err != nil {
		t.Fatalf("observe %s %+v: %v", class, l, err)
	}
	return id
}

func check(t *testing.T, rv *substrate.Reverifier, class, id string, l provenance.Locator, attempted, verified bool, detail string) provenance.Verification {
	t.Helper()
	v := rv.Verify(provenance.Annotation{Assertion: "a", Class: class, ObservationID: id, Locator: &l})
	if v.Attempted != attempted || v.Verified != verified || !strings.Contains(v.Detail, detail) {
		t.Errorf("%s %s %+v: got attempted=%v verified=%v %q, want %v %v containing %q", class, id, l, v.Attempted, v.Verified, v.Detail, attempted, verified, detail)
	}
	return v
}

// substrate.code.read: the observation id is the SHA-256 of the bytes
// read (the whole file, or lines offset..offset+limit-1).
func TestReverifyCodeRead(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.txt"), "one\ntwo\nthree\nfour")
	rv := newRV(t, dir)
	whole := observe(t, rv, provenance.CodeRead, provenance.Locator{Path: "a.txt"})
	if whole != "sha256:"+sum("one\ntwo\nthree\nfour") {
		t.Fatalf("whole file id %s", whole)
	}
	mid := observe(t, rv, provenance.CodeRead, provenance.Locator{Path: "a.txt", Offset: 2, Limit: 2})
	if mid != "sha256:"+sum("two\nthree\n") {
		t.Fatalf("lines 2-3 id %s", mid)
	}
	tail := observe(t, rv, provenance.CodeRead, provenance.Locator{Path: "a.txt", Offset: 4})
	if tail != "sha256:"+sum("four") {
		t.Fatalf("from line 4 id %s", tail)
	}
	check(t, rv, provenance.CodeRead, mid, provenance.Locator{Path: "a.txt", Offset: 2, Limit: 2}, true, true, "lines 2-3")
	check(t, rv, provenance.CodeRead, strings.ToUpper(mid[:7])+mid[7:], provenance.Locator{Path: "./a.txt", Offset: 2, Limit: 2}, true, true, "matches")
	// Fabricated: an id the bytes do not hash to.
	check(t, rv, provenance.CodeRead, "sha256:"+sum("two\nthree\nand more\n"), provenance.Locator{Path: "a.txt", Offset: 2, Limit: 2}, true, false, "the annotation says")
	// Another region of the same file is another observation.
	check(t, rv, provenance.CodeRead, mid, provenance.Locator{Path: "a.txt"}, true, false, "")
	// No such file under the roots: the substrate does not show it.
	check(t, rv, provenance.CodeRead, mid, provenance.Locator{Path: "b.txt"}, true, false, "does not exist")
	// A changed file no longer confirms the earlier reading (after the
	// cache's TTL; within it the earlier result is reused and says so).
	write(t, filepath.Join(dir, "a.txt"), "one\nTWO\nthree\nfour")
	v := check(t, rv, provenance.CodeRead, mid, provenance.Locator{Path: "a.txt", Offset: 2, Limit: 2}, true, true, "")
	if !v.Cached {
		t.Error("a repeated check within the TTL was not cached")
	}
	rv2 := newRV(t, dir)
	check(t, rv2, provenance.CodeRead, mid, provenance.Locator{Path: "a.txt", Offset: 2, Limit: 2}, true, false, "the annotation says")
	// Without an observation id or a path there is nothing to re-query.
	check(t, rv2, provenance.CodeRead, "", provenance.Locator{Path: "a.txt"}, false, false, "no observation_id")
	check(t, rv2, provenance.CodeRead, mid, provenance.Locator{}, false, false, "no path")
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// Confinement: nothing outside the configured roots is read, whether by
// "..", an absolute path or a symbolic link.
func TestReverifyConfined(t *testing.T) {
	base := t.TempDir()
	rootDir, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	os.Mkdir(rootDir, 0o755)
	os.Mkdir(outside, 0o755)
	write(t, filepath.Join(outside, "secret"), "secret\n")
	write(t, filepath.Join(rootDir, "in.txt"), "in\n")
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(rootDir, "link")); err != nil {
		t.Fatal(err)
	}
	rv := newRV(t, rootDir)
	id := "sha256:" + sum("secret\n")
	for _, p := range []string{"../outside/secret", filepath.Join(outside, "secret"), "link"} {
		check(t, rv, provenance.CodeRead, id, provenance.Locator{Path: p}, false, false, "roots")
		if _, err := rv.Observe(provenance.CodeRead, provenance.Locator{Path: p}); err == nil {
			t.Errorf("observe %s read outside the root", p)
		}
	}
	// An absolute path inside a root is fine.
	check(t, rv, provenance.CodeRead, "sha256:"+sum("in\n"), provenance.Locator{Path: filepath.Join(rootDir, "in.txt")}, true, true, "")
	// Several roots: the first that has the path.
	second := t.TempDir()
	write(t, filepath.Join(second, "only-here"), "x\n")
	rv2 := newRV(t, rootDir, second)
	check(t, rv2, provenance.CodeRead, "sha256:"+sum("x\n"), provenance.Locator{Path: "only-here"}, true, true, second)
	if _, err := substrate.NewReverifier(filepath.Join(base, "missing")); err == nil {
		t.Error("a missing root was accepted")
	}
	if _, err := substrate.NewReverifier(); err == nil {
		t.Error("no roots accepted")
	}
}

// substrate.grep: the content appears in a named region of a named file.
func TestReverifyGrep(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "CHANGELOG.md"), "# Changelog\n\n## 2026-05-25\n- entry\nother\n")
	rv := newRV(t, dir)
	l := provenance.Locator{Path: "CHANGELOG.md", Pattern: `^## 2026-05-25$`}
	id := observe(t, rv, provenance.Grep, l)
	if id != "sha256:"+sum("3:## 2026-05-25\n") {
		t.Fatalf("grep id %s", id)
	}
	check(t, rv, provenance.Grep, id, l, true, true, "1 matching lines")
	// The region: lines 4 onward do not hold it.
	check(t, rv, provenance.Grep, id, provenance.Locator{Path: "CHANGELOG.md", Pattern: l.Pattern, Offset: 4}, true, false, "no line")
	check(t, rv, provenance.Grep, id, provenance.Locator{Path: "CHANGELOG.md", Pattern: "("}, true, false, "pattern")
	check(t, rv, provenance.Grep, id, provenance.Locator{Path: "CHANGELOG.md"}, false, false, "no pattern")
	// A line that does not match may change; a moved match may not.
	write(t, filepath.Join(dir, "CHANGELOG.md"), "# Changelog\n\n## 2026-05-25\n- entry, edited\nother\n")
	check(t, newRV(t, dir), provenance.Grep, id, l, true, true, "")
	write(t, filepath.Join(dir, "CHANGELOG.md"), "# Changelog\n## 2026-05-25\n")
	check(t, newRV(t, dir), provenance.Grep, id, l, true, false, "the annotation says")
}

// substrate.fs.mtime: the modification time, in RFC 3339.
func TestReverifyMtime(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	write(t, p, "x")
	when := time.Date(2026, 5, 28, 11, 40, 0, 123456789, time.UTC)
	os.Chtimes(p, when, when)
	rv := newRV(t, dir)
	id := observe(t, rv, provenance.FSMtime, provenance.Locator{Path: "f"})
	if id != "2026-05-28T11:40:00.123456789Z" {
		t.Fatalf("mtime id %s", id)
	}
	check(t, rv, provenance.FSMtime, "2026-05-28T21:40:00.123456789+10:00", provenance.Locator{Path: "f"}, true, true, "matches")
	check(t, rv, provenance.FSMtime, "yesterday", provenance.Locator{Path: "f"}, true, false, "not an RFC 3339")
	os.Chtimes(p, when, when.Add(time.Second))
	check(t, newRV(t, dir), provenance.FSMtime, id, provenance.Locator{Path: "f"}, true, false, "was modified at")
}

// substrate.git.log: the content in a commit reachable from a named ref.
func TestReverifyGitLog(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	os.Mkdir(repo, 0o755)
	first, head, side := gitRepo(t, repo)
	rv := newRV(t, dir)
	l := provenance.Locator{Repo: "repo", Ref: "main"}
	if got := observe(t, rv, provenance.GitLog, l); got != head {
		t.Fatalf("observed %s, head is %s", got, head)
	}
	check(t, rv, provenance.GitLog, first, l, true, true, "reachable from main")
	check(t, rv, provenance.GitLog, strings.ToUpper(first), l, true, true, "")
	// The content: in the commit's file, or in its message.
	check(t, rv, provenance.GitLog, first, provenance.Locator{Repo: "repo", Ref: "main", Path: "CHANGELOG.md", Pattern: "2026-05-25"}, true, true, "CHANGELOG.md at")
	check(t, rv, provenance.GitLog, first, provenance.Locator{Repo: "repo", Ref: "main", Path: "CHANGELOG.md", Pattern: "2026-05-26"}, true, false, "does not match")
	check(t, rv, provenance.GitLog, first, provenance.Locator{Repo: "repo", Ref: "main", Pattern: "first entry dated"}, true, true, "message")
	check(t, rv, provenance.GitLog, first, provenance.Locator{Repo: "repo", Ref: "main", Path: "side.txt"}, true, false, "no file")
	// Not reachable from the ref named, though in the repository.
	check(t, rv, provenance.GitLog, side, l, true, false, "not reachable from main")
	check(t, rv, provenance.GitLog, side, provenance.Locator{Repo: "repo", Ref: "side"}, true, true, "")
	// Fabricated commits and bad refs.
	check(t, rv, provenance.GitLog, strings.Repeat("ab", 20), l, true, false, "is not in")
	check(t, rv, provenance.GitLog, "HEAD", l, true, false, "not a commit id")
	check(t, rv, provenance.GitLog, first, provenance.Locator{Repo: "repo", Ref: "nope"}, true, false, "does not name a commit")
	check(t, rv, provenance.GitLog, first, provenance.Locator{Repo: "repo", Ref: "--output=/tmp/x"}, true, false, "not a reference name")
	check(t, rv, provenance.GitLog, first, provenance.Locator{Repo: "repo"}, false, false, "no ref")
	// A directory inside a root that is not a repository is not one, even
	// under a repository's work tree: git never looks above it.
	os.Mkdir(filepath.Join(repo, "sub"), 0o755)
	rvSub := newRV(t, filepath.Join(repo, "sub"))
	check(t, rvSub, provenance.GitLog, first, provenance.Locator{Ref: "main"}, true, false, "not a git repository")
	check(t, rv, provenance.GitLog, first, provenance.Locator{Repo: "../x", Ref: "main"}, false, false, "outside")
}

// The discipline with real re-verification: evidence annotated with a
// file read and a git commit is admitted at k = 2; with the file changed
// it is not; at k = 3 a third re-verified class is needed.
func TestAdmitReverified(t *testing.T) {
	dir := t.TempDir()
	first, _, _ := gitRepo(t, dir)
	rv := newRV(t, dir)
	read := provenance.Locator{Path: "CHANGELOG.md", Offset: 6, Limit: 2}
	readID := observe(t, rv, provenance.CodeRead, read)
	git := provenance.Locator{Ref: "main", Path: "CHANGELOG.md", Pattern: "2026-05-25"}
	mt := provenance.Locator{Path: "CHANGELOG.md"}
	mtID := observe(t, rv, provenance.FSMtime, mt)
	const as = "CHANGELOG.md has an entry dated 2026-05-25"
	set := &provenance.Set{Vocabulary: "1.0", Annotations: []provenance.Annotation{
		{Assertion: as, Class: provenance.CodeRead, ObservationID: readID, TS: ts(time.Minute), Locator: &read},
		{Assertion: as, Class: provenance.GitLog, ObservationID: first, TS: ts(2 * time.Minute), Locator: &git},
	}}
	p := provenance.Params{Window: 10 * time.Minute, K: 2, At: at}
	v := provenance.Admit(set, p, rv.Verify)[0]
	if !v.Admitted || len(v.Reverification) != 2 || v.Reverification[0].Result != provenance.ResultVerified {
		t.Fatalf("%+v", v)
	}
	// k = 3 with two classes: below the floor.
	p3 := p
	p3.K = 3
	if v := provenance.Admit(set, p3, rv.Verify)[0]; v.Admitted || !slices.Contains(codes(v), provenance.CodeBelowFloor) {
		t.Fatalf("%+v", v)
	}
	set3 := &provenance.Set{Vocabulary: "1.0", Annotations: append(slices.Clone(set.Annotations),
		provenance.Annotation{Assertion: as, Class: provenance.FSMtime, ObservationID: mtID, TS: ts(time.Minute), Locator: &mt},
		provenance.Annotation{Assertion: as, Class: provenance.SSECount, ObservationID: "subscribers=4", TS: ts(time.Minute)})}
	v3 := provenance.Admit(set3, p3, rv.Verify)[0]
	if !v3.Admitted || len(v3.Counted) != 3 || !slices.Contains(codes(v3), provenance.CodeNotRequeryable) {
		t.Fatalf("%+v", v3)
	}
	// The file changes: its reading is no longer confirmed, and neither is
	// its modification time.
	write(t, filepath.Join(dir, "CHANGELOG.md"), "# Changelog\n\n## 2026-05-26\n- second\n\n## 2026-05-25\n- first entry, edited\n")
	fresh := newRV(t, dir)
	v = provenance.Admit(set, p, fresh.Verify)[0]
	if v.Admitted || !slices.Contains(codes(v), provenance.CodeReverifyFailed) || !slices.Equal(v.Counted, []string{provenance.GitLog}) {
		t.Fatalf("%+v", v)
	}
	if st := fresh.Stats(); st.Checks != 2 || st.Verified != 1 || st.Failed != 1 || st.ByClass[provenance.CodeRead] != 1 {
		t.Errorf("stats %+v", st)
	}
	// Classes without a local re-verifier are reported unavailable and,
	// toward k = 3, not counted.
	mcp := &provenance.Set{Vocabulary: "1.0", Annotations: []provenance.Annotation{
		{Assertion: "x", Class: provenance.MCPBrief, ObservationID: "brief-1", TS: ts(time.Minute)}}}
	p3.MCPBriefRequeryable = true
	vm := provenance.Admit(mcp, p3, fresh.Verify)[0]
	if vm.Admitted || vm.Reverification[0].Result != provenance.ResultUnavailable || !slices.Contains(codes(vm), provenance.CodeNotReverified) {
		t.Fatalf("%+v", vm)
	}
}

// The cache: results are reused within the TTL, counted, and bounded.
func TestReverifyCache(t *testing.T) {
	dir := t.TempDir()
	for i := range 10 {
		write(t, filepath.Join(dir, "f"+string(rune('0'+i))), strings.Repeat("x", i))
	}
	rv := newRV(t, dir)
	rv.MaxEntries = 4
	for range 3 {
		for i := range 10 {
			rv.Verify(provenance.Annotation{Assertion: "a", Class: provenance.CodeRead, ObservationID: "sha256:" + sum(strings.Repeat("x", i)),
				Locator: &provenance.Locator{Path: "f" + string(rune('0'+i))}})
		}
	}
	st := rv.Stats()
	if st.Checks != 30 || st.Verified != 30 || st.CacheHits >= 30 {
		t.Errorf("stats %+v", st)
	}
	rv2 := newRV(t, dir)
	a := provenance.Annotation{Assertion: "a", Class: provenance.CodeRead, ObservationID: "sha256:" + sum("xx"), Locator: &provenance.Locator{Path: "f2"}}
	rv2.Verify(a)
	if v := rv2.Verify(a); !v.Cached {
		t.Error("not cached")
	}
	if st := rv2.Stats(); st.CacheHits != 1 || st.Checks != 2 {
		t.Errorf("stats %+v", st)
	}
	// A class without a local re-verifier.
	if v := rv2.Verify(provenance.Annotation{Class: provenance.UnixPeercred, ObservationID: "uid=0"}); v.Attempted {
		t.Error(v)
	}
}
