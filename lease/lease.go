package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultBucket is the bucket's default name.
const DefaultBucket = "PARLEY_LEASES"

// DefaultTTL is the default lease time: how long after its last renewal a
// lease expires.
const DefaultTTL = 10 * time.Second

// MinTTL is the shortest TTL.
const MinTTL = time.Second

// Config of the lease bucket.
type Config struct {
	Bucket   string        // default DefaultBucket
	TTL      time.Duration // default DefaultTTL; at least MinTTL
	Replicas int           // default 1
	Storage  jetstream.StorageType
}

func (c Config) withDefaults() (Config, error) {
	if c.Bucket == "" {
		c.Bucket = DefaultBucket
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.TTL < MinTTL {
		return c, &Error{Code: CodeInvalid, Op: "bucket", Err: fmt.Errorf("TTL %v below %v", c.TTL, MinTTL)}
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	return c, nil
}

// Bucket creates the lease bucket, or opens it when it exists with the
// same TTL: each key keeps one revision, which the server removes TTL
// after it was written.
//
// With no delete marker: the server's marker of an expiry is a message of
// its own, proposed after it decided the revision expired and rolling up
// the key's subject when stored. On a cluster one was seen to land after
// a contender's Create of the expired key, and took the new owner's lease
// with it (the new owner then found its lease gone at its first check).
// Without markers an expiry only removes the expired revision; contenders
// find the key free by polling (Leases.Wait every poll, Group every
// round).
func Bucket(ctx context.Context, js jetstream.JetStream, cfg Config) (jetstream.KeyValue, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      cfg.Bucket,
		Description: "parley partition leases",
		History:     1,
		TTL:         cfg.TTL,
		Replicas:    cfg.Replicas,
		Storage:     cfg.Storage,
	})
	if err != nil {
		return nil, &Error{Code: CodeBucket, Op: "bucket " + cfg.Bucket, Err: err}
	}
	return kv, nil
}

// Key is partition p's key: "partition.0017".
func Key(p int) string { return UnitKey(Partition, p) }

// The units a bucket's leases are of: the partitions (Key), or the
// streams of a record of several (engine serve --own-streams). Each unit
// has keys and members of its own, so that groups of both share a bucket
// without counting each other.
const (
	Partition = "partition"
	Stream    = "stream"
)

// UnitKey is the key of the lease of number p of unit: "stream.0002".
func UnitKey(unit string, p int) string { return fmt.Sprintf("%s.%04d", unit, p) }

// Lease is one holding of a partition: what its owner keeps between
// renewals.
type Lease struct {
	// Partition is the number of what is leased: a partition, or a
	// stream (Unit).
	Partition int
	// Unit is Partition or Stream ("" is Partition).
	Unit  string
	Owner string
	// Revision is the key's revision the owner last wrote: the fencing
	// token.
	Revision uint64
	nonce    string // this acquisition's, in the value
	// unsure: a renewal's answer was lost; it may have been written.
	unsure bool
}

// value is what a lease key holds.
type value struct {
	Owner     string `json:"owner"`
	Partition int    `json:"partition"`
	Nonce     string `json:"nonce"`
}

// Leases acquires, renews and releases an owner's leases in one bucket.
type Leases struct {
	kv    jetstream.KeyValue
	owner string
	ttl   time.Duration
	unit  string
}

// Of returns a lease client of the same bucket and owner for the leases
// of unit (Partition or Stream).
func (m *Leases) Of(unit string) *Leases {
	c := *m
	c.unit = unit
	return &c
}

// key is p's key in m's unit.
func (m *Leases) key(p int) string { return UnitKey(cmpOr(m.unit, Partition), p) }

// key is l's key.
func (l *Lease) key() string { return UnitKey(cmpOr(l.Unit, Partition), l.Partition) }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// New returns owner's lease client of bucket kv. owner names the engine
// (1 to 128 printable ASCII characters); it is written in each lease for
// people to read, and is not what fences (the revision is).
func New(ctx context.Context, kv jetstream.KeyValue, owner string) (*Leases, error) {
	if len(owner) == 0 || len(owner) > 128 || strings.IndexFunc(owner, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
		return nil, &Error{Code: CodeInvalid, Op: "new", Err: fmt.Errorf("owner %q: want 1 to 128 printable ASCII characters", owner)}
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, &Error{Code: CodeBucket, Op: "new", Err: err}
	}
	if st.TTL() <= 0 {
		return nil, &Error{Code: CodeBucket, Op: "new", Err: fmt.Errorf("bucket %s has no TTL: its leases would never expire", st.Bucket())}
	}
	return &Leases{kv: kv, owner: owner, ttl: st.TTL()}, nil
}

// TTL is the bucket's lease time.
func (m *Leases) TTL() time.Duration { return m.ttl }

func checkPartition(op string, p int) error {
	if p < 0 || p > 9999 {
		return &Error{Code: CodeInvalid, Op: op, Err: fmt.Errorf("partition %d", p)}
	}
	return nil
}

// Acquire takes partition p's lease if no one holds it: the key is
// absent, released, or expired. When someone does, the error is ErrHeld
// (an *Error whose Holder and Revision say who, and since which
// revision).
func (m *Leases) Acquire(ctx context.Context, p int) (*Lease, error) {
	if err := checkPartition("acquire", p); err != nil {
		return nil, err
	}
	var nb [12]byte
	_, _ = rand.Read(nb[:])
	l := &Lease{Partition: p, Unit: m.unit, Owner: m.owner, nonce: hex.EncodeToString(nb[:])}
	rev, err := m.kv.Create(ctx, m.key(p), l.value())
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			e := &Error{Code: CodeHeld, Op: "acquire", Key: m.key(p), Err: err}
			if cur, gerr := m.kv.Get(ctx, m.key(p)); gerr == nil {
				var v value
				if json.Unmarshal(cur.Value(), &v) == nil {
					e.Holder = v.Owner
				}
				e.Revision = cur.Revision()
			}
			return nil, e
		}
		return nil, &Error{Code: CodeUnavailable, Op: "acquire", Key: m.key(p), Err: err}
	}
	l.Revision = rev
	return l, nil
}

func (l *Lease) value() []byte {
	b, _ := json.Marshal(value{Owner: l.Owner, Partition: l.Partition, Nonce: l.nonce})
	return b
}

// Renew extends l by TTL from now: a KV update conditional on l's
// revision, which becomes the new one. ErrLost when the key's last
// revision is not l's (another owner's, or none: it expired):
// the owner must stop acting for the partition. Any other error
// (ErrUnavailable: a timeout, no JetStream) leaves l as it was, to renew
// again; a renewal that was written although its answer was lost is
// recognised then by the lease's nonce.
func (m *Leases) Renew(ctx context.Context, l *Lease) error {
	rev, err := m.kv.Update(ctx, l.key(), l.value(), l.Revision)
	if err == nil {
		l.Revision, l.unsure = rev, false
		return nil
	}
	if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		l.unsure = true
		return &Error{Code: CodeUnavailable, Op: "renew", Key: l.key(), Revision: l.Revision, Err: err}
	}
	// Was the last revision this acquisition's own renewal, whose answer
	// was lost? Only the same acquisition writes its nonce.
	if m.settle(ctx, l) {
		return m.Renew(ctx, l)
	}
	return m.lost("renew", l, err)
}

// settle resolves a lease whose last renewal's answer was lost: when the
// key's last revision carries this acquisition's nonce (only this
// acquisition writes it), that renewal was written, and its revision is
// l's. It reports whether l's revision changed.
func (m *Leases) settle(ctx context.Context, l *Lease) bool {
	if !l.unsure {
		return false
	}
	cur, err := m.kv.Get(ctx, l.key())
	if err != nil || cur.Revision() <= l.Revision {
		return false
	}
	var v value
	if json.Unmarshal(cur.Value(), &v) != nil || v.Nonce != l.nonce || v.Owner != l.Owner {
		return false
	}
	l.Revision, l.unsure = cur.Revision(), false
	return true
}

func (m *Leases) lost(op string, l *Lease, err error) error {
	e := &Error{Code: CodeLost, Op: op, Key: l.key(), Revision: l.Revision, Err: err}
	if cur, gerr := m.kv.Get(context.Background(), l.key()); gerr == nil {
		var v value
		if json.Unmarshal(cur.Value(), &v) == nil {
			e.Holder = v.Owner
		}
	}
	return e
}

// Check reports whether l is still the partition's lease (a KV Get: its
// revision is the key's last). It is a read: a check that passes says
// nothing of a moment later (see Guarded).
func (m *Leases) Check(ctx context.Context, l *Lease) error {
	m.settle(ctx, l)
	cur, err := m.kv.Get(ctx, l.key())
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return &Error{Code: CodeLost, Op: "check", Key: l.key(), Revision: l.Revision, Err: err}
	case err != nil:
		return &Error{Code: CodeUnavailable, Op: "check", Key: l.key(), Revision: l.Revision, Err: err}
	case cur.Revision() != l.Revision:
		return m.lost("check", l, fmt.Errorf("the key is at revision %d", cur.Revision()))
	}
	return nil
}

// Release gives l up at once (a KV delete conditional on its revision),
// so that a contender need not wait for it to expire. ErrLost when it was
// no longer l's to give.
func (m *Leases) Release(ctx context.Context, l *Lease) error {
	m.settle(ctx, l)
	err := m.kv.Delete(ctx, l.key(), jetstream.LastRevision(l.Revision))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return m.lost("release", l, err)
	default:
		return &Error{Code: CodeUnavailable, Op: "release", Key: l.key(), Revision: l.Revision, Err: err}
	}
}

// Keep renews l every interval (TTL/3 when interval is 0) until ctx ends
// (nil) or a renewal finds it lost (ErrLost). A failed renewal that is
// not a loss is tried again at the next tick; once TTL has passed since
// the last renewal that succeeded the lease is given up for lost without
// asking (ErrLost): by then a contender may hold it.
func (m *Leases) Keep(ctx context.Context, l *Lease, interval time.Duration) error {
	if interval <= 0 {
		interval = m.ttl / 3
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if time.Since(last) >= m.ttl {
			return &Error{Code: CodeLost, Op: "keep", Key: l.key(), Revision: l.Revision, Err: fmt.Errorf("no renewal for %v", time.Since(last).Round(time.Millisecond))}
		}
		// A renewal runs to its answer even when ctx ends meanwhile, so
		// that Keep returns with l's revision known (a Release then
		// needs no expiry).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), interval)
		err := m.Renew(rctx, l)
		cancel()
		switch {
		case err == nil:
			last = time.Now()
		case errors.Is(err, ErrLost):
			return err
		}
	}
}

// Wait acquires partition p as soon as it is free: it watches the key and
// tries again at each change (a release), and at least every poll (TTL/4
// when poll is 0: an expiry leaves no marker to watch), until ctx ends. An attempt the
// server does not answer (ErrUnavailable, such as during a leader
// election of the bucket's stream) is tried again too.
func (m *Leases) Wait(ctx context.Context, p int, poll time.Duration) (*Lease, error) {
	if err := checkPartition("wait", p); err != nil {
		return nil, err
	}
	if poll <= 0 {
		poll = m.ttl / 4
	}
	w, err := m.kv.Watch(ctx, m.key(p), jetstream.UpdatesOnly(), jetstream.MetaOnly())
	if err != nil {
		return nil, &Error{Code: CodeUnavailable, Op: "wait", Key: m.key(p), Err: err}
	}
	defer func() { _ = w.Stop() }()
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		// Each attempt has its own deadline: a request lost while the
		// bucket's stream changes leader is not waited for past it.
		actx, cancel := context.WithTimeout(ctx, max(poll, time.Second))
		l, err := m.Acquire(actx, p)
		cancel()
		if err != nil && ctx.Err() != nil {
			return nil, &Error{Code: CodeHeld, Op: "wait", Key: m.key(p), Err: context.Cause(ctx)}
		}
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, ErrHeld) && !errors.Is(err, ErrUnavailable) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, &Error{Code: CodeHeld, Op: "wait", Key: m.key(p), Err: context.Cause(ctx)}
		case <-w.Updates():
		case <-t.C:
		}
	}
}

// Header is the header a guarded write carries: the partition's key and
// the revision of the lease it was written under, "partition.0017@42".
const Header = "Parley-Lease"

// Stamp is l's Header value.
func (l *Lease) Stamp() string {
	return l.key() + "@" + strconv.FormatUint(l.Revision, 10)
}
