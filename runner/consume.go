package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/wire"
)

// batch is consecutive messages of the stream, dispatched together: a
// validator takes a batch at a time, each shard its own items of it, so
// that the hand-overs between goroutines are paid per batch, not per
// message.
type batch struct {
	items []*item
	ready chan struct{} // closed once every artifact of items is validated
}

// PullBytes is how much the engine's consumer asks the server for at a
// time (a pull request; the next goes out when half is consumed). Under a
// saturating ingest the server serves a pull request late, so a small one
// (2,048 messages) let the projection fall seconds behind; by bytes, the
// client's buffer stays bounded whatever the messages' size (within the
// NATS client's 64 MB for a subscription).
const PullBytes = 32 << 20

// A batch is dispatched once it holds batchMax messages, when the stream
// has no more for now (the message's pending count is 0), or batchWait
// after its first message, whichever comes first: a batch waits only
// while more messages are on their way.
const (
	batchMax  = 64
	batchWait = 500 * time.Microsecond
)

// Reverifiers is the number of goroutines that re-verify provenance
// annotations: they wait on files and git processes rather than compute,
// so there are more of them than cores, and a slow substrate does not
// occupy the validators.
const Reverifiers = 8

// Run consumes the stream until ctx ends or the consumer does, then
// writes last snapshots. It returns nil when ctx ended it; when the
// consumer ended first (the connection closed, the stream deleted), an
// error that says so and why, once everything it started has stopped.
func (r *Runner) Run(ctx context.Context) error {
	if r.parts != nil {
		return r.setRun(ctx)
	}

	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy, NamePrefix: r.consumerPrefix}
	if r.start > 0 {
		cfg = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: ledger.Sequence(r.start) + 1, NamePrefix: r.consumerPrefix}
	}
	cons, err := r.js.OrderedConsumer(ctx, r.Stream(), cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it began: nothing was applied
		}
		return fmt.Errorf("service: ordered consumer: %w", err)
	}
	// Validation is the fold's costliest part and pure: it runs ahead, on
	// every core, and each shard applies its messages in stream order as
	// their validation completes.
	// Re-verification of provenance annotations (files, git) runs on
	// goroutines of its own, outside any lock, for the EVIDENCE a
	// deliberation's policy judges: its shard hands it over and holds back
	// that deliberation's messages until it is done, going on with the
	// others.
	validate := make(chan *batch, 1024)
	r.reverify = make(chan *item, 4096)
	var validators, reverifiers sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		validators.Add(1)
		go func() {
			defer validators.Done()
			for b := range validate {
				for _, it := range b.items {
					if it.ready != nil {
						// The message's leaf in its deliberation's log
						// hashes its bytes: here, not in the fold (a
						// control message, which no validator waits for,
						// is hashed by the fold).
						projector.PrepareLeaf(&it.m)
						it.m.Artifact, it.m.Invalid = r.opts.Validator.ValidateTransient(it.m.Data)
						// An Ed25519 verification costs as much as a
						// validation: here too, not in the fold.
						projector.PrepareSignature(&it.m)
					}
				}
				close(b.ready)
			}
		}()
	}
	for range Reverifiers {
		reverifiers.Add(1)
		go func() {
			defer reverifiers.Done()
			for it := range r.reverify {
				it.rev = provenance.Reverify(it.m.Artifact, r.verify)
				close(it.reverified)
				signal(it.shard.wake)
			}
		}()
	}
	shardCtx, stopShards := context.WithCancel(context.Background())
	var shards sync.WaitGroup
	for _, s := range r.shards {
		shards.Add(1)
		go func() {
			defer shards.Done()
			r.runShard(shardCtx, s)
		}()
	}
	// What runs beside the consumer (the snapshot loop, the stream's
	// watch) stops when it does, whatever ended it.
	besideCtx, endBeside := context.WithCancel(ctx)
	defer endBeside()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.snapshotLoop(besideCtx)
	}()
	consumeErrs, gone := make(chan struct{}, 1), make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.watchStream(besideCtx, consumeErrs, gone)
	}()
	// The consumer's handler runs on one goroutine of the NATS client; a
	// reset of the ordered consumer (a node lost) starts another, so the
	// handler takes mu, and a position it has already taken is dropped.
	// It gathers messages into a batch (batchMax, batchWait), which flush
	// hands to the validators and the shards. After stop, nothing more is
	// taken.
	var (
		mu      sync.Mutex
		stop    bool
		taken   = r.dispatched.Load()
		cur     = make([]*item, 0, batchMax)
		counts  = make([]int, len(r.shards))
		lastErr atomic.Value // the consumer's last error, for the message should it end
	)
	flush := func() { // mu held
		if len(cur) == 0 {
			return
		}
		b := &batch{items: cur}
		cur = make([]*item, 0, batchMax)
		for _, it := range b.items {
			if strings.Contains(it.m.Subject, ".art.") {
				if b.ready == nil {
					b.ready = make(chan struct{})
				}
				it.ready = b.ready
			}
		}
		if b.ready != nil {
			validate <- b
		}
		// Each shard's items, in stream order, carved out of one array.
		clear(counts)
		for _, it := range b.items {
			counts[it.shard.i]++
		}
		all := make([]*item, len(b.items))
		off := 0
		for i, n := range counts {
			counts[i] = off
			off += n
		}
		for _, it := range b.items {
			all[counts[it.shard.i]] = it
			counts[it.shard.i]++
		}
		from := 0
		for i, to := range counts {
			if to > from {
				part := all[from:to:to]
				s := r.shards[i]
				s.enq.Store(part[len(part)-1].m.Seq)
				s.in <- part
			}
			from = to
		}
		r.dispatched.Store(b.items[len(b.items)-1].m.Seq)
		// A shard with nothing of the batch is complete up to its end.
		r.advanced()
	}
	timer := time.AfterFunc(time.Hour, func() {
		mu.Lock()
		if !stop {
			flush()
		}
		mu.Unlock()
	})
	timer.Stop()
	take := func(msg jetstream.Msg) {
		// The message's bytes are taken of the budget before mu: the
		// timer's flush, which takes mu, hands on what the batch holds,
		// so a wait here always ends.
		cost := r.budget.take(held(msg))
		mu.Lock()
		defer mu.Unlock()
		if stop {
			r.budget.give(cost)
			return
		}
		seq, ts, pending, ok := ackMetadata(msg.Reply())
		if !ok {
			r.log.Error("message without metadata", "subject", msg.Subject(), "reply", msg.Reply())
			r.budget.give(cost)
			return
		}
		seq = r.pos(seq)
		if seq <= taken {
			r.budget.give(cost)
			return // delivered again across a reset
		}
		taken = seq
		// An importer's message says what it restores in its headers;
		// an artifact's may carry its signature; nobody else's headers
		// are read (projector.ImportOf, projector.SignatureOf).
		// The fold sees the subject as published: a stored subject of the
		// partitioned layout is mapped back (ledger.Layout.Original); one
		// the mapping did not make (a misplaced partition) stays as it is,
		// names no deliberation, and is rejected (subject.invalid).
		subject, _ := r.layout.Original(msg.Subject())
		m := projector.Msg{Seq: seq, Subject: subject, Data: msg.Data(), Time: time.Unix(0, ts)}
		if h := msg.Headers(); h != nil {
			m.Import = projector.ImportOf(m.Subject, h.Get)
			m.Signature = projector.SignatureOf(m.Subject, h)
		}
		cur = append(cur, &item{m: m, pending: pending, cost: cost, shard: r.shardOf(wire.DeliberationOf(m.Subject))})
		switch {
		case pending == 0 || len(cur) >= batchMax:
			flush()
		case len(cur) == 1:
			timer.Reset(batchWait)
		}
	}
	// A heartbeat a second: when the node serving the consumer is lost (a
	// stream leader killed), the ordered consumer notices in two seconds
	// and resumes elsewhere, instead of ten with the default. The handler
	// form, not the iterator: the iterator arms a new timer for every
	// message (a tenth of the consumer's CPU).
	cc, err := cons.Consume(take, jetstream.PullMaxBytes(PullBytes), jetstream.PullExpiry(5*time.Second), jetstream.PullHeartbeat(time.Second),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			lastErr.Store(fmt.Sprint(err))
			r.log.Debug("consume", "position", r.Position(), "err", err)
			signal(consumeErrs) // called under the consumer's lock: no waiting here
		}))
	var runErr error
	if err != nil {
		runErr = fmt.Errorf("service: consume: %w", err)
	} else {
		closed := cc.Closed()
		select {
		case <-ctx.Done():
			// Stop waits for the ordered consumer's lock, which a reset
			// holds between its attempts to recreate the consumer (up to
			// 10 s apart while the stream is unreachable): not here.
			go cc.Stop()
			select {
			case <-closed:
			case <-time.After(5 * time.Second):
				r.log.Warn("the consumer did not stop within 5 s; going on without it")
			}
		case <-closed:
			if ctx.Err() == nil {
				why, _ := lastErr.Load().(string)
				runErr = fmt.Errorf("service: consume ended at position %d: %s", r.Position(), cmp.Or(why, "the consumer closed"))
			}
		case err := <-gone:
			// Nothing more can arrive; the consumer stops once its reset
			// lets go (stop keeps out whatever it still hands over).
			go cc.Stop()
			runErr = fmt.Errorf("service: consume ended at position %d: the stream %s is gone: %w", r.Position(), r.Stream(), err)
		}
	}
	endBeside()
	mu.Lock()
	flush()
	stop = true
	mu.Unlock()
	timer.Stop()
	close(validate)
	validators.Wait()
	wg.Wait()
	// The shards apply what they were handed, then stop.
	for _, s := range r.shards {
		close(s.in)
	}
	shards.Wait()
	close(r.reverify)
	reverifiers.Wait()
	stopShards()
	if err := r.Snapshot(); err != nil {
		r.log.Error("final snapshot", "err", err)
	}
	return runErr
}

// streamRecheck is how long after a consumer error the runner asks again
// whether the stream is still there.
const streamRecheck = time.Second

// watchStream sends on gone the error that says the stream is gone, once
// it is. The ordered consumer recreates its consumer on the server
// whenever it is lost (a node lost, the consumer deleted) and, while the
// stream is gone, retries for ever without reporting anything after the
// first error. So on each error of the consumer (errs) the runner asks
// for the stream at once and again streamRecheck later (in a cluster the
// stream's removal may reach the server asked after the consumer's); two
// answers in a row that it does not exist (a cluster electing its
// leaders may answer so for a moment, as the engine's health check
// knows) and it is gone.
func (r *Runner) watchStream(ctx context.Context, errs <-chan struct{}, gone chan<- error) {
	recheck := time.NewTimer(streamRecheck)
	recheck.Stop()
	defer recheck.Stop()
	notFound := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-errs:
			recheck.Reset(streamRecheck)
		case <-recheck.C:
		}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := r.js.Stream(lctx, r.Stream())
		cancel()
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			notFound = 0
			continue
		}
		if notFound++; notFound >= 2 {
			gone <- err
			return
		}
		recheck.Reset(streamRecheck)
	}
}

// held is about what a message holds in memory until it is applied: its
// subject, its headers (the client keeps them in its data's buffer) and
// its data.
func held(msg jetstream.Msg) int64 {
	n := len(msg.Subject()) + len(msg.Data())
	for k, vs := range msg.Headers() {
		for _, v := range vs {
			n += len(k) + len(v)
		}
	}
	return int64(n)
}

// ackMetadata reads a JetStream message's stream position, time and the
// number of messages after it from its reply subject, without the
// allocations of jetstream.Msg.Metadata:
//
//	$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>
//	$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>[.<token>...]
func ackMetadata(reply string) (seq uint64, ts int64, pending uint64, ok bool) {
	const prefix = "$JS.ACK."
	if !strings.HasPrefix(reply, prefix) {
		return 0, 0, 0, false
	}
	var tok [12]string
	n := 2
	rest := reply[len(prefix):]
	for n < len(tok) && rest != "" {
		i := strings.IndexByte(rest, '.')
		if i < 0 {
			tok[n], rest = rest, ""
		} else {
			tok[n], rest = rest[:i], rest[i+1:]
		}
		n++
	}
	base := 0 // v2: the domain and account hash come first
	switch {
	case n == 9 && rest == "":
		base = -2
	case n >= 11:
	default:
		return 0, 0, 0, false
	}
	seq, ok1 := ackNum(tok[7+base])
	t, ok2 := ackNum(tok[9+base])
	pending, ok3 := ackNum(tok[10+base])
	if !ok1 || !ok2 || !ok3 || seq == 0 || t > math.MaxInt64 {
		return 0, 0, 0, false
	}
	return seq, int64(t), pending, true
}

func ackNum(s string) (uint64, bool) {
	if s == "" || len(s) > 19 {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + uint64(s[i]-'0')
	}
	return n, true
}
