package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// SnapshotStore keeps the snapshots of a projection spread over n shards:
// one a shard, named by the shard's index and the number of shards.
// FileSnapshots keeps them in files, ObjectSnapshots in a JetStream object
// store.
type SnapshotStore interface {
	// Write replaces the snapshot of shard i of n with what write writes,
	// atomically: until the new one is complete the previous one is what
	// is read, and a write that fails (or a process killed while writing)
	// leaves the previous one as it was.
	Write(ctx context.Context, i, n int, write func(io.Writer) error) error
	// Read hands read the snapshot of shard i of n, refusing one of more
	// than limit bytes (ErrSnapshotTooLarge), and checks that it was read
	// whole and intact (ErrSnapshotInvalid otherwise). found is false when
	// the shard has none.
	Read(ctx context.Context, i, n int, limit int64, read func(io.Reader) error) (found bool, err error)
	// Has reports whether shard i of n has a snapshot.
	Has(ctx context.Context, i, n int) (bool, error)
	// List returns the snapshots kept, of any number of shards.
	List(ctx context.Context) ([]StoredSnapshot, error)
	// String says where the snapshots are kept (logs, errors).
	String() string
}

// StoredSnapshot is a snapshot a SnapshotStore keeps: shard Shard of Of.
type StoredSnapshot struct {
	Name      string
	Shard, Of int
	Size      int64
}

// DefaultMaxSnapshotBytes is the default bound on the size of one shard's
// snapshot read at start (Config.MaxSnapshotBytes).
const DefaultMaxSnapshotBytes = 8 << 30

// The classes of a snapshot that is not used. Each error New records
// (Runner.SnapshotsNotUsed) is one of them (errors.Is).
var (
	// ErrSnapshotInvalid: a snapshot that cannot be read (corrupt,
	// truncated, another format, an object whose digest does not match).
	ErrSnapshotInvalid = errors.New("runner: invalid snapshot")
	// ErrSnapshotTooLarge: a snapshot larger than Config.MaxSnapshotBytes.
	ErrSnapshotTooLarge = errors.New("runner: snapshot too large")
	// ErrSnapshotShards: snapshots of another number of shards only.
	ErrSnapshotShards = errors.New("runner: snapshots of another number of shards")
	// ErrSnapshotMissing: some shards have a snapshot, others none.
	ErrSnapshotMissing = errors.New("runner: shard snapshots missing")
	// ErrSnapshotAhead: a snapshot at a position past the stream's last.
	ErrSnapshotAhead = errors.New("runner: snapshot ahead of the stream")
)

// snapError is an error of class kind with its own message.
type snapError struct {
	kind error
	msg  string
	err  error
}

func (e *snapError) Error() string   { return e.msg }
func (e *snapError) Unwrap() []error { return []error{e.kind, e.err} }

func snapErr(kind, err error, format string, args ...any) error {
	return &snapError{kind: kind, msg: fmt.Sprintf(format, args...), err: err}
}

// shardName is the name of shard i of n's snapshot after prefix.
func shardName(prefix string, i, n int) string {
	return prefix + "." + strconv.Itoa(i) + "-of-" + strconv.Itoa(n)
}

// parseShardName parses a name shardName made with prefix.
func parseShardName(prefix, name string) (i, n int, ok bool) {
	rest, found := strings.CutPrefix(name, prefix+".")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(rest, "-of-")
	if !found {
		return 0, 0, false
	}
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || i < 0 || n <= 0 || i >= n {
		return 0, 0, false
	}
	return i, n, true
}

// FileSnapshots keeps the snapshots in files beside path, one a shard
// (path.<i>-of-<n>), each written to a temporary file, synced and renamed.
func FileSnapshots(path string) SnapshotStore { return fileSnapshots{path: path} }

type fileSnapshots struct{ path string }

func (fs fileSnapshots) String() string { return fs.path }

func (fs fileSnapshots) Write(_ context.Context, i, n int, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(fs.path), ".snapshot-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriterSize(tmp, 1<<20)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), shardName(fs.path, i, n))
	}
	return err
}

func (fs fileSnapshots) Read(_ context.Context, i, n int, limit int64, read func(io.Reader) error) (bool, error) {
	f, err := os.Open(shardName(fs.path, i, n))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	if fi.Size() > limit {
		return true, snapErr(ErrSnapshotTooLarge, nil, "shard %d: %s is %d bytes, more than the bound of %d", i, f.Name(), fi.Size(), limit)
	}
	if err := read(bufio.NewReaderSize(io.LimitReader(f, limit), 1<<20)); err != nil {
		return true, snapErr(ErrSnapshotInvalid, err, "shard %d: %v", i, err)
	}
	return true, nil
}

func (fs fileSnapshots) Has(_ context.Context, i, n int) (bool, error) {
	_, err := os.Stat(shardName(fs.path, i, n))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func (fs fileSnapshots) List(context.Context) ([]StoredSnapshot, error) {
	files, err := filepath.Glob(fs.path + ".*-of-*")
	if err != nil {
		return nil, err
	}
	var out []StoredSnapshot
	for _, f := range files {
		i, n, ok := parseShardName(fs.path, f)
		if !ok {
			continue
		}
		s := StoredSnapshot{Name: filepath.Base(f), Shard: i, Of: n}
		if fi, err := os.Stat(f); err == nil {
			s.Size = fi.Size()
		}
		out = append(out, s)
	}
	return out, nil
}

// removeLeftovers removes temporary files of snapshots a kill interrupted,
// and the snapshot of an engine that did not shard its projection.
func (fs fileSnapshots) removeLeftovers(log *slog.Logger) {
	tmps, _ := filepath.Glob(filepath.Join(filepath.Dir(fs.path), ".snapshot-*"))
	for _, t := range tmps {
		if os.Remove(t) == nil {
			log.Info("removed a snapshot's leftover temporary file", "path", t)
		}
	}
	os.Remove(fs.path)
}

// DefaultSnapshotBucket is the default bucket of ObjectSnapshots.
const DefaultSnapshotBucket = "PARLEY_SNAPSHOTS"

// ObjectSnapshots keeps the snapshots in a JetStream object store, one
// object a shard (prefix.<i>-of-<n>): engines that keep theirs under
// different prefixes may share a bucket, and an engine with an empty data
// directory restores from the objects another engine of its group wrote.
//
// A write is atomic as the object store makes it: an object's chunks are
// published under a subject of their own, and its meta message, which
// names them, last; until it is stored readers read the previous object,
// and the chunks of a write that failed (or was killed) are never read. A
// read checks the object's size and its SHA-256 digest, which the object
// store checks at its end: the snapshot is read to the end of the object
// whether the projector needed all of it or not.
func ObjectSnapshots(ctx context.Context, obs jetstream.ObjectStore, prefix string) (SnapshotStore, error) {
	st, err := obs.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("runner: snapshot bucket: %w", err)
	}
	return objectSnapshots{obs: obs, bucket: st.Bucket(), prefix: prefix}, nil
}

type objectSnapshots struct {
	obs            jetstream.ObjectStore
	bucket, prefix string
}

func (o objectSnapshots) String() string {
	return "object store " + o.bucket + ", " + o.prefix + ".<i>-of-<n>"
}

func (o objectSnapshots) Write(ctx context.Context, i, n int, write func(io.Writer) error) error {
	pr, pw := io.Pipe()
	wrote := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(pw, 1<<20)
		err := write(w)
		if err == nil {
			err = w.Flush()
		}
		// An error ends the object's reader with it: Put stores no meta,
		// and the previous object stays.
		pw.CloseWithError(err)
		wrote <- err
	}()
	_, err := o.obs.Put(ctx, jetstream.ObjectMeta{Name: shardName(o.prefix, i, n), Opts: &jetstream.ObjectMetaOptions{ChunkSize: objectChunk}}, pr)
	pr.CloseWithError(cmpErr(err, io.ErrClosedPipe)) // a writer still writing stops
	if werr := <-wrote; werr != nil && !errors.Is(werr, io.ErrClosedPipe) {
		return werr
	}
	return err
}

// objectChunk is the size of an object's chunks: half the default
// max_payload of a NATS server (1 MiB), four times the library's default.
const objectChunk = 512 << 10

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// A read of an object may take objectReadBase, and a second more for
// every objectReadPace bytes; past it the read gives up (an object whose
// chunks are gone is read until then).
var objectReadBase = 30 * time.Second

const objectReadPace = 4 << 20

// stallsAllowed is how many reads in a row may return nothing before a
// read of an object gives up.
const stallsAllowed = 3

func (o objectSnapshots) Read(ctx context.Context, i, n int, limit int64, read func(io.Reader) error) (bool, error) {
	name := shardName(o.prefix, i, n)
	info, err := o.info(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	if info.Size > uint64(limit) {
		return true, snapErr(ErrSnapshotTooLarge, nil, "shard %d: object %s is %d bytes, more than the bound of %d", i, name, info.Size, limit)
	}
	// The library bounds a read without a deadline to 5 s in all: this
	// one has as long as its size needs, at a slow pace.
	ctx, cancel := context.WithTimeout(ctx, objectReadBase+time.Duration(info.Size/objectReadPace)*time.Second)
	defer cancel()
	res, err := o.obs.Get(ctx, name)
	if err != nil {
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return false, nil
		}
		return true, err
	}
	defer res.Close()
	cr := &countedReader{r: res, max: int64(info.Size)}
	if err := read(bufio.NewReaderSize(cr, 1<<20)); err != nil {
		return true, snapErr(ErrSnapshotInvalid, err, "shard %d: object %s: %v", i, name, err)
	}
	// To the end of the object, where the library checks its digest.
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return true, snapErr(ErrSnapshotInvalid, err, "shard %d: object %s: %v", i, name, err)
	}
	if cr.n != int64(info.Size) {
		return true, snapErr(ErrSnapshotInvalid, nil, "shard %d: object %s: %d bytes read, its meta says %d", i, name, cr.n, info.Size)
	}
	if err := res.Error(); err != nil {
		return true, snapErr(ErrSnapshotInvalid, err, "shard %d: object %s: %v", i, name, err)
	}
	return true, nil
}

// countedReader counts what it reads, refuses more than max bytes, and
// turns reads that return nothing (the library's, when its wait for a
// chunk ends before the read's deadline is seen) into an error after
// stallsAllowed of them.
type countedReader struct {
	r      io.Reader
	n, max int64
	stalls int
}

var errTooManyBytes = errors.New("more bytes than the object's meta says")

func (c *countedReader) Read(p []byte) (int, error) {
	for {
		n, err := c.r.Read(p)
		c.n += int64(n)
		if c.n > c.max {
			return 0, errTooManyBytes
		}
		if n > 0 || err != nil {
			c.stalls = 0
			return n, err
		}
		if c.stalls++; c.stalls >= stallsAllowed {
			return 0, fmt.Errorf("no chunk came after %d bytes of %d: %w", c.n, c.max, io.ErrUnexpectedEOF)
		}
	}
}

// Has reports a shard's snapshot whose meta is an object's: a meta that
// is not (below) is written over by the next snapshot.
func (o objectSnapshots) Has(ctx context.Context, i, n int) (bool, error) {
	_, err := o.info(ctx, shardName(o.prefix, i, n))
	if errors.Is(err, jetstream.ErrObjectNotFound) || errors.Is(err, ErrSnapshotInvalid) {
		return false, nil
	}
	return err == nil, err
}

// info is the meta of the object name, checked: a meta message that does
// not parse or does not describe that object of this bucket (what the
// server stores there when a client has it answer a request on the
// meta's subject, say) is ErrSnapshotInvalid.
func (o objectSnapshots) info(ctx context.Context, name string) (*jetstream.ObjectInfo, error) {
	info, err := o.obs.GetInfo(ctx, name)
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syntax) || errors.As(err, &typ) || errors.Is(err, jetstream.ErrBadObjectMeta) {
		return nil, snapErr(ErrSnapshotInvalid, err, "object %s: its meta: %v", name, err)
	}
	if err != nil {
		return nil, err
	}
	if _, derr := jetstream.DecodeObjectDigest(info.Digest); info.NUID == "" || info.Name != name || info.Bucket != o.bucket || derr != nil ||
		info.Opts != nil && info.Opts.Link != nil {
		return nil, snapErr(ErrSnapshotInvalid, nil, "object %s: its meta is not an object's of bucket %s (name %q, bucket %q, nuid %q, digest %q)",
			name, o.bucket, info.Name, info.Bucket, info.NUID, info.Digest)
	}
	return info, nil
}

func (o objectSnapshots) List(ctx context.Context) ([]StoredSnapshot, error) {
	infos, err := o.obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []StoredSnapshot
	for _, info := range infos {
		if i, n, ok := parseShardName(o.prefix, info.Name); ok {
			out = append(out, StoredSnapshot{Name: info.Name, Shard: i, Of: n, Size: int64(info.Size)})
		}
	}
	slices.SortFunc(out, func(a, b StoredSnapshot) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
