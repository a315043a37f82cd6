// Package ledger is the JetStream side of parley: the PARLEY stream that
// holds every artifact and control message, the configuration that keeps
// it whole, the ordered consumer participants read it with (Reader), and
// the JetStream API errors the engine tells apart (IsWrongLastSequence,
// IsLostRace and the others: errors.go). Its name, subjects and the
// publishers' dedupe ids are wire's; the partitioned record, stored under
// the server's subject mapping in PARLEY_0000_1023, is the other Layout
// (layout.go, docs/SCALING.md).
//
// The stream is the record. Its configuration must make dropping or
// erasing a message impossible through the engine: file storage, no age,
// count or size limit, Discard New (a full disk refuses writes instead of
// dropping old ones), DenyDelete and DenyPurge (which cannot be turned off
// later), no rollup, no message TTLs. Check reports every way a
// configuration falls short; Ensure creates the stream or refuses one that
// falls short. Deleting the stream itself is not prevented by any stream
// setting: deploy/nats.conf denies it to every user but the administrator.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/wire"
)

// DuplicateWindow is the stream's dedupe window. It only absorbs client
// retries; permanent idempotency is the projector's.
const DuplicateWindow = 2 * time.Minute

// StreamConfig returns the configuration of the PARLEY stream with the
// given number of replicas (1 embedded, 3 on a cluster).
func StreamConfig(replicas int) jetstream.StreamConfig {
	if replicas < 1 {
		replicas = 1
	}
	return jetstream.StreamConfig{
		Name:              wire.StreamName,
		Description:       "parley: the append-only record of every deliberation",
		Subjects:          wire.StreamSubjects,
		Retention:         jetstream.LimitsPolicy,
		MaxConsumers:      -1,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxAge:            0,
		MaxMsgsPerSubject: -1,
		MaxMsgSize:        -1,
		Discard:           jetstream.DiscardNew,
		Storage:           jetstream.FileStorage,
		Replicas:          replicas,
		Duplicates:        DuplicateWindow,
		DenyDelete:        true,
		DenyPurge:         true,
		AllowRollup:       false,
		AllowDirect:       true,
		// Import publishes in atomic batches (all of a batch or none).
		AllowAtomicPublish: true,
		Metadata:           map[string]string{"parley.protocol": "0.1"},
	}
}

// ErrUnsafeStream is returned, wrapped, for a stream whose configuration
// could drop or erase messages.
var ErrUnsafeStream = errors.New("ledger: the PARLEY stream could drop or erase messages")

// Check lists every way cfg could drop or erase messages, or fail to hold
// parley's subjects (those of the unpartitioned layout; Layout.Check for
// another). It returns nil for a safe configuration.
func Check(cfg jetstream.StreamConfig) error { return check(cfg, wire.StreamSubjects) }

func check(cfg jetstream.StreamConfig, subjects []string) error {
	var p []string
	if cfg.Storage != jetstream.FileStorage {
		p = append(p, "storage is not file (memory storage loses everything on restart)")
	}
	if cfg.Retention != jetstream.LimitsPolicy {
		p = append(p, "retention is "+cfg.Retention.String()+" (messages would be removed once consumed)")
	}
	if cfg.MaxAge > 0 {
		p = append(p, fmt.Sprintf("max_age is %s (old messages would expire)", cfg.MaxAge))
	}
	if cfg.MaxMsgs > 0 {
		p = append(p, fmt.Sprintf("max_msgs is %d", cfg.MaxMsgs))
	}
	if cfg.MaxBytes > 0 {
		p = append(p, fmt.Sprintf("max_bytes is %d", cfg.MaxBytes))
	}
	if cfg.MaxMsgsPerSubject > 0 {
		p = append(p, fmt.Sprintf("max_msgs_per_subject is %d", cfg.MaxMsgsPerSubject))
	}
	if cfg.Discard != jetstream.DiscardNew {
		p = append(p, "discard is old (a limit would drop old messages instead of refusing new ones)")
	}
	if !cfg.DenyDelete {
		p = append(p, "deny_delete is off (single messages could be deleted)")
	}
	if !cfg.DenyPurge {
		p = append(p, "deny_purge is off (the stream could be purged)")
	}
	if cfg.AllowRollup {
		p = append(p, "allow_rollup is on (a rollup purges earlier messages)")
	}
	if cfg.AllowMsgTTL {
		p = append(p, "allow_msg_ttl is on (messages could expire)")
	}
	if cfg.SubjectDeleteMarkerTTL > 0 {
		p = append(p, "subject_delete_marker_ttl is set")
	}
	var missing []string
	for _, s := range subjects {
		if !slices.Contains(cfg.Subjects, s) {
			missing = append(missing, s)
		}
	}
	// A partitioned stream has hundreds of subjects: name a few.
	const named = 4
	switch {
	case len(missing) > named:
		p = append(p, fmt.Sprintf("subjects do not include %s and %d more of its %d", strings.Join(missing[:named], ", "), len(missing)-named, len(subjects)))
	case len(missing) > 0:
		p = append(p, "subjects do not include "+strings.Join(missing, ", "))
	}
	if len(p) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrUnsafeStream, strings.Join(p, "; "))
}

// Ensure creates the PARLEY stream if it does not exist, and otherwise
// checks the existing one, refusing it (wrapping ErrUnsafeStream) when it
// could drop or erase messages. It never changes an existing stream.
func Ensure(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.Stream, error) {
	return ensure(ctx, js, Unpartitioned, 0, replicas, true)
}

// Existing looks up the stream and checks it as Ensure does, but never
// creates it: a missing stream is jetstream.ErrStreamNotFound.
func Existing(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	return ensure(ctx, js, Unpartitioned, 0, 0, false)
}

func ensure(ctx context.Context, js jetstream.JetStream, l Layout, k, replicas int, create bool) (jetstream.Stream, error) {
	name := l.StreamAt(k)
	s, err := js.Stream(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound) && !create:
		return nil, fmt.Errorf("ledger: stream %s: %w", name, err)
	case errors.Is(err, jetstream.ErrStreamNotFound):
		s, err = js.CreateStream(ctx, l.StreamConfigAt(k, replicas))
		if err != nil {
			return nil, fmt.Errorf("ledger: create stream %s: %w", name, err)
		}
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("ledger: look up stream %s: %w", name, err)
	}
	if err := l.CheckAt(k, s.CachedInfo().Config); err != nil {
		return nil, err
	}
	return s, nil
}
