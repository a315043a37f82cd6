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

	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

// Supervisor runs the termination supervisor: it judges every deliberation
// with termination.Decide and publishes what it decides as _supervisor,
// each publish guarded by the expected last sequence of the deliberation's
// subjects. It owns the clock; the decision is pure.
type Supervisor struct {
	r     *Runner
	js    jetstream.JetStream
	log   *slog.Logger
	Now   func() time.Time
	Every time.Duration

	// Settle is how long a deliberation must have been quiet (no new
	// message seen) before Step judges it, so that a burst (an import, a
	// relay turn) is judged once it has landed. Zero judges at once.
	Settle time.Duration

	mu     sync.Mutex
	judged map[string]uint64 // deliberation -> position last judged with nothing to do
	seen   map[string]seenAt // deliberation -> position and when it was first seen
	// refused: deliberation -> when the projector last refused one of the
	// supervisor's own emissions (a clock ahead of the stream's, say); the
	// deliberation is not judged again for projector.ClockSkew.
	refused map[string]time.Time
}

type seenAt struct {
	position uint64
	at       time.Time
}

// NewSupervisor returns a supervisor over the runner's projection.
func NewSupervisor(r *Runner, js jetstream.JetStream, log *slog.Logger) *Supervisor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Supervisor{r: r, js: js, log: log, Now: time.Now, Every: 250 * time.Millisecond, judged: map[string]uint64{}, seen: map[string]seenAt{},
		refused: map[string]time.Time{}}
}

// Job is what the supervisor decided for one deliberation at a position.
type Job struct {
	Deliberation string
	Position     uint64
	Emissions    []termination.Emission
}

// Judge decides, for every deliberation that is open, suspended, or ended
// by a control message, what to publish at time now.
func (s *Supervisor) Judge(now time.Time) []Job { return s.judge(now, 0) }

func (s *Supervisor) judge(now time.Time, settle time.Duration) []Job {
	var jobs []Job
	s.mu.Lock()
	defer s.mu.Unlock()
	s.r.EachDeliberation(func(d *projector.Deliberation) {
		if d.Status.Terminal() && d.Status != projector.StatusCancelled {
			return
		}
		// Nothing changed since a judgment that found nothing to do,
		// and no limit depends on the clock: skip.
		lim := d.Limits()
		timed := lim.Idle() > 0 || !lim.DeadlineTime().IsZero()
		if pos, ok := s.judged[d.ID]; ok && pos == d.Position && !timed {
			return
		}
		if at, ok := s.refused[d.ID]; ok {
			if now.Sub(at) < projector.ClockSkew {
				return
			}
			delete(s.refused, d.ID)
		}
		if settle > 0 {
			seen, ok := s.seen[d.ID]
			if !ok || seen.position != d.Position {
				s.seen[d.ID] = seenAt{d.Position, time.Now()}
				return
			}
			if time.Since(seen.at) < settle {
				return
			}
		}
		ems := termination.Decide(d, now)
		if len(ems) == 0 {
			s.judged[d.ID] = d.Position
			return
		}
		delete(s.judged, d.ID)
		jobs = append(jobs, Job{Deliberation: d.ID, Position: d.Position, Emissions: ems})
	})
	return jobs
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

// lostRace says whether a publish refusal is an expected lost race: the
// subject's last sequence is not the one judged (10071 wrong last
// sequence, 10164 per-subject), or a publish under the same id is in
// process (10158, the leader still storing a first attempt).
func lostRace(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == 10071 || apiErr.ErrorCode == 10164 || apiErr.ErrorCode == 10158)
}

// unanswered says whether a publish got no answer at all.
func unanswered(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || (errors.As(err, &apiErr) && apiErr.Code == 503)
}

// Publish publishes a job's emissions in order. The first expects the
// deliberation's last message to be the one at the position judged; each
// next one expects the previous emission. It stops at the first refusal.
func (s *Supervisor) Publish(ctx context.Context, j Job) (int, error) {
	n, _, err := s.publish(ctx, j)
	return n, err
}

func (s *Supervisor) publish(ctx context.Context, j Job) (int, uint64, error) {
	expect := j.Position
	for i, e := range j.Emissions {
		ack, err := s.js.Publish(ctx, projector.ArtifactSubject(j.Deliberation, projector.SupervisorToken), e.Artifact.Canonical,
			// The position it expects is part of the id: a retry of this
			// publish is absorbed, but a judgment at another position (after
			// the projector refused this emission, say) publishes anew.
			jetstream.WithMsgID(msgIDs.For("supervisor", j.Deliberation, e.Artifact.ID.String(), strconv.FormatUint(expect, 10))),
			jetstream.WithExpectStream(wire.StreamName),
			jetstream.WithExpectLastSequenceForSubject(expect, projector.DeliberationFilter(j.Deliberation)))
		if err != nil {
			switch {
			case lostRace(err):
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
		expect = ack.Sequence
	}
	return len(j.Emissions), expect, nil
}

// Step judges and publishes once; refused publishes are judged again at
// the next step.
func (s *Supervisor) Step(ctx context.Context) int {
	n := 0
	for _, j := range s.judge(s.Now(), s.Settle) {
		k, last, err := s.publish(ctx, j)
		n += k
		switch {
		case errors.Is(err, ErrSuperseded):
			s.log.Debug("supervisor: lost the race, judge again", "err", err)
		case errors.Is(err, ErrUnsettled):
			s.log.Info("supervisor: no answer, judge again", "err", err)
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
	}
	return n
}

// checkAdmitted logs, and backs off from, emissions of j the projector
// refused: the live fold checks the supervisor's artifacts against the
// same rules, so a refusal means this supervisor is out of step with the
// record (most often a clock more than projector.ClockSkew ahead of the
// NATS server's).
func (s *Supervisor) checkAdmitted(j Job, published int) {
	var refused []string
	s.r.ReadDeliberation(j.Deliberation, func(d *projector.Deliberation) {
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
