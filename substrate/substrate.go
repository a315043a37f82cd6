// Package substrate re-verifies provenance annotations against the
// substrates a relying party can observe locally: files under its roots
// and git repositories (docs/PROVENANCE.md). It is the IO that package
// provenance leaves out: its Reverifier's Verify method is a
// provenance.Verifier, which a runner calls ahead of the fold, outside any
// lock (provenance.Reverify), never the fold itself.
package substrate

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/parley-engine/parley/provenance"
)

// Reverifier re-queries the substrates a relying party can observe
// locally (substrate.code.read, substrate.grep, substrate.git.log and
// substrate.fs.mtime), confined to its roots: a path is resolved inside a
// root with os.Root, so neither ".." nor a symbolic link can leave it.
// Results are cached for TTL and counted. It is safe for concurrent use;
// its Verify method is a Verifier.
type Reverifier struct {
	roots []root
	// TTL is how long a result is reused (0: DefaultTTL). A cached
	// "verified" says the substrate matched when it was read, no later.
	TTL time.Duration
	// MaxEntries bounds the cache (0: DefaultMaxEntries); when it is full
	// the oldest half is dropped.
	MaxEntries int
	// GitTimeout bounds each git command (0: 10 s).
	GitTimeout time.Duration

	mu    sync.Mutex
	cache map[string]cached
	stats Stats
	now   func() time.Time
}

// Defaults of a Reverifier.
const (
	DefaultTTL        = time.Minute
	DefaultMaxEntries = 4096
	maxLine           = 1 << 20 // longest line read by code.read and grep
)

type root struct {
	dir string // absolute
	r   *os.Root
}

type cached struct {
	v  provenance.Verification
	at time.Time
}

// Stats count what a Reverifier did, by result.
type Stats struct {
	Checks      int            `json:"checks"`      // results returned
	CacheHits   int            `json:"cache_hits"`  // of which from the cache
	Verified    int            `json:"verified"`    // substrate matched
	Failed      int            `json:"failed"`      // substrate contradicted the annotation
	Unavailable int            `json:"unavailable"` // not re-verifiable here (class, roots, git)
	ByClass     map[string]int `json:"by_class"`    // checks per class
}

// NewReverifier opens its roots (directories; at least one).
func NewReverifier(dirs ...string) (*Reverifier, error) {
	if len(dirs) == 0 {
		return nil, errors.New("substrate: a re-verifier needs at least one root directory")
	}
	rv := &Reverifier{cache: map[string]cached{}, now: time.Now, stats: Stats{ByClass: map[string]int{}}}
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, fmt.Errorf("substrate: root %s: %w", d, err)
		}
		r, err := os.OpenRoot(abs)
		if err != nil {
			return nil, fmt.Errorf("substrate: root %s: %w", d, err)
		}
		rv.roots = append(rv.roots, root{abs, r})
	}
	return rv, nil
}

// Close closes the roots.
func (rv *Reverifier) Close() error {
	for _, r := range rv.roots {
		r.r.Close()
	}
	return nil
}

// Roots returns the absolute root directories.
func (rv *Reverifier) Roots() []string {
	var out []string
	for _, r := range rv.roots {
		out = append(out, r.dir)
	}
	return out
}

// Stats returns the counts so far.
func (rv *Reverifier) Stats() Stats {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	s := rv.stats
	s.ByClass = map[string]int{}
	for k, v := range rv.stats.ByClass {
		s.ByClass[k] = v
	}
	return s
}

// Reverifiable reports whether class has a local re-verifier here.
func Reverifiable(class string) bool {
	switch class {
	case provenance.CodeRead, provenance.Grep, provenance.GitLog, provenance.FSMtime:
		return true
	}
	return false
}

// Verify re-verifies a (it is a Verifier): not Attempted when a cannot be
// re-verified here (another class, no observation id or locator, a path
// outside every root, no git); otherwise Verified says whether the
// substrate confirms the observation, and Detail why.
func (rv *Reverifier) Verify(a provenance.Annotation) provenance.Verification {
	if !Reverifiable(a.Class) {
		return provenance.Verification{Detail: "no local re-verifier for " + a.Class}
	}
	loc, _ := json.Marshal(a.Locator)
	key := a.Class + "\x00" + a.ObservationID + "\x00" + string(loc)
	ttl := rv.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	now := rv.now()
	rv.mu.Lock()
	if c, hit := rv.cache[key]; hit && now.Sub(c.at) < ttl {
		rv.count(a.Class, c.v, true)
		rv.mu.Unlock()
		c.v.Cached = true
		return c.v
	}
	rv.mu.Unlock()

	v := rv.verify(a)
	rv.mu.Lock()
	max := rv.MaxEntries
	if max <= 0 {
		max = DefaultMaxEntries
	}
	if len(rv.cache) >= max {
		rv.evict(max / 2)
	}
	rv.cache[key] = cached{v, now}
	rv.count(a.Class, v, false)
	rv.mu.Unlock()
	return v
}

// evict drops the oldest entries until n remain.
func (rv *Reverifier) evict(n int) {
	type kv struct {
		k  string
		at time.Time
	}
	all := make([]kv, 0, len(rv.cache))
	for k, c := range rv.cache {
		all = append(all, kv{k, c.at})
	}
	slices.SortFunc(all, func(a, b kv) int { return a.at.Compare(b.at) }) // oldest first
	for _, e := range all[:len(all)-n] {
		delete(rv.cache, e.k)
	}
}

func (rv *Reverifier) count(class string, v provenance.Verification, hit bool) {
	rv.stats.Checks++
	rv.stats.ByClass[class]++
	if hit {
		rv.stats.CacheHits++
	}
	switch {
	case !v.Attempted:
		rv.stats.Unavailable++
	case v.Verified:
		rv.stats.Verified++
	default:
		rv.stats.Failed++
	}
}

func unavailable(format string, a ...any) provenance.Verification {
	return provenance.Verification{Detail: fmt.Sprintf(format, a...)}
}

func failed(format string, a ...any) provenance.Verification {
	return provenance.Verification{Attempted: true, Detail: fmt.Sprintf(format, a...)}
}

func verified(format string, a ...any) provenance.Verification {
	return provenance.Verification{Attempted: true, Verified: true, Detail: fmt.Sprintf(format, a...)}
}

func (rv *Reverifier) verify(a provenance.Annotation) provenance.Verification {
	if a.ObservationID == "" {
		return unavailable("no observation_id")
	}
	l := a.Locator
	if l == nil {
		l = &provenance.Locator{}
	}
	switch a.Class {
	case provenance.CodeRead, provenance.Grep, provenance.FSMtime:
		if l.Path == "" {
			return unavailable("the locator names no path")
		}
		r, name, err := rv.resolve(l.Path)
		if err != nil {
			return *err
		}
		switch a.Class {
		case provenance.CodeRead:
			return rv.codeRead(r, name, l, a.ObservationID)
		case provenance.Grep:
			return rv.grep(r, name, l, a.ObservationID)
		}
		return rv.mtime(r, name, a.ObservationID)
	}
	return rv.gitLog(l, a.ObservationID)
}

// resolve finds path in the first root that has it. An absolute path must
// lie inside a root; a path that would leave every root is unavailable;
// one that is in no root is a failure (the substrate does not show it).
func (rv *Reverifier) resolve(path string) (root, string, *provenance.Verification) {
	type candidate struct {
		r    root
		name string
	}
	var candidates []candidate
	for _, r := range rv.roots {
		switch {
		case filepath.IsAbs(path):
			if rel, err := filepath.Rel(r.dir, path); err == nil && filepath.IsLocal(rel) {
				candidates = append(candidates, candidate{r, rel})
			}
		case filepath.IsLocal(path):
			candidates = append(candidates, candidate{r, filepath.Clean(path)})
		}
	}
	if len(candidates) == 0 {
		v := unavailable("%s is outside the configured roots", path)
		return root{}, "", &v
	}
	var escaped bool
	for _, c := range candidates {
		_, err := c.r.r.Stat(c.name)
		if err == nil {
			return c.r, c.name, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			escaped = true
		}
	}
	if escaped {
		v := unavailable("%s leaves the configured roots (a symbolic link) or cannot be read", path)
		return root{}, "", &v
	}
	v := failed("%s does not exist under the configured roots", path)
	return root{}, "", &v
}

// region calls fn with each line of name (its terminator included) from
// line offset (1-based; 0 means 1) for limit lines (0: to the end).
func region(r root, name string, l *provenance.Locator, fn func(n int, line []byte)) error {
	f, err := r.r.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	first := max(l.Offset, 1)
	var buf []byte
	for n := 1; l.Limit == 0 || n < first+l.Limit; n++ {
		buf = buf[:0]
		for {
			chunk, err := br.ReadSlice('\n')
			buf = append(buf, chunk...)
			if len(buf) > maxLine {
				return fmt.Errorf("line %d is longer than %d bytes", n, maxLine)
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil && err != io.EOF {
				return err
			}
			if err == io.EOF && len(buf) == 0 {
				return nil
			}
			break
		}
		if n >= first {
			fn(n, buf)
		}
		if buf[len(buf)-1] != '\n' {
			return nil
		}
	}
	return nil
}

func describe(path string, l *provenance.Locator) string {
	switch {
	case l.Offset > 1 && l.Limit > 0:
		return fmt.Sprintf("%s lines %d-%d", path, l.Offset, l.Offset+l.Limit-1)
	case l.Limit > 0:
		return fmt.Sprintf("%s lines 1-%d", path, l.Limit)
	case l.Offset > 1:
		return fmt.Sprintf("%s from line %d", path, l.Offset)
	}
	return path
}

func sha(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

func codeReadID(r root, name string, l *provenance.Locator) (string, int, error) {
	h := sha256.New()
	lines := 0
	if err := region(r, name, l, func(_ int, line []byte) { h.Write(line); lines++ }); err != nil {
		return "", 0, fmt.Errorf("reading %s: %w", name, err)
	}
	return sha(h), lines, nil
}

func (rv *Reverifier) codeRead(r root, name string, l *provenance.Locator, id string) provenance.Verification {
	got, lines, err := codeReadID(r, name, l)
	if err != nil {
		return failed("%v", err)
	}
	where := describe(name, l) + " under " + r.dir
	if !strings.EqualFold(got, id) {
		return failed("read %s (%d lines): %s, the annotation says %s", where, lines, got, id)
	}
	return verified("read %s (%d lines): the SHA-256 matches", where, lines)
}

// grepID is the observation id of a grep: the SHA-256 of the matching
// lines, each written as grep -n prints it ("12:text\n").
func grepID(r root, name string, l *provenance.Locator) (string, int, error) {
	if l.Pattern == "" {
		return "", 0, errors.New("the locator names no pattern")
	}
	re, err := regexp.Compile(l.Pattern)
	if err != nil {
		return "", 0, fmt.Errorf("pattern %q: %w", l.Pattern, err)
	}
	h := sha256.New()
	matches := 0
	err = region(r, name, l, func(n int, line []byte) {
		text := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if re.Match(text) {
			matches++
			h.Write(strconv.AppendInt(nil, int64(n), 10))
			h.Write([]byte{':'})
			h.Write(text)
			h.Write([]byte{'\n'})
		}
	})
	if err != nil {
		return "", 0, fmt.Errorf("reading %s: %w", name, err)
	}
	if matches == 0 {
		return "", 0, fmt.Errorf("no line of %s matches %q", describe(name, l), l.Pattern)
	}
	return sha(h), matches, nil
}

func (rv *Reverifier) grep(r root, name string, l *provenance.Locator, id string) provenance.Verification {
	if l.Pattern == "" {
		return unavailable("the locator names no pattern")
	}
	got, matches, err := grepID(r, name, l)
	if err != nil {
		return failed("%v", err)
	}
	where := describe(name, l) + " under " + r.dir
	if !strings.EqualFold(got, id) {
		return failed("grep %q over %s: %d matching lines, %s, the annotation says %s", l.Pattern, where, matches, got, id)
	}
	return verified("grep %q over %s: %d matching lines, the SHA-256 matches", l.Pattern, where, matches)
}

func (rv *Reverifier) mtime(r root, name, id string) provenance.Verification {
	want, err := time.Parse(time.RFC3339Nano, id)
	if err != nil {
		return failed("the observation id %q is not an RFC 3339 time", id)
	}
	fi, err := r.r.Stat(name)
	if err != nil {
		return failed("stat %s: %v", name, err)
	}
	if !fi.ModTime().Equal(want) {
		return failed("%s under %s was modified at %s, the annotation says %s", name, r.dir, fi.ModTime().UTC().Format(time.RFC3339Nano), id)
	}
	return verified("%s under %s: the modification time matches", name, r.dir)
}

// Observe reads the substrate now, as an emitter would, and returns the
// observation id an annotation of class with locator l carries: the
// SHA-256 of the bytes read or of the matching lines, the modification
// time, or the commit l.Ref names (which must also satisfy l.Path and
// l.Pattern). It is confined to the same roots.
func (rv *Reverifier) Observe(class string, l provenance.Locator) (string, error) {
	switch class {
	case provenance.CodeRead, provenance.Grep, provenance.FSMtime:
		if l.Path == "" {
			return "", errors.New("the locator names no path")
		}
		r, name, bad := rv.resolve(l.Path)
		if bad != nil {
			return "", errors.New(bad.Detail)
		}
		switch class {
		case provenance.CodeRead:
			id, _, err := codeReadID(r, name, &l)
			return id, err
		case provenance.Grep:
			id, _, err := grepID(r, name, &l)
			return id, err
		}
		fi, err := r.r.Stat(name)
		if err != nil {
			return "", err
		}
		return fi.ModTime().UTC().Format(time.RFC3339Nano), nil
	case provenance.GitLog:
		if l.Ref == "" {
			return "", errors.New("the locator names no ref")
		}
		g, bad := rv.git(l.Repo)
		if bad != nil {
			return "", errors.New(bad.Detail)
		}
		if !validRef(l.Ref) {
			return "", fmt.Errorf("ref %q is not a reference name", l.Ref)
		}
		out, code, err := g("", "rev-parse", "--verify", "--quiet", l.Ref+"^{commit}")
		if err != nil || code != 0 {
			return "", fmt.Errorf("ref %s does not name a commit: %s", l.Ref, firstLine(out, err))
		}
		id := strings.TrimSpace(out)
		if v := rv.gitLog(&l, id); !v.Verified {
			return "", errors.New(v.Detail)
		}
		return id, nil
	}
	return "", fmt.Errorf("no local observer for %s", class)
}

var commitID = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

func validRef(ref string) bool {
	return !strings.HasPrefix(ref, "-") && !strings.ContainsAny(ref, " \t\n\\:?*[~^") && !strings.Contains(ref, "..")
}

// gitRunner runs git with stdin; on a non-zero exit with a message, the
// output is git's standard error.
type gitRunner func(stdin string, args ...string) (string, int, error)

// git returns a runner of git commands in repo (a directory under a root),
// which never looks for a repository above that directory.
func (rv *Reverifier) git(repo string) (gitRunner, *provenance.Verification) {
	if repo == "" {
		repo = "."
	}
	r, name, bad := rv.resolve(repo)
	if bad != nil {
		return nil, bad
	}
	if fi, err := r.r.Stat(name); err != nil || !fi.IsDir() {
		v := failed("%s under %s is not a directory", repo, r.dir)
		return nil, &v
	}
	dir := filepath.Join(r.dir, name)
	gitBin, err := exec.LookPath("git")
	if err != nil {
		v := unavailable("git is not installed")
		return nil, &v
	}
	timeout := rv.GitTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	run := func(stdin string, args ...string) (string, int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, gitBin, append([]string{"-C", dir}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &limited{&out, 16 << 20}, &limited{&errb, 64 << 10}
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code, err = ee.ExitCode(), nil
			if code < 0 {
				err = fmt.Errorf("git was stopped (%s)", ee)
			}
		}
		if err == nil && code != 0 && errb.Len() > 0 {
			return strings.TrimSpace(errb.String()), code, nil
		}
		return out.String(), code, err
	}
	return run, nil
}

func (rv *Reverifier) gitLog(l *provenance.Locator, id string) provenance.Verification {
	id = strings.ToLower(id)
	if !commitID.MatchString(id) {
		return failed("the observation id %q is not a commit id (40 or 64 hexadecimal digits)", id)
	}
	if l.Ref == "" {
		return unavailable("the locator names no ref")
	}
	if !validRef(l.Ref) {
		return failed("ref %q is not a reference name", l.Ref)
	}
	run, bad := rv.git(l.Repo)
	if bad != nil {
		return *bad
	}
	dir := l.Repo
	if dir == "" {
		dir = "."
	}
	// One git cat-file --batch answers the commit, the ref and the file;
	// git merge-base the reachability: two processes in all.
	in := id + "\n" + l.Ref + "^{commit}\n"
	if l.Path != "" {
		if strings.HasPrefix(l.Path, "/") || !filepath.IsLocal(l.Path) || strings.ContainsAny(l.Path, "\n\r") {
			return failed("path %q must be relative to the repository", l.Path)
		}
		in += id + ":" + filepath.ToSlash(l.Path) + "\n"
	}
	out, code, err := run(in, "cat-file", "--batch")
	if err != nil || code != 0 {
		return failed("git cat-file in %s: %s", dir, firstLine(out, err))
	}
	objs, ok := parseBatch(out)
	if !ok || len(objs) != strings.Count(in, "\n") {
		return failed("git cat-file in %s: unexpected output (an object larger than 16 MiB?)", dir)
	}
	if objs[0].missing || objs[0].typ != "commit" {
		return failed("commit %s is not in %s", short(id), dir)
	}
	if objs[1].missing {
		return failed("ref %s does not name a commit in %s", l.Ref, dir)
	}
	switch _, code, err := run("", "merge-base", "--is-ancestor", id, objs[1].oid); {
	case err != nil:
		return unavailable("git merge-base: %v", err)
	case code == 1:
		return failed("commit %s is not reachable from %s", short(id), l.Ref)
	case code != 0:
		return failed("git merge-base %s %s exited %d", short(id), l.Ref, code)
	}
	what := "commit " + short(id) + " reachable from " + l.Ref
	if l.Path == "" && l.Pattern == "" {
		return verified("%s in %s", what, dir)
	}
	var content, where string
	if l.Path != "" {
		if objs[2].missing || objs[2].typ != "blob" {
			return failed("%s has no file %s", what, l.Path)
		}
		content, where = objs[2].content, l.Path+" at "+short(id)
	} else {
		_, msg, _ := strings.Cut(objs[0].content, "\n\n")
		content, where = msg, "the message of "+short(id)
	}
	if l.Pattern != "" {
		re, err := regexp.Compile(l.Pattern)
		if err != nil {
			return failed("pattern %q: %v", l.Pattern, err)
		}
		if !re.MatchString(content) {
			return failed("%s, but %s does not match %q", what, where, l.Pattern)
		}
		return verified("%s; %s matches %q", what, where, l.Pattern)
	}
	return verified("%s; it has %s", what, l.Path)
}

type batchObj struct {
	oid, typ, content string
	missing           bool
}

// parseBatch reads git cat-file --batch output: per object
// "<oid> <type> <size>\n<content>\n", or "<name> missing\n".
func parseBatch(out string) ([]batchObj, bool) {
	var objs []batchObj
	for out != "" {
		line, rest, ok := strings.Cut(out, "\n")
		if !ok {
			return nil, false
		}
		if strings.HasSuffix(line, " missing") || strings.HasSuffix(line, " ambiguous") {
			objs = append(objs, batchObj{missing: true})
			out = rest
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, false
		}
		n, err := strconv.Atoi(f[2])
		if err != nil || n < 0 || len(rest) < n+1 {
			return nil, false
		}
		objs = append(objs, batchObj{oid: f[0], typ: f[1], content: rest[:n]})
		out = rest[n+1:]
	}
	return objs, true
}

func short(id string) string { return id[:min(12, len(id))] }

func firstLine(out string, err error) string {
	if err != nil {
		return err.Error()
	}
	l, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	return l
}

// limited is a writer that keeps at most n bytes (git's output is bounded
// in memory whatever the repository holds).
type limited struct {
	w *bytes.Buffer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.n - l.w.Len(); room > 0 {
		l.w.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
