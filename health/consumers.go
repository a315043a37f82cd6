package health

import (
	"context"
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

// allowedConsumer reports whether a consumer of the stream may stay: a
// pull consumer, or a push consumer delivering to an inbox.
func allowedConsumer(cfg jetstream.ConsumerConfig) bool {
	return cfg.DeliverSubject == "" || strings.HasPrefix(cfg.DeliverSubject, consumerInbox)
}

// onConsumerCreated queues the consumer an advisory names for inspection
// (the watch's goroutine reads it; a full queue leaves it to the sweep).
func (w *Watch) onConsumerCreated(subject string) {
	name := subject[len(w.consumerAdvisory()):]
	select {
	case w.consumers <- name:
	default:
	}
}

// inspectConsumer deletes the consumer name if it may not stay.
func (w *Watch) inspectConsumer(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := w.stream.PushConsumer(ctx, name)
	if err != nil {
		return // a pull consumer, gone already, or unreadable (the sweep tries again)
	}
	w.judgeConsumer(ctx, c.CachedInfo())
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

// sweepConsumers judges every consumer of the stream.
func (w *Watch) sweepConsumers(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l := w.stream.ListConsumers(ctx)
	var bad []*jetstream.ConsumerInfo
	for info := range l.Info() {
		if !allowedConsumer(info.Config) {
			bad = append(bad, info)
		}
	}
	for _, info := range bad {
		w.judgeConsumer(ctx, info)
	}
}
