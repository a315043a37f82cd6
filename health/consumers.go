package health

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Participants read the stream with consumers, so they may create them;
// NATS permissions cannot tell a push consumer from a pull one (both are
// created on $JS.API.CONSUMER.CREATE.PARLEY.…, the configuration is in the
// body), and the server does not check a push consumer's deliver subject
// against its creator's permissions. A participant's push consumer could
// so have the server deliver the stream onto the query API's subjects, a
// binding announcement's, or another client's. The engine deletes every
// push consumer of its stream whose deliver subject is not under
// consumerInbox: when the advisory of its creation arrives, and in a sweep
// at start and every sweepEvery checks. Until then (a few milliseconds
// after an advisory; the sweep's interval when the advisories are not
// received) the server may deliver: the receivers ignore such deliveries
// (microapi's onlyRequests, client.SubscribeBindings), which is what makes them
// harmless; the deletion ends the traffic.

// consumerInbox is the deliver-subject prefix a push consumer may have:
// the inbox prefix of nats.go's push subscriptions.
const consumerInbox = "_INBOX."

// sweepEvery is how many stream checks go between two sweeps of the
// stream's consumers (30 s at the default interval).
const sweepEvery = 15

// consumerAdvisory is the advisory of a consumer created on the stream.
func (w *Watch) consumerAdvisory() string {
	return "$JS.EVENT.ADVISORY.CONSUMER.CREATED." + w.name + "."
}

// consumerDeletedAdvisory is the advisory of a consumer of the stream
// deleted (by its reader, the server for idleness, or the engine).
func (w *Watch) consumerDeletedAdvisory() string {
	return "$JS.EVENT.ADVISORY.CONSUMER.DELETED." + w.name + "."
}

// allowedConsumer reports whether a consumer of the stream may stay: a
// pull consumer, or a push consumer delivering to an inbox.
func allowedConsumer(cfg jetstream.ConsumerConfig) bool {
	return cfg.DeliverSubject == "" || strings.HasPrefix(cfg.DeliverSubject, consumerInbox)
}

// onConsumerCreated queues the consumer an advisory names for inspection
// (the watch's goroutine reads it; a full queue leaves it to the sweep).
// Once the API audit names created consumers (onConsumerAudit), with
// their configuration, the bare advisory is left alone: the audit costs
// no request to the server, which matters when the server is busiest,
// under a flood of creations.
func (w *Watch) onConsumerCreated(subject string) {
	if w.audited.Load() {
		return
	}
	w.queueConsumer(&jetstream.ConsumerInfo{Name: subject[len(w.consumerAdvisory()):]}, false)
}

// consumerCreate begins the API subjects a consumer of the stream is
// created on (…PARLEY alone, the old form, and …PARLEY.<name>[.<filter>]).
func (w *Watch) consumerCreate() string {
	return "$JS.API.CONSUMER.CREATE." + w.name + "."
}

// onConsumerAudit queues a consumer the API audit says was created, with
// its configuration and creation time from the server's answer.
func (w *Watch) onConsumerAudit(data []byte) {
	var a struct {
		Subject  string `json:"subject"`
		Response string `json:"response"`
	}
	if json.Unmarshal(data, &a) != nil || !strings.HasPrefix(a.Subject+".", w.consumerCreate()) {
		return
	}
	var info struct {
		jetstream.ConsumerInfo
		Error *struct{} `json:"error"`
	}
	if json.Unmarshal([]byte(a.Response), &info) != nil || info.Error != nil || info.Name == "" {
		return
	}
	w.audited.Store(true)
	// Only what inspectConsumer reads is queued: the configuration is the
	// creator's, and may be large (descriptions, metadata, filters); the
	// name and the deliver subject are bounded by the server's subject
	// limits.
	w.queueConsumer(&jetstream.ConsumerInfo{Name: info.Name, Created: info.Created,
		Config: jetstream.ConsumerConfig{DeliverSubject: info.Config.DeliverSubject}}, true)
}

// seenConsumer is a consumer to inspect: its information, whole when the
// audit gave it, else only its name.
type seenConsumer struct {
	info  *jetstream.ConsumerInfo
	whole bool
}

func (w *Watch) queueConsumer(info *jetstream.ConsumerInfo, whole bool) {
	select {
	case w.consumers <- seenConsumer{info, whole}:
	default:
		// A full queue: the next check sweeps every consumer.
		w.sweepDue.Store(true)
	}
}

// DefaultMaxConsumers bounds the consumers of the stream that are not the
// engine's own (Config.MaxConsumers): the readers' (participants read the
// stream with ordered push consumers; a client without credentials may
// create none), an export's, a witness's. A consumer lives in the server
// until it is deleted or idle for a time its creator chooses. The server
// refuses a stream's consumers past 1,000 (nats-server's default, for a
// stream and an account that set none): without this bound one reader
// could fill those, and the engine could not make its own consumer again
// (after a lost connection, say) nor any honest reader one. Half of the
// server's leaves the rest to the engine, and to the new consumers made
// in the moment before the engine learns of them.
const DefaultMaxConsumers = 500

// ConsumerStats are the consumer bound's counts.
type ConsumerStats struct {
	Max     int       // the bound
	InUse   int       // consumers of the stream not the engine's the watch knows of
	Limited uint64    // consumers deleted past the bound
	LastHit time.Time // the last one
}

// ConsumerBound returns the consumer bound's counts as
// metrics.BoundSources.Consumers reads them.
func (w *Watch) ConsumerBound() (limit, inUse int, hits uint64, last time.Time) {
	st := w.ConsumerStats()
	return st.Max, st.InUse, st.Limited, st.LastHit
}

// ConsumerStats returns the consumer bound's counts.
func (w *Watch) ConsumerStats() ConsumerStats {
	w.cmu.Lock()
	defer w.cmu.Unlock()
	return ConsumerStats{Max: w.maxConsumers, InUse: len(w.known), Limited: w.limited, LastHit: w.lastLimited}
}

// consumerInfo reads a consumer's information, a push one's or a pull
// one's.
func (w *Watch) consumerInfo(ctx context.Context, name string) *jetstream.ConsumerInfo {
	if c, err := w.stream.PushConsumer(ctx, name); err == nil {
		return c.CachedInfo()
	}
	if c, err := w.stream.Consumer(ctx, name); err == nil {
		return c.CachedInfo()
	}
	return nil // gone already, or unreadable (the sweep tries again)
}

// inspectConsumer deletes the consumer name if it may not stay: a push
// consumer delivering outside the inboxes, or, past the bound, the newest
// of the consumers not the engine's.
func (w *Watch) inspectConsumer(ctx context.Context, c seenConsumer) {
	if w.own(c.info.Name) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info := c.info
	if !c.whole {
		if info = w.consumerInfo(ctx, info.Name); info == nil {
			return
		}
	}
	if !allowedConsumer(info.Config) {
		w.judgeConsumer(ctx, info)
		return
	}
	w.cmu.Lock()
	w.known[info.Name] = info.Created
	over := w.overBound()
	w.cmu.Unlock()
	for _, n := range over {
		w.limitConsumer(ctx, n)
	}
}

// overBound returns the newest of the known consumers past the bound and
// forgets them (w.cmu held).
func (w *Watch) overBound() []string {
	if len(w.known) <= w.maxConsumers {
		return nil
	}
	type c struct {
		name    string
		created time.Time
	}
	all := make([]c, 0, len(w.known))
	for n, t := range w.known {
		all = append(all, c{n, t})
	}
	slices.SortFunc(all, func(a, b c) int {
		if d := a.created.Compare(b.created); d != 0 {
			return d
		}
		return strings.Compare(a.name, b.name)
	})
	var over []string
	for _, x := range all[w.maxConsumers:] {
		over = append(over, x.name)
		delete(w.known, x.name)
	}
	return over
}

// onConsumerDeleted forgets a consumer the server deleted.
func (w *Watch) onConsumerDeleted(subject string) {
	name := subject[len(w.consumerDeletedAdvisory()):]
	w.cmu.Lock()
	delete(w.known, name)
	w.cmu.Unlock()
}

// own reports whether the consumer is the engine's own.
func (w *Watch) own(name string) bool { return w.r != nil && w.r.OwnsConsumer(name) }

// limitConsumer deletes a consumer past the bound.
func (w *Watch) limitConsumer(ctx context.Context, name string) {
	if err := w.stream.DeleteConsumer(ctx, name); err != nil {
		return // gone already; the sweep tries again
	}
	w.cmu.Lock()
	w.limited++
	w.lastLimited = time.Now()
	n := w.limited
	w.cmu.Unlock()
	w.m.ConsumerLimited()
	if n == 1 || n%1000 == 0 {
		w.log.Warn("deleted a consumer of the stream past the bound on consumers", "consumer", name, "bound", w.maxConsumers, "deleted_so_far", n)
	}
}

func (w *Watch) judgeConsumer(ctx context.Context, info *jetstream.ConsumerInfo) {
	if info == nil || allowedConsumer(info.Config) {
		return
	}
	err := w.stream.DeleteConsumer(ctx, info.Name)
	if err != nil {
		w.log.Warn("a push consumer delivers the stream outside the inboxes, and deleting it failed", "consumer", info.Name, "deliver_subject", info.Config.DeliverSubject, "err", err)
		return
	}
	w.m.ConsumerRemoved()
	w.log.Warn("deleted a push consumer that delivered the stream outside the inboxes", "consumer", info.Name, "deliver_subject", info.Config.DeliverSubject)
}

// sweepConsumers judges every consumer of the stream: it deletes those
// delivering outside the inboxes, then, past the bound, the newest of
// the others (the oldest readers keep theirs).
func (w *Watch) sweepConsumers(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l := w.stream.ListConsumers(ctx)
	var bad []*jetstream.ConsumerInfo
	known := map[string]time.Time{}
	for info := range l.Info() {
		switch {
		case w.own(info.Name):
		case !allowedConsumer(info.Config):
			bad = append(bad, info)
		default:
			known[info.Name] = info.Created
		}
	}
	if l.Err() != nil {
		return
	}
	for _, info := range bad {
		w.judgeConsumer(ctx, info)
	}
	w.cmu.Lock()
	w.known = known
	over := w.overBound()
	w.cmu.Unlock()
	for _, n := range over {
		w.limitConsumer(ctx, n)
	}
}
