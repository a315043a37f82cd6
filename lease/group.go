package lease

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// memberPrefix begins the keys by which the engines of a group say they
// are alive (member.<name>), in the leases' bucket: the bucket's TTL
// expires them as it expires leases.
const memberPrefix = "member."

// MemberKey is the key by which the engine named name says it is alive
// in a group of partitions.
func MemberKey(name string) string { return memberPrefix + name }

// UnitMemberKey is MemberKey in a group of unit: member.<name> for
// partitions, <unit>-member.<name> for another unit.
func UnitMemberKey(unit, name string) string { return membersOf(unit) + name }

func membersOf(unit string) string {
	if unit == "" || unit == Partition {
		return memberPrefix
	}
	return unit + "-" + memberPrefix
}

// GroupConfig configures a Group.
type GroupConfig struct {
	// Partitions is how many partitions the group shares (the partition
	// package's Count, 1,024; 1 to 10,000).
	Partitions int
	// Every is the interval of a round (default TTL/3): the membership
	// heartbeat, the renewal of every lease held, and the acquisitions
	// and releases that bring the engine to its share.
	Every time.Duration
	// OnChange, when set, is called from the group's goroutine with the
	// partitions the engine holds, in increasing order, whenever they
	// change (and once after the first round). The leases are the
	// fencing tokens of what it writes for them (Group.Lease).
	OnChange func(held []int)
	// Member, when set, is what the engine's member key holds (at most
	// 1 KiB; default: its name): what the other engines read of it
	// (Members), the address it answers reads at, say.
	Member []byte
}

func (c GroupConfig) memberValue(name string) []byte {
	if len(c.Member) > 0 {
		return c.Member
	}
	return []byte(name)
}

// A Group shares a number of partitions among the live engines that run
// one over the same bucket: each takes about the same share, through the
// partitions' leases, and holds it while it lives. An engine that stops
// (Run's context ended) releases its leases at once; one that dies stops
// renewing them and the bucket's TTL expires them. Every round, each
// engine counts the live members (their member.<name> keys), takes free
// partitions up to its share (partitions / members, one more for the first
// members by name while the division leaves some over) in an order of its
// own (rendezvous hashing of its name and the partition, so that engines
// seldom race for the same key), and releases those past its share, the
// least preferred first, for the others to take. A partition whose lease
// expired is free: the dead engine's partitions are taken within TTL and
// a round or two of its last renewal.
type Group struct {
	leases *Leases
	kv     jetstream.KeyValue
	name   string
	cfg    GroupConfig

	mu   sync.Mutex
	held map[int]*holding
}

// holding is a lease held, with the lock every use of it takes (the
// group's renewals, an owner's write through Group.Renew).
type holding struct {
	mu sync.Mutex
	l  *Lease
}

// NewGroup returns the group member named by m's owner (each engine of a
// group must have a name of its own), sharing cfg.Partitions partitions.
func NewGroup(m *Leases, cfg GroupConfig) (*Group, error) {
	if cfg.Partitions < 1 || cfg.Partitions > 10000 {
		return nil, &Error{Code: CodeInvalid, Op: "group", Err: fmt.Errorf("%d partitions: want 1 to 10,000", cfg.Partitions)}
	}
	if strings.ContainsAny(m.owner, ".*> ") {
		return nil, &Error{Code: CodeInvalid, Op: "group", Err: fmt.Errorf("owner %q: a group member's name is a key token (no '.', '*', '>')", m.owner)}
	}
	if cfg.Every <= 0 {
		cfg.Every = m.ttl / 3
	}
	if len(cfg.Member) > 1024 {
		return nil, &Error{Code: CodeInvalid, Op: "group", Err: fmt.Errorf("a member value of %d bytes: at most 1,024", len(cfg.Member))}
	}
	return &Group{leases: m, kv: m.kv, name: m.owner, cfg: cfg, held: map[int]*holding{}}, nil
}

// Held returns the partitions the engine holds, in increasing order.
func (g *Group) Held() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]int, 0, len(g.held))
	for p := range g.held {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// count is how many partitions the engine holds.
func (g *Group) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.held)
}

// Holds reports whether the engine holds partition p's lease.
func (g *Group) Holds(p int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held[p] != nil
}

// Renew renews the engine's lease of partition p right before a write
// for p, and returns its stamp (partition.<nnnn>@<revision>, for the
// write's Header). It is the barrier a stale owner stops at: ErrLost
// when the engine does not hold p, or no longer does (and then forgets
// it); ErrUnavailable when the server did not answer (write nothing).
func (g *Group) Renew(ctx context.Context, p int) (string, error) {
	g.mu.Lock()
	h := g.held[p]
	g.mu.Unlock()
	if h == nil {
		return "", &Error{Code: CodeLost, Op: "renew", Key: Key(p), Err: errors.New("not held")}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	err := g.leases.Renew(ctx, h.l)
	if err != nil {
		if errors.Is(err, ErrLost) {
			g.forget(p, h)
		}
		return "", err
	}
	return h.l.Stamp(), nil
}

// forget drops h, p's holding, if it is still the one held.
func (g *Group) forget(p int, h *holding) {
	g.mu.Lock()
	if g.held[p] == h {
		delete(g.held, p)
	}
	g.mu.Unlock()
}

// Run takes and keeps the engine's share until ctx ends, then releases
// every lease it holds and its membership. It returns ctx's end, or the
// error that stopped it (the bucket gone).
func (g *Group) Run(ctx context.Context) error {
	t := time.NewTicker(g.cfg.Every)
	defer t.Stop()
	defer g.leave()
	var last []int
	first := true
	for {
		if err := g.round(ctx); err != nil && ctx.Err() == nil {
			var le *Error
			if errors.As(err, &le) && le.Code == CodeBucket {
				return err
			}
		}
		if held := g.Held(); first || !slices.Equal(held, last) {
			first, last = false, held
			if g.cfg.OnChange != nil {
				g.cfg.OnChange(held)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// round is one heartbeat, renewal, and move towards the share.
func (g *Group) round(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, g.leases.ttl)
	defer cancel()
	member := UnitMemberKey(g.leases.unit, g.name)
	if _, err := g.kv.Put(rctx, member, []byte(g.cfg.memberValue(g.name))); err != nil {
		return &Error{Code: CodeUnavailable, Op: "heartbeat", Key: member, Err: err}
	}
	g.renew(rctx)
	members, rank, taken, err := g.look(rctx)
	if err != nil {
		return err
	}
	// An exact split: the members first by name take one more each while
	// the division leaves some over (4 streams over 3 engines: 2, 1, 1).
	share := g.cfg.Partitions / members
	if rank < g.cfg.Partitions%members {
		share++
	}
	held := g.Held()
	order := g.preference()
	switch {
	case len(held) > share:
		// The least preferred first.
		rank := make(map[int]int, len(order))
		for i, p := range order {
			rank[p] = i
		}
		slices.SortFunc(held, func(a, b int) int { return rank[b] - rank[a] })
		for _, p := range held[:len(held)-share] {
			g.release(rctx, p)
		}
	case len(held) < share:
		// Not past half a round: the next renewals must come in time.
		stop := time.Now().Add(g.cfg.Every / 2)
		for _, p := range order {
			if g.count() >= share || rctx.Err() != nil || time.Now().After(stop) {
				break
			}
			if taken[p] {
				continue
			}
			l, err := g.leases.Acquire(rctx, p)
			if err != nil {
				continue // someone took it first, or the server did not answer: next round
			}
			g.mu.Lock()
			g.held[p] = &holding{l: l}
			g.mu.Unlock()
		}
	}
	return nil
}

// renew renews every lease held, a few at a time; a lost one is
// forgotten (the owner no longer acts for it).
func (g *Group) renew(ctx context.Context) {
	g.mu.Lock()
	hs := make(map[int]*holding, len(g.held))
	for p, h := range g.held {
		hs[p] = h
	}
	g.mu.Unlock()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for p, h := range hs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			h.mu.Lock()
			err := g.leases.Renew(ctx, h.l)
			h.mu.Unlock()
			if errors.Is(err, ErrLost) {
				g.forget(p, h)
			}
		}()
	}
	wg.Wait()
}

// look lists the bucket: the live members (this one included), this
// one's rank among them by name, and the partitions someone holds.
func (g *Group) look(ctx context.Context) (members, rank int, taken map[int]bool, err error) {
	keys, err := g.kv.ListKeys(ctx)
	if err != nil {
		if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
			return 0, 0, nil, &Error{Code: CodeBucket, Op: "look", Err: err}
		}
		return 0, 0, nil, &Error{Code: CodeUnavailable, Op: "look", Err: err}
	}
	taken = map[int]bool{}
	self := false
	members0, unit := membersOf(g.leases.unit), cmpOr(g.leases.unit, Partition)+"."
	for k := range keys.Keys() {
		if name, ok := strings.CutPrefix(k, members0); ok {
			members++
			self = self || name == g.name
			if name < g.name {
				rank++
			}
			continue
		}
		if rest, ok := strings.CutPrefix(k, unit); ok {
			if p, err := strconv.Atoi(rest); err == nil {
				taken[p] = true
			}
		}
	}
	if !self {
		members++ // its heartbeat is not listed yet
	}
	return members, rank, taken, nil
}

// preference is the order in which the engine takes partitions:
// rendezvous hashing of its name with each partition, highest first.
func (g *Group) preference() []int {
	type w struct {
		p int
		h uint64
	}
	ws := make([]w, g.cfg.Partitions)
	var b [4]byte
	for p := range ws {
		h := fnv.New64a()
		h.Write([]byte(g.name))
		binary.BigEndian.PutUint32(b[:], uint32(p))
		h.Write(b[:])
		ws[p] = w{p, h.Sum64()}
	}
	slices.SortFunc(ws, func(a, b w) int {
		switch {
		case a.h > b.h:
			return -1
		case a.h < b.h:
			return 1
		}
		return a.p - b.p
	})
	out := make([]int, len(ws))
	for i, x := range ws {
		out[i] = x.p
	}
	return out
}

func (g *Group) release(ctx context.Context, p int) {
	g.mu.Lock()
	h := g.held[p]
	delete(g.held, p)
	g.mu.Unlock()
	if h != nil {
		h.mu.Lock()
		_ = g.leases.Release(ctx, h.l)
		h.mu.Unlock()
	}
}

// leave releases every lease and the membership, for a handover without
// waiting for the TTL.
func (g *Group) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, p := range g.Held() {
		g.release(ctx, p)
	}
	_ = g.kv.Delete(ctx, UnitMemberKey(g.leases.unit, g.name))
	if g.cfg.OnChange != nil {
		g.cfg.OnChange(nil)
	}
}

// Owner is who holds number p of the group's unit: the holder's name and
// what its member key holds (GroupConfig.Member). ErrNotFound-like
// answers are an *Error of CodeHeld with no Holder: nobody holds p now
// (a handover under way).
func (g *Group) Owner(ctx context.Context, p int) (name string, member []byte, err error) {
	key := UnitKey(cmpOr(g.leases.unit, Partition), p)
	cur, err := g.kv.Get(ctx, key)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return "", nil, &Error{Code: CodeHeld, Op: "owner", Key: key, Err: errors.New("nobody holds it")}
		}
		return "", nil, &Error{Code: CodeUnavailable, Op: "owner", Key: key, Err: err}
	}
	var v value
	if err := json.Unmarshal(cur.Value(), &v); err != nil || v.Owner == "" {
		return "", nil, &Error{Code: CodeUnavailable, Op: "owner", Key: key, Err: fmt.Errorf("a lease value that is not one: %q", cur.Value())}
	}
	m, err := g.kv.Get(ctx, UnitMemberKey(g.leases.unit, v.Owner))
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return v.Owner, nil, nil // its membership expired first: the name alone
		}
		return v.Owner, nil, &Error{Code: CodeUnavailable, Op: "owner", Key: key, Err: err}
	}
	return v.Owner, m.Value(), nil
}

// Name is the engine's name in the group.
func (g *Group) Name() string { return g.name }
