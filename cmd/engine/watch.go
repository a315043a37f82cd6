package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/textsafe"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/wire"
)

const watchAbout = `Shows a deliberation live, one line per message as the engine judges it:
its ordinal within the deliberation (#N, 1 for the open), the participant,
the artifact type, what it says (the statement, the content, the outcome,
a FAILURE's code and reason, a TERMINATION's state and reason), its
references by ordinal ("objects-to #3") and its short id; control messages
(open, round, suspend, resume, cancel) and rejected messages with their
code. It reads the deliberation from its first message (or prints from
--from N on), then follows it, and ends when the deliberation ends: at the
TERMINATION that ends it (exit 0). --json prints one JSON object per line
instead, the artifact's canonical form included, and a last {"end":true,…}.

Every request to the engine has a deadline (--timeout). A lost connection
is said on standard error, and the watch resumes where it was when the
connection comes back (the messages it had not seen yet, none twice).
Exit status: 0 the deliberation ended; 1 no such deliberation on the
engine; 2 bad arguments, no engine answering, or the connection lost for
good.`

// watchLine is a line of engine watch --json.
type watchLine struct {
	Ordinal      uint64          `json:"ordinal"`
	Position     uint64          `json:"position"`
	Kind         string          `json:"kind"` // artifact, control, checkpoint, rejected, late, admitted
	Participant  string          `json:"participant,omitempty"`
	ArtifactType string          `json:"artifact_type,omitempty"`
	ArtifactID   string          `json:"artifact_id,omitempty"`
	Outcome      string          `json:"outcome"`
	Op           string          `json:"op,omitempty"`
	Text         string          `json:"text,omitempty"`
	Qualifier    string          `json:"qualifier,omitempty"`
	References   []watchRef      `json:"references,omitempty"`
	Code         string          `json:"code,omitempty"`
	Message      string          `json:"message,omitempty"`
	Artifact     json.RawMessage `json:"artifact,omitempty"`
}

type watchRef struct {
	Relation   string `json:"relation"`
	ArtifactID string `json:"artifact_id"`
	Ordinal    uint64 `json:"ordinal,omitempty"`
}

// watchEnd is the last line of engine watch --json.
type watchEnd struct {
	End          bool   `json:"end"`
	Deliberation string `json:"deliberation"`
	Status       string `json:"status"`
	Messages     uint64 `json:"messages"`
	StateDigest  string `json:"state_digest"`
	Note         string `json:"note,omitempty"`
}

// watcher follows one deliberation.
type watcher struct {
	e       *env
	cl      *client.Client
	nc      *nats.Conn
	id      string
	asJSON  bool
	from    uint64
	timeout time.Duration
	grace   time.Duration

	// reported: the engine's verdicts carry each message's ordinal
	// (api.OutcomeReport.Ordinal), which the watch shows; with an
	// engine whose verdicts do not, opened says whether the deliberation's
	// open was applied, from which on its messages are counted.
	reported bool
	opened   bool
	ordinal  uint64                  // the last message's ordinal
	ordinals map[canon.Digest]uint64 // artifacts seen
}

func runWatch(ctx context.Context, e *env, args []string) int {
	// It reads the stream: a client without credentials may not (it asks
	// the query service only), so it reads as the participant user of a
	// local engine's credentials when it finds them.
	nf := natsFlags{participant: true}
	w := &watcher{e: e, ordinals: map[canon.Digest]uint64{}}
	fs := newFlags(e, "watch", "[--json] [--from N] [--timeout D] [--nats URL] DELIBERATION", watchAbout)
	fs.BoolVar(&w.asJSON, "json", false, "one JSON object per line")
	fs.Uint64Var(&w.from, "from", 1, "print from message N (an ordinal) on; the earlier ones are read, not printed")
	fs.DurationVar(&w.timeout, "timeout", 10*time.Second, "deadline of each request to the engine")
	fs.DurationVar(&w.grace, "grace", 10*time.Second, "once the deliberation has ended with no TERMINATION yet (an engine without its supervisor), how long to wait for one")
	reconnect := fs.Duration("reconnect", 2*time.Minute, "how long to keep trying to reconnect to a lost engine before giving up")
	nf.register(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 || !wire.ValidDeliberation(fs.Arg(0)) {
		fmt.Fprintln(e.stderr, "engine watch: need one DELIBERATION, a canonical UUID (engine watch -h)")
		return exitUsage
	}
	w.id = fs.Arg(0)
	connEvents := make(chan string, 16)
	nc, _, err := nf.connect(
		nats.ReconnectWait(time.Second), nats.MaxReconnects(max(1, int(*reconnect/time.Second))),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			select {
			case connEvents <- "lost":
			default:
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			select {
			case connEvents <- "back":
			default:
			}
		}),
		nats.ClosedHandler(func(*nats.Conn) {
			select {
			case connEvents <- "closed":
			default:
			}
		}))
	if err != nil {
		fmt.Fprintf(e.stderr, "engine watch: %v\n", err)
		return exitUsage
	}
	defer nc.Close()
	w.nc = nc
	if w.cl, err = client.New(nc, cliToken); err != nil {
		fmt.Fprintf(e.stderr, "engine watch: %v\n", err)
		return exitUsage
	}
	// The deliberation must be known to the engine, as of now: the read
	// carries the stream's last position, so that an open another process
	// has just published is not taken for an unknown deliberation.
	sctx, cancel := context.WithTimeout(ctx, w.timeout)
	if err := w.cl.CatchUp(sctx); err != nil {
		fmt.Fprintf(e.stderr, "engine watch: %v (reading without it)\n", err)
	}
	v, err := w.cl.State(sctx, w.id)
	cancel()
	if err != nil {
		return w.requestFailed(err, nf.url)
	}
	if !w.asJSON {
		fmt.Fprintf(e.stderr, "watching %s %s (%s, %d artifacts so far) on %s; it ends when the deliberation ends\n", w.id, textsafe.Line(strconv.Quote(v.Title)), v.Status, v.Artifacts, nf.url)
	}
	return w.follow(ctx, connEvents, nf.url)
}

// requestFailed reports a failed request to the engine.
func (w *watcher) requestFailed(err error, url string) int {
	var se *client.ServiceError
	switch {
	case errors.As(err, &se) && se.Status == "404":
		fmt.Fprintf(w.e.stderr, "engine watch: deliberation %s: the engine at %s does not know it (never opened there, or its open was refused)\n", w.id, url)
		return exitRejected
	case strings.Contains(err.Error(), "404"):
		fmt.Fprintf(w.e.stderr, "engine watch: deliberation %s: the engine at %s does not know it (never opened there, or its open was refused)\n", w.id, url)
		return exitRejected
	case errors.Is(err, nats.ErrNoResponders):
		fmt.Fprintf(w.e.stderr, "engine watch: no engine answers its query API at %s (%s.*): is engine serve running there?\n", url, wire.MicroPrefix)
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(w.e.stderr, "engine watch: the engine at %s gave no answer within %s: %v\n", url, w.timeout, err)
	default:
		fmt.Fprintf(w.e.stderr, "engine watch: %v\n", err)
	}
	return exitUsage
}

// follow reads the deliberation's messages from the stream in order, and
// prints each with the engine's verdict on it, until the deliberation ends.
func (w *watcher) follow(ctx context.Context, connEvents <-chan string, url string) int {
	cctx, cancel := context.WithTimeout(ctx, w.timeout)
	l, err := ledger.LocateConn(cctx, w.nc)
	var rd *ledger.Reader
	if err == nil {
		rd, err = l.Read(cctx, w.nc, l.Filter(w.id), 0)
	}
	cancel()
	if err != nil {
		fmt.Fprintf(w.e.stderr, "engine watch: read the stream %s at %s: %v\n", l.Stream(), url, err)
		return exitUsage
	}
	defer rd.Stop()
	type next struct {
		msg *nats.Msg
		err error
	}
	msgs := make(chan next)
	var stop sync.Once
	done := make(chan struct{})
	defer stop.Do(func() { close(done) })
	go func() {
		for {
			// Through a lost connection, or an engine that restarts, the
			// reader waits and reads on from where it was.
			m, err := rd.Next(ctx)
			select {
			case msgs <- next{m, err}:
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	ended := false // the deliberation's state is terminal
	var endedAt time.Time
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(w.e.stderr, "engine watch: stopped after #%d\n", w.ordinal)
			return exitUsage
		case ev := <-connEvents:
			switch ev {
			case "lost":
				fmt.Fprintf(w.e.stderr, "engine watch: the connection to %s is lost after #%d; reconnecting…\n", url, w.ordinal)
			case "back":
				fmt.Fprintf(w.e.stderr, "engine watch: reconnected to %s; resuming after #%d\n", url, w.ordinal)
			case "closed":
				fmt.Fprintf(w.e.stderr, "engine watch: the connection to %s is closed (no engine came back) after #%d\n", url, w.ordinal)
				return exitUsage
			}
		case <-tick.C:
			if ended && time.Since(endedAt) > w.grace {
				return w.end(ctx, "the deliberation ended with no TERMINATION on the record within --grace (is the engine's supervisor running?)")
			}
		case n := <-msgs:
			if n.err != nil {
				if ctx.Err() != nil {
					continue
				}
				fmt.Fprintf(w.e.stderr, "engine watch: reading the stream: %v\n", n.err)
				return exitUsage
			}
			meta, err := n.msg.Metadata()
			if err != nil {
				fmt.Fprintf(w.e.stderr, "engine watch: %v\n", err)
				return exitUsage
			}
			subject := n.msg.Subject
			if im := projector.ImportOf(subject, n.msg.Header.Get); im != nil {
				// An importer's message stands for the one it restores;
				// its end marker is no message of the deliberation.
				if im.End || wire.DeliberationOf(im.Subject) != w.id {
					continue
				}
				subject = im.Subject
			}
			term, check, code := w.message(ctx, ledger.MsgPosition(meta), subject, n.msg.Data)
			if code >= 0 {
				return code
			}
			if term || check || ended {
				sctx, cancel := context.WithTimeout(ctx, w.timeout)
				v, err := w.cl.State(sctx, w.id)
				cancel()
				if err != nil {
					return w.requestFailed(err, url)
				}
				if v.Status.Terminal() {
					if term {
						return w.end(ctx, "")
					}
					// Ended by a cancel: its TERMINATION is still to come
					// (or, read afterwards, further in the stream); with
					// none on the record, wait --grace for one.
					if !ended && len(v.Terminations) == 0 {
						ended, endedAt = true, time.Now()
					}
				}
			}
		}
	}
}

// outcome asks the engine for its verdict on the message at position,
// waiting for its projection to get there; through a lost connection it
// waits for the connection to come back.
func (w *watcher) outcome(ctx context.Context, position uint64) (api.OutcomeReport, error) {
	for {
		octx, cancel := context.WithTimeout(ctx, w.timeout)
		o, err := w.cl.WaitOutcome(octx, w.id, position, "")
		cancel()
		if err == nil || ctx.Err() != nil {
			return o, err
		}
		var se *client.ServiceError
		if errors.As(err, &se) || w.nc.IsConnected() {
			return o, err
		}
		for !w.nc.IsConnected() { // lost: wait for it to come back
			if w.nc.IsClosed() {
				return o, err
			}
			select {
			case <-ctx.Done():
				return o, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// message handles one message of the deliberation's subjects: it returns
// whether it was a TERMINATION that took effect, whether the state is to
// be checked for an end anyway (a cancel), and an exit code (-1 to go on).
func (w *watcher) message(ctx context.Context, position uint64, subject string, data []byte) (bool, bool, int) {
	_, kind, participant := wire.Parse(subject)
	if kind == "" {
		return false, false, -1 // not one of the deliberation's messages (the engine records it apart)
	}
	o, err := w.outcome(ctx, position)
	if err != nil {
		fmt.Fprintf(w.e.stderr, "engine watch: the engine's verdict on the message at position %d: %v\n", position, err)
		return false, false, exitUsage
	}
	// A checkpoint is a statement about the record, not a message of it:
	// no ordinal (docs/VERIFY.md).
	ckpt := kind == "art" && participant == wire.CheckpointToken && o.Outcome == api.VerdictApplied
	if !ckpt {
		ordinal, ok := w.ordinalOf(kind, o)
		if !ok {
			return false, false, -1 // outside the deliberation's record (and its ordinals)
		}
		w.ordinal = ordinal
	}
	line := watchLine{Ordinal: w.ordinal, Position: position, Participant: participant, Outcome: string(o.Outcome)}
	if ckpt {
		line.Ordinal = 0
	}
	term, check := false, false
	switch {
	case kind == "ctl":
		line.Kind, line.Op = "control", o.Op
		// A cancel ends the deliberation; its TERMINATION follows.
		check = o.Outcome == api.VerdictApplied && o.Op == "cancel"
		var c struct {
			Op      string `json:"op"`
			Round   int    `json:"round"`
			Reason  string `json:"reason"`
			Charter *struct {
				Title        string   `json:"title"`
				Participants []string `json:"participants"`
			} `json:"charter"`
		}
		json.Unmarshal(data, &c)
		switch c.Op {
		case "open":
			if c.Charter != nil {
				line.Text = fmt.Sprintf("%q", c.Charter.Title)
				if len(c.Charter.Participants) > 0 {
					line.Text += " participants " + strings.Join(c.Charter.Participants, ", ")
				}
			}
		case "round":
			line.Text = fmt.Sprint(c.Round)
		case "cancel":
			line.Text = c.Reason
		}
		if line.Op == "" {
			line.Op = c.Op
		}
	case participant == wire.CheckpointToken:
		// The engine's signed checkpoint of the log: a note whose second
		// line is the number of messages it covers (docs/VERIFY.md).
		line.Kind, line.Op, line.Participant = "checkpoint", o.Op, "engine"
		line.Text = "signed checkpoint of the log"
		if lines := strings.SplitN(string(data), "\n", 3); len(lines) == 3 {
			if n, err := strconv.ParseUint(lines[1], 10, 64); err == nil && n > 0 {
				line.Text = fmt.Sprintf("signed checkpoint of the log: messages #1 to #%d", n)
			}
		}
	default:
		a, verr := events.Validate(data)
		switch o.Outcome {
		case api.VerdictAccepted, api.VerdictLate:
			line.Kind = "artifact"
			if o.Outcome == api.VerdictLate {
				line.Kind = "late"
			}
			if verr == nil {
				w.describe(&line, a)
				w.ordinals[a.ID] = w.ordinal
				term = a.Type == events.TypeTermination && o.Outcome == api.VerdictAccepted
			}
		default: // rejected, unknown
			line.Kind = "rejected"
			line.Code, line.Message = o.Code, o.Message
			if o.Note != "" && line.Message == "" {
				line.Message = o.Note
			}
			line.ArtifactType, line.ArtifactID = o.ArtifactType, o.ArtifactID
			if verr == nil {
				line.ArtifactType, line.ArtifactID = string(a.Type), a.ID.String()
			}
		}
	}
	w.print(line)
	return term, check, -1
}

// ordinalOf is the ordinal of the message the engine's verdict o is on;
// ok is false for a message outside the deliberation's record (before its
// open, or another's during its import). It is the engine's, once its
// verdicts carry one; an engine whose verdicts do not (from before they
// did) has its messages counted as its fold counts them: from the applied
// open on, every message but those outside the record.
func (w *watcher) ordinalOf(kind string, o api.OutcomeReport) (uint64, bool) {
	switch {
	case o.Ordinal > 0:
		w.reported, w.opened = true, true
		return o.Ordinal, true
	case w.reported, projector.OutsideRecord(o.Code):
		return 0, false
	case !w.opened && (kind != "ctl" || o.Outcome != api.VerdictApplied || o.Op != "open"):
		return 0, false // before the open: no message of the deliberation yet
	}
	w.opened = true
	return w.ordinal + 1, true
}

// describe fills in what an artifact says.
func (w *watcher) describe(l *watchLine, a *events.Artifact) {
	l.ArtifactType, l.ArtifactID, l.Artifact = string(a.Type), a.ID.String(), json.RawMessage(a.Canonical)
	l.Text, l.Qualifier = a.Text(), artifactQualifier(a, w.ref)
	for _, r := range a.References {
		l.References = append(l.References, watchRef{Relation: string(r.Relation), ArtifactID: r.Target.String(), Ordinal: w.ordinals[r.Target]})
	}
}

// ref names an artifact by its ordinal when it has been seen, else by its
// short id.
func (w *watcher) ref(d canon.Digest) string {
	if o := w.ordinals[d]; o > 0 {
		return fmt.Sprintf("#%d", o)
	}
	return shortRef(d)
}

// artifactQualifier is the note beside an artifact's type (ref names the
// objections a decision disposes of).
func artifactQualifier(a *events.Artifact, ref func(canon.Digest) string) string {
	switch p := a.Payload.(type) {
	case *events.Objection:
		if p.Blocking {
			return "blocking"
		}
	case *events.Decision:
		s := string(p.Status)
		var ds []string
		for _, d := range p.ObjectionDispositions {
			ds = append(ds, string(d.Disposition)+" "+ref(d.Objection))
		}
		if len(ds) > 0 {
			s += "; " + strings.Join(ds, ", ")
		}
		return s
	case *events.Evidence:
		return string(p.ProvenanceClass)
	}
	return ""
}

func shortRef(d canon.Digest) string {
	s := strings.TrimPrefix(d.String(), "sha256:")
	if len(s) > 8 {
		s = s[:8]
	}
	return s
}

// print writes a line: JSON, or a readable line.
func (w *watcher) print(l watchLine) {
	ord := l.Ordinal
	if l.Kind == "checkpoint" && ord == 0 {
		ord = w.ordinal // after the message it follows
	}
	if ord < w.from {
		return
	}
	if w.asJSON {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.Encode(l)
		w.e.stdout.Write(textsafe.JSON(buf.Bytes()))
		return
	}
	who := l.Participant
	if who == wire.SupervisorToken {
		who = "supervisor"
	}
	var b strings.Builder
	if l.Kind == "checkpoint" && l.Ordinal == 0 {
		b.WriteString("      ") // no ordinal: not a message of the record
	} else {
		fmt.Fprintf(&b, "#%-4d ", l.Ordinal)
	}
	switch l.Kind {
	case "control":
		fmt.Fprintf(&b, "%-12s %-11s %s", "control", l.Op, l.Text)
		if l.Outcome != string(api.VerdictApplied) {
			fmt.Fprintf(&b, " (%s)", l.Outcome)
		}
	case "checkpoint":
		fmt.Fprintf(&b, "%-12s %-11s %s", who, "checkpoint", l.Text)
		if l.Outcome != string(api.VerdictApplied) {
			fmt.Fprintf(&b, " (%s)", l.Outcome)
		}
	case "rejected":
		what := l.ArtifactType
		if what == "" {
			what = "message"
		}
		fmt.Fprintf(&b, "%-12s %-11s REJECTED %s: %s", who, what, l.Code, oneLine(l.Message, 160))
	default:
		text := oneLine(l.Text, 160)
		if l.Qualifier != "" {
			text = "(" + l.Qualifier + ") " + text
		}
		fmt.Fprintf(&b, "%-12s %-11s %s", who, l.ArtifactType, text)
		for _, r := range l.References {
			if r.Ordinal > 0 {
				fmt.Fprintf(&b, "  %s #%d", r.Relation, r.Ordinal)
			} else {
				fmt.Fprintf(&b, "  %s %s", r.Relation, shortRef(mustParse(r.ArtifactID)))
			}
		}
		fmt.Fprintf(&b, "  [%s]", shortRef(mustParse(l.ArtifactID)))
		switch l.Kind {
		case "late":
			b.WriteString(" (late: after the end, kept outside the state)")
		}
	}
	fmt.Fprintln(w.e.stdout, textsafe.Line(b.String()))
}

func mustParse(s string) canon.Digest {
	d, _ := canon.ParseDigest(s)
	return d
}

// oneLine puts s on one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// end prints the end and returns exit 0.
func (w *watcher) end(ctx context.Context, note string) int {
	sctx, cancel := context.WithTimeout(ctx, w.timeout)
	v, err := w.cl.State(sctx, w.id)
	cancel()
	if err != nil {
		return w.requestFailed(err, "the engine")
	}
	if w.asJSON {
		b, _ := json.Marshal(watchEnd{End: true, Deliberation: w.id, Status: string(v.Status), Messages: w.ordinal, StateDigest: v.StateDigest.String(), Note: note})
		fmt.Fprintf(w.e.stdout, "%s\n", textsafe.JSON(b))
		return exitOK
	}
	fmt.Fprintf(w.e.stdout, "ended: %s after %d messages (%d artifacts, %d rejected), state_digest %s\n", v.Status, w.ordinal, v.Artifacts, v.Rejections, v.StateDigest)
	if note != "" {
		fmt.Fprintf(w.e.stdout, "note: %s\n", textsafe.Line(note))
	}
	return exitOK
}
