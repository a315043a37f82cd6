package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/lease"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/signing"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/tlog"
	"github.com/parley-engine/parley/wire"
)

// Supervisor runs the termination supervisor: it judges every deliberation
// with termination.Decide and publishes what it decides as _supervisor,
// each publish guarded by the expected last sequence of the deliberation's
// subjects. It judges time by its clock (Now: the runner's, Config.Clock);
// the decision is pure.
type Supervisor struct {
	r   *Runner
	js  jetstream.JetStream
	log *slog.Logger
	// Now is the clock every judgment is made at: the settle, MaxWait,
	// the limits that depend on time (termination.Decide), the back-off
	// after a refusal. NewSupervisor sets it to the runner's clock
	// (Config.Clock).
	Now func() time.Time
	// Every is the interval between Run's steps.
	Every time.Duration
	// Key is the engine's key (an nkeys user key pair; nil: none). With a
	// key, the supervisor signs every emission with it (Parley-Key,
	// Parley-Signature) and publishes a signed checkpoint of a
	// deliberation's log once a judgment in it is due one
	// (Deliberation.CheckpointDue; docs/VERIFY.md).
	Key nkeys.KeyPair

	// Settle is how long a deliberation should have been quiet (no new
	// message seen) before Step judges it, so that a burst (a relay turn)
	// is judged once it has landed. Zero judges at once.
	Settle time.Duration
	// MaxWait bounds the settle: a deliberation that changed is judged at
	// the latest MaxWait after the first change not yet judged, however
	// its messages keep coming (anyone who may publish on its subjects, a
	// token the charter does not name included, could otherwise postpone
	// every judgment by publishing junk more often than Settle). A due
	// judgment is thus published within MaxWait + Every of the message
	// that made it due (DefaultMaxWait + the 250 ms tick: 1 s), plus the
	// publish. Zero: DefaultMaxWait.
	MaxWait time.Duration

	// Fence, when set, makes the supervisor one of several engines that
	// share the deliberations by partition leases (lease.Group): it
	// judges only the deliberations whose lease Fence holds, and renews
	// that lease right before each publish, the barrier a stale owner
	// stops at; the publish carries the lease's stamp (lease.Header). The
	// expected-last-sequence guard of every publish does the rest: an
	// owner that lost its lease between the renewal and the publish
	// finds the deliberation moved on if the new owner wrote first
	// (docs/SCALING.md, "Fencing a write").
	Fence Fence

	mu     sync.Mutex
	judged map[string]uint64 // deliberation -> position last judged with nothing to do
	seen   map[string]seenAt // deliberation -> position and when it was first seen
	// refused: deliberation -> when the projector last refused one of the
	// supervisor's own emissions (a clock ahead of the stream's, say); the
	// deliberation is not judged again for projector.ClockSkew.
	refused map[string]time.Time
}

// Fence is what a supervisor that shares the deliberations with other
// engines asks before it judges and writes (Supervisor.Fence).
type Fence interface {
	// Holds reports whether the engine holds the lease of the
	// deliberation's partition.
	Holds(deliberation string) bool
	// Renew renews that lease right before a write, and returns its stamp
	// for the write's lease.Header; an error means: write nothing.
	Renew(ctx context.Context, deliberation string) (stamp string, err error)
}

// ErrNotOwner is returned, wrapped, when the supervisor's fence refused a
// write: the engine no longer holds the deliberation's partition (another
// engine does, or will once the lease expires), or could not renew it.
var ErrNotOwner = errors.New("service: this engine does not hold the deliberation's partition")

type seenAt struct {
	position uint64
	at       time.Time // when position was first seen
	since    time.Time // when the first change not yet judged was seen
}

// DefaultMaxWait is the default of Supervisor.MaxWait.
const DefaultMaxWait = 750 * time.Millisecond

// Rejudge bounds the judgments again at once, in one Step, of a
// deliberation whose guarded publish lost the race to a message that
// arrived after the position judged.
const Rejudge = 8

// NewSupervisor returns a supervisor over the runner's projection.
func NewSupervisor(r *Runner, js jetstream.JetStream, log *slog.Logger) *Supervisor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := r.clock
	if now == nil {
		now = time.Now
	}
	return &Supervisor{r: r, js: js, log: log, Now: now, Every: 250 * time.Millisecond, judged: map[string]uint64{}, seen: map[string]seenAt{},
		refused: map[string]time.Time{}}
}

// Job is what the supervisor decided for one deliberation at a position.
type Job struct {
	Deliberation string
	Position     uint64
	Emissions    []termination.Emission
	// Checkpoint, when not nil, is the signed checkpoint of the log of
	// Size messages (a job has emissions or a checkpoint, not both: a
	// checkpoint is due once the judgment is in the log).
	Checkpoint []byte
	Size       uint64
}

// Judge decides, for every deliberation that is open, suspended, or ended
// by a control message, what to publish at time now.
func (s *Supervisor) Judge(now time.Time) []Job { return s.judge(now, 0) }

func (s *Supervisor) judge(now time.Time, settle time.Duration) []Job {
	var jobs []Job
	s.mu.Lock()
	defer s.mu.Unlock()
	s.r.EachDeliberation(func(d *projector.Deliberation) {
		if s.Fence != nil && !s.Fence.Holds(d.ID) {
			return
		}
		if j, ok := s.decide(d, now, settle); ok {
			jobs = append(jobs, j)
		}
	})
	return jobs
}

// judgeOne judges deliberation id alone, at once (no settle).
func (s *Supervisor) judgeOne(id string, now time.Time) (Job, bool) {
	var j Job
	var ok bool
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Fence != nil && !s.Fence.Holds(id) {
		return j, false
	}
	s.r.ReadDeliberation(id, func(d *projector.Deliberation) { j, ok = s.decide(d, now, 0) })
	return j, ok
}

// decide judges d at now, waiting for it to settle first when settle is
// not zero (bounded by MaxWait); it returns a job when there is something
// to publish. s.mu is held.
func (s *Supervisor) decide(d *projector.Deliberation, now time.Time, settle time.Duration) (Job, bool) {
	due := s.Key != nil && d.CheckpointDue()
	if d.Status.Terminal() && d.Status != api.StatusCancelled && !due {
		delete(s.seen, d.ID)
		return Job{}, false
	}
	if d.Importing() {
		// Its record is still arriving (and its own supervisor's emissions
		// with it): only the importer's messages count until the last.
		return Job{}, false
	}
	// Nothing changed since a judgment that found nothing to do, and no
	// limit depends on the clock: skip.
	lim := d.Limits()
	timed := lim.Idle() > 0 || !lim.DeadlineTime().IsZero()
	if pos, ok := s.judged[d.ID]; ok && pos == d.Position && !timed {
		return Job{}, false
	}
	if at, ok := s.refused[d.ID]; ok {
		if now.Sub(at) < projector.ClockSkew {
			return Job{}, false
		}
		delete(s.refused, d.ID)
	}
	if settle > 0 {
		seen, ok := s.seen[d.ID]
		switch {
		case !ok:
			s.seen[d.ID] = seenAt{d.Position, now, now}
			return Job{}, false
		case seen.position != d.Position:
			seen.position, seen.at = d.Position, now
			s.seen[d.ID] = seen
		}
		maxWait := s.MaxWait
		if maxWait <= 0 {
			maxWait = DefaultMaxWait
		}
		if now.Sub(seen.at) < settle && now.Sub(seen.since) < maxWait {
			return Job{}, false
		}
		// Judged: the next change starts a new wait. (A judgment without
		// a settle, Judge's, leaves the wait of a running Step alone.)
		delete(s.seen, d.ID)
	}
	var ems []termination.Emission
	if !d.Status.Terminal() || d.Status == api.StatusCancelled {
		ems = termination.Decide(d, now)
	}
	if len(ems) == 0 && due {
		j, err := s.checkpoint(d)
		if err == nil {
			return j, true
		}
		s.log.Error("supervisor: sign a checkpoint", "deliberation", d.ID, "err", err)
	}
	if len(ems) == 0 {
		s.judged[d.ID] = d.Position
		return Job{}, false
	}
	delete(s.judged, d.ID)
	return Job{Deliberation: d.ID, Position: d.Position, Emissions: ems}, true
}

// msgIDs makes the engine's Nats-Msg-Ids (supervisor emissions, binding
// resolutions): keyed per process, so nobody else can compute them.
var msgIDs = wire.NewMsgIDs()

// ErrSuperseded is returned, wrapped, when a publish was refused because
// the deliberation moved on after the position judged: another engine's
// supervisor (several engines on one cluster each supervise), a
// participant, or this supervisor's own earlier attempt got there first.
// It is the expected end of a lost race, not a fault: judged again at the
// next step.
var ErrSuperseded = errors.New("service: the deliberation moved on after the position judged")

// ErrUnsettled is returned, wrapped, when a publish got no answer (a
// timeout, no stream leader during an election): it may or may not have
// been stored, and the expected-sequence guard makes the next step's
// judgment safe either way.
var ErrUnsettled = errors.New("service: the supervisor's publish got no answer")

// unanswered says whether a publish got no answer at all.
func unanswered(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || ledger.IsStatusUnavailable(err)
}

// Publish publishes a job's emissions in order. The first expects the
// deliberation's last message to be the one at the position judged; each
// next one expects the previous emission. It stops at the first refusal.
func (s *Supervisor) Publish(ctx context.Context, j Job) (int, error) {
	n, _, err := s.publish(ctx, j)
	return n, err
}

func (s *Supervisor) publish(ctx context.Context, j Job) (int, uint64, error) {
	stamp := ""
	if s.Fence != nil {
		var err error
		if stamp, err = s.Fence.Renew(ctx, j.Deliberation); err != nil {
			return 0, j.Position, fmt.Errorf("%w: %s: %v", ErrNotOwner, j.Deliberation, err)
		}
	}
	if j.Checkpoint != nil {
		return s.publishCheckpoint(ctx, j, stamp)
	}
	expect := j.Position
	for i, e := range j.Emissions {
		msg := &nats.Msg{Subject: wire.ArtifactSubject(j.Deliberation, wire.SupervisorToken), Data: e.Artifact.Canonical, Header: nats.Header{}}
		if stamp != "" {
			msg.Header.Set(lease.Header, stamp)
		}
		if s.Key != nil {
			h, err := signing.Sign(s.Key, j.Deliberation, wire.SupervisorToken, e.Artifact.ID.String())
			if err != nil {
				return i, expect, fmt.Errorf("service: sign the supervisor's %s: %w", e.Artifact.Type, err)
			}
			h.Set(msg.Header)
		}
		ack, err := s.js.PublishMsg(ctx, msg,
			// The position it expects is part of the id: a retry of this
			// publish is absorbed, but a judgment at another position (after
			// the projector refused this emission, say) publishes anew.
			jetstream.WithMsgID(msgIDs.For("supervisor", j.Deliberation, e.Artifact.ID.String(), strconv.FormatUint(expect, 10))),
			jetstream.WithExpectStream(s.r.StreamOf(j.Deliberation)),
			jetstream.WithExpectLastSequenceForSubject(ledger.Sequence(expect), s.r.layout.Filter(j.Deliberation)))
		if err != nil {
			switch {
			case ledger.IsLostRace(err):
				return i, expect, fmt.Errorf("%w: %s at position %d: %v", ErrSuperseded, j.Deliberation, expect, err)
			case unanswered(err):
				return i, expect, fmt.Errorf("%w: %s %s at position %d: %v", ErrUnsettled, e.Artifact.Type, j.Deliberation, expect, err)
			}
			return i, expect, fmt.Errorf("service: publish the supervisor's %s to %s: %w", e.Artifact.Type, j.Deliberation, err)
		}
		if ack.Duplicate {
			// This supervisor's own earlier attempt was stored.
			s.log.Debug("supervisor: already stored", "deliberation", j.Deliberation, "artifact", e.Artifact.Type, "position", ack.Sequence)
		} else {
			s.log.Info("supervisor", "deliberation", j.Deliberation, "published", e.Artifact.Type, "reason", e.Reason, "position", ack.Sequence)
		}
		expect = s.r.posIn(j.Deliberation, ack.Sequence)
	}
	return len(j.Emissions), expect, nil
}

// Step judges and publishes once. A publish that lost the race to a
// message that arrived after the position judged is judged again at once,
// on the projection with that message (at most Rejudge times a step: past
// that, at the next step); one that got no answer, at the next step.
func (s *Supervisor) Step(ctx context.Context) int {
	n := 0
	for _, j := range s.judge(s.Now(), s.Settle) {
		for try := 0; ; try++ {
			k, last, err := s.publish(ctx, j)
			n += k
			switch {
			case errors.Is(err, ErrSuperseded):
				s.log.Debug("supervisor: lost the race, judge again", "err", err)
			case errors.Is(err, ErrUnsettled):
				s.log.Info("supervisor: no answer, judge again", "err", err)
			case errors.Is(err, ErrNotOwner):
				s.log.Info("supervisor: not the owner, nothing written", "err", err)
			case err != nil:
				s.log.Error("supervisor", "err", err)
			}
			if k > 0 {
				// Judge this deliberation again only once the projection has
				// the emissions.
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				s.r.WaitForIn(wctx, j.Deliberation, last)
				cancel()
				s.checkAdmitted(j, k)
			}
			if !errors.Is(err, ErrSuperseded) || try+1 >= Rejudge || ctx.Err() != nil {
				break
			}
			// Something arrived after the position judged (last): judge
			// again once the projection has it, and everything of the
			// deliberation the stream held a moment later.
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			upTo := last + 1
			if st, err := s.js.Stream(wctx, s.r.StreamOf(j.Deliberation)); err == nil {
				upTo = max(upTo, s.r.posIn(j.Deliberation, st.CachedInfo().State.LastSeq))
			}
			err = s.r.WaitForIn(wctx, j.Deliberation, upTo)
			cancel()
			if err != nil {
				break
			}
			var ok bool
			if j, ok = s.judgeOne(j.Deliberation, s.Now()); !ok {
				break
			}
		}
	}
	return n
}

// checkpoint returns the job that publishes d's checkpoint: its log's
// size and root, signed with the engine's key as a note of origin
// parley.<deliberation>.
func (s *Supervisor) checkpoint(d *projector.Deliberation) (Job, error) {
	origin, err := tlog.Origin(d.ID)
	if err != nil {
		return Job{}, err
	}
	seed, err := s.Key.Seed()
	if err != nil {
		return Job{}, err
	}
	signer, err := tlog.NewSigner(seed, origin)
	if err != nil {
		return Job{}, err
	}
	note, err := tlog.Sign(tlog.Checkpoint{Origin: origin, Size: d.LogSize(), Root: d.LogRoot()}, signer)
	if err != nil {
		return Job{}, err
	}
	return Job{Deliberation: d.ID, Position: d.Position, Checkpoint: note, Size: d.LogSize()}, nil
}

// publishCheckpoint publishes j's checkpoint, guarded as an emission is:
// it covers the log up to the position judged, so it must come right
// after it.
func (s *Supervisor) publishCheckpoint(ctx context.Context, j Job, stamp string) (int, uint64, error) {
	pub, err := s.Key.PublicKey()
	if err != nil {
		return 0, j.Position, err
	}
	msg := &nats.Msg{Subject: wire.CheckpointSubject(j.Deliberation), Data: j.Checkpoint, Header: nats.Header{signing.KeyHeader: []string{pub}}}
	if stamp != "" {
		msg.Header.Set(lease.Header, stamp)
	}
	ack, err := s.js.PublishMsg(ctx, msg,
		jetstream.WithMsgID(msgIDs.For("checkpoint", j.Deliberation, strconv.FormatUint(j.Size, 10), strconv.FormatUint(j.Position, 10))),
		jetstream.WithExpectStream(s.r.StreamOf(j.Deliberation)),
		jetstream.WithExpectLastSequenceForSubject(ledger.Sequence(j.Position), s.r.layout.Filter(j.Deliberation)))
	if err != nil {
		switch {
		case ledger.IsLostRace(err):
			return 0, j.Position, fmt.Errorf("%w: %s checkpoint at position %d: %v", ErrSuperseded, j.Deliberation, j.Position, err)
		case unanswered(err):
			return 0, j.Position, fmt.Errorf("%w: %s checkpoint at position %d: %v", ErrUnsettled, j.Deliberation, j.Position, err)
		}
		return 0, j.Position, fmt.Errorf("service: publish the checkpoint of %s: %w", j.Deliberation, err)
	}
	s.log.Debug("supervisor: checkpoint", "deliberation", j.Deliberation, "size", j.Size, "position", s.r.posIn(j.Deliberation, ack.Sequence))
	return 1, s.r.posIn(j.Deliberation, ack.Sequence), nil
}

// checkAdmitted logs, and backs off from, emissions of j the projector
// refused: the live fold checks the supervisor's artifacts against the
// same rules, so a refusal means this supervisor is out of step with the
// record (most often a clock more than projector.ClockSkew ahead of the
// NATS server's).
func (s *Supervisor) checkAdmitted(j Job, published int) {
	var refused []string
	s.r.ReadDeliberation(j.Deliberation, func(d *projector.Deliberation) {
		if j.Checkpoint != nil {
			if _, covered := d.Checkpoints(); covered < j.Size {
				refused = append(refused, "checkpoint of "+strconv.FormatUint(j.Size, 10)+" messages")
			}
			return
		}
		for _, e := range j.Emissions[:published] {
			if !d.Has(e.Artifact.ID) {
				refused = append(refused, string(e.Artifact.Type)+" "+e.Artifact.ID.String())
			}
		}
	})
	if len(refused) == 0 {
		return
	}
	s.mu.Lock()
	s.refused[j.Deliberation] = s.Now()
	s.mu.Unlock()
	s.log.Warn("supervisor: the projector refused its own emission (supervisor.unjustified): is this engine's clock ahead of the NATS server's?",
		"deliberation", j.Deliberation, "refused", refused, "retry_in", projector.ClockSkew)
}

// Run steps until ctx ends.
func (s *Supervisor) Run(ctx context.Context) {
	t := time.NewTicker(s.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Step(ctx)
		}
	}
}
