package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/term"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// Options of a run.
type Options struct {
	// NATS is the URL of a running engine; empty runs an embedded engine
	// with its data in Dir/engine.
	NATS string
	// NATSOptions configure the connection to the engine at NATS (its
	// credentials). Without any, the relay is a participant of the
	// embedded default: it publishes every participant's artifacts and
	// the control messages, which is all a run needs. A fork whose prefix
	// holds a principal's resolutions needs more (the operator user of the
	// engine's credentials file); with the embedded engine the relay uses
	// that engine's credentials for the prefix.
	NATSOptions []nats.Option
	// seedNATS, when set, connects the fork's prefix (RunFleet's embedded
	// engine's operator).
	seedNATS []nats.Option
	// Dir is the run directory: invalid outputs, the report, the embedded
	// engine's data.
	Dir string
	// Partitioned runs the embedded engine with the record partitioned
	// (engine serve --partitioned, docs/SCALING.md).
	Partitioned bool
	// Progress, when set, receives a line per turn.
	Progress io.Writer
	// Notices, when set, receives what a person must see whatever the
	// progress setting: where a binding moment is answered (the whole
	// address of the /bind page).
	Notices io.Writer
	// HTTP is the base URL of the engine's HTTP API at NATS (default
	// http://127.0.0.1:8080, engine serve's), for the /bind address a
	// binding moment prints; the embedded engine's own is known.
	HTTP string
	// Credentials, when set, are those of the engine at NATS, read from
	// its data directory's credentials file (at CredentialsPath): its
	// HTTP address, for the explorer and /bind links, and its token, for
	// an address that opens the /bind page signed in (the file is read
	// again at each binding moment: a restarted engine has a new token).
	Credentials     *service.Credentials
	CredentialsPath string
	// Record, when set, is a cassette directory every participant call is
	// recorded in; Replay, when set, is one to answer from, with no network
	// and no model call (a miss is an error).
	Record, Replay string

	// Fork, when set, is a stream recording whose participants' artifacts
	// up to message ForkAt open the deliberation: the run continues a
	// recorded deliberation with this config's participants, with no model
	// call for the prefix (a counterfactual run). ForkAt is an ordinal
	// within the recorded deliberation (1 for its first message, as the
	// supervisor and the query API's "ordinal" count), so that the same
	// number names the same message whatever else the recording's stream
	// held; ForkAtPosition, instead, is a stream position of the
	// recording. Exactly one of them is set.
	Fork           *recording.Reader
	ForkAt         uint64
	ForkAtPosition uint64

	// Client configures the deadlines and retries of the relay's requests
	// to the engine (zero: client's defaults, 5 s an attempt, retried for
	// 30 s). A run whose engine stops answering for longer fails closed
	// (CodeEngineUnavailable).
	Client client.Options
}

// Summary of a run (relay run --json prints it).
type Summary struct {
	Deliberation string `json:"deliberation"`
	// Explorer is the deliberation's page in the explorer of the engine
	// at --nats (its --http address), for a run against a running engine;
	// empty for a run on its own embedded engine, which stops with it.
	Explorer           string              `json:"explorer,omitempty"`
	Title              string              `json:"title"`
	Termination        string              `json:"termination"` // the final status
	Rounds             int                 `json:"rounds"`
	Counts             map[events.Type]int `json:"counts"`
	Participants       map[string]int      `json:"participants"`
	ObjectionsRaised   int                 `json:"objections_raised"`
	ObjectionsDisposed int                 `json:"objections_disposed"`
	InvalidOutputs     int                 `json:"invalid_outputs"`
	Tokens             int64               `json:"tokens"`
	CostUSDMicros      int64               `json:"cost_usd_micros"`
	LatencyMS          int64               `json:"latency_ms"`
	FinalDecision      string              `json:"final_decision,omitempty"`
	BindingMoments     int                 `json:"binding_moments,omitempty"` // asked of the principal
	Resolutions        []string            `json:"resolutions,omitempty"`     // the principal's, in order
	ClosureOK          bool                `json:"closure_ok"`
	Findings           []closure.Finding   `json:"findings,omitempty"`
	StateDigest        string              `json:"state_digest"`
	FailedClosed       string              `json:"failed_closed,omitempty"`
	// Dir is the run directory (report.md, dag.svg, summary.json,
	// record.jsonl, invalid/).
	Dir string `json:"dir"`
	// FinalDecisionOrdinal is the final decision's ordinal within the
	// deliberation.
	FinalDecisionOrdinal uint64 `json:"final_decision_ordinal,omitempty"`
	// Failures are every FAILURE of the record, the relay's and the
	// supervisor's, with their reasons.
	Failures []FailureLine `json:"failures,omitempty"`
	// Binding are the binding moments resolved, with what was chosen or
	// answered.
	Binding []Resolved `json:"binding,omitempty"`
	// Keys are the public keys a signed run's charter binds (config
	// "sign"), and Recording the stream recording it wrote, with every
	// signature, for engine audit.
	Keys      map[string]string `json:"keys,omitempty"`
	Recording string            `json:"recording,omitempty"`
	// EngineKey is the engine's public key (written to engine.pub) and
	// Receipts the number of receipts a signed run kept (in receipts/).
	EngineKey string `json:"engine_key,omitempty"`
	Receipts  int    `json:"receipts,omitempty"`
	// Notes say what the run could not write (the picture).
	Notes []string `json:"notes,omitempty"`
}

// CodeInvalidOutput is the FAILURE code of a participant's unusable answer.
const CodeInvalidOutput = "participant.invalid_output"

type runner struct {
	cfg      *Config
	opts     Options
	id       string
	clients  map[string]*client.Client
	parts    map[string]Participant
	record   []ContextArtifact // accepted artifacts the relay published, in order
	lastTurn []ContextArtifact
	sum      *Summary
	// eng is the engine the run runs against, nc the relay's connection
	// to it (refused ends its publishes at a permission violation), orch
	// the relay's own client (rounds, cancel, queries).
	eng     *engine
	nc      *nats.Conn
	refused *refusal
	orch    *client.Client
	// current is the participant whose turn it is (or was last).
	current string
	// keys are a signed run's key pairs (config "sign"); nil: unsigned.
	keys *runKeys
}

// failedCloseTimeout bounds the relay's last publishes when its engine is
// lost.
const failedCloseTimeout = 10 * time.Second

// failClosed records that the engine was lost: a FAILURE
// (relay.engine_unavailable) under the token of the participant whose turn
// it was, and the cancel of the deliberation, each with its own deadline
// (the stream may take them when the engine does not answer); it returns
// cause with what could be recorded.
func (r *runner) failClosed(orch *client.Client, cause error) error {
	who := r.current
	if who == "" {
		who = r.cfg.Participants[0].ID
	}
	r.sum.FailedClosed = "the engine stopped answering: " + cause.Error()
	ctx, cancel := context.WithTimeout(context.Background(), failedCloseTimeout)
	defer cancel()
	desc := cause.Error()
	if len(desc) > 2000 {
		desc = desc[:2000] + "…"
	}
	recorded := ""
	if _, ack, err := r.clients[who].Publish(ctx, r.id, events.Draft{Type: events.TypeFailure,
		Payload: events.Failure{Code: CodeEngineUnavailable, Retryable: true, Description: desc}}); err != nil {
		recorded = "no FAILURE could be recorded: " + err.Error()
	} else {
		recorded = fmt.Sprintf("FAILURE %s recorded at position %d", CodeEngineUnavailable, ack.Sequence)
		if err := orch.Cancel(ctx, r.id, "relay: the engine stopped answering"); err != nil {
			recorded += "; the cancel could not be published: " + err.Error()
		} else {
			recorded += ", deliberation cancelled"
		}
	}
	r.progress("failed closed: the engine stopped answering (%s)", recorded)
	return fmt.Errorf("relay: deliberation %s failed closed: %w (%s)", r.id, cause, recorded)
}

// CodeEngineUnavailable is the FAILURE code a relay records when the
// engine stops answering within the client's retries (client.ErrUnavailable):
// the run fails closed, cancelling its deliberation, and Run returns an
// error.
const CodeEngineUnavailable = "relay.engine_unavailable"

// reconnect is how the relay's connection rides out the loss of a NATS
// node: it reconnects to another node of the cluster (the servers it
// learned of), for ever, quickly; what bounds a run's wait is each
// request's deadline and retries (client.Options).
var reconnect = []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond), nats.ReconnectJitter(100*time.Millisecond, time.Second)}

// Run runs the experiment and returns its summary: it starts (setup),
// opens the deliberation (with a fork's prefix), gives the participants
// their rounds, closes a strict run that failed, waits for the engine's
// end of the deliberation and writes the run's files.
func Run(ctx context.Context, cfg *Config, opts Options) (_ *Summary, runErr error) {
	r, err := start(ctx, cfg, opts)
	if err != nil {
		return nil, err
	}
	defer r.close()
	ch, pre, err := r.charter()
	if err != nil {
		return nil, err
	}
	if err := r.open(ctx, ch); err != nil {
		return nil, err
	}
	if r.keys != nil {
		if err := writeKeys(r.opts.Dir, r.id, r.keys); err != nil {
			return nil, err
		}
		r.sum.Keys = r.keys.pub
	}
	defer func() {
		if runErr != nil && errors.Is(runErr, client.ErrUnavailable) && ctx.Err() == nil {
			runErr = r.failClosed(r.orch, runErr)
		}
	}()
	if err := r.fork(ctx, pre); err != nil {
		return nil, err
	}
	failed, err := r.rounds(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.failStrict(ctx, failed); err != nil {
		return nil, err
	}
	rec, err := r.settle(ctx)
	if err != nil {
		return nil, err
	}
	if r.keys != nil {
		js, err := jetstream.New(r.nc)
		if err != nil {
			return nil, err
		}
		if err := writeRecording(ctx, js, r.opts.Dir, r.id, r.cfg.Roots()); err != nil {
			return nil, fmt.Errorf("relay: the recording of deliberation %s: %w", r.id, err)
		}
		r.sum.Recording = filepath.Join(r.opts.Dir, RecordingFile)
		if r.sum.EngineKey, r.sum.Receipts, err = writeReceipts(ctx, r.orch, r.opts.Dir, r.id); err != nil {
			return nil, fmt.Errorf("relay: the receipts of deliberation %s: %w", r.id, err)
		}
	}
	return r.sum, writeReport(ctx, r.opts.Dir, r.sum, r.record, rec)
}

// start makes the run directory, gets the engine (startEngine), connects
// to it and makes a client and a participant per participant of cfg.
func start(ctx context.Context, cfg *Config, opts Options) (_ *runner, err error) {
	if cfg.Sign && opts.Fork != nil {
		return nil, errSignFork
	}
	if opts.Dir == "" {
		opts.Dir = filepath.Join("relay-runs", time.Now().UTC().Format("20060102T150405Z"))
	}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, opts: opts, clients: map[string]*client.Client{}, parts: map[string]Participant{},
		sum: &Summary{Title: cfg.Title, Dir: opts.Dir, Counts: map[events.Type]int{}, Participants: map[string]int{}}}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	if r.eng, err = startEngine(ctx, engineSpec{URL: opts.NATS, Participant: opts.NATSOptions, Operator: opts.seedNATS,
		Dir: opts.Dir, Roots: cfg.Roots(), Partitioned: opts.Partitioned}); err != nil {
		return nil, err
	}
	r.refused = newRefusal(ctx) // the fork's prefix may hold what this connection may not publish
	if r.nc, err = r.eng.connect("", r.eng.Participant, append([]nats.Option{nats.Name("parley-relay"), r.refused.option()}, reconnect...)...); err != nil {
		return nil, err
	}
	if cfg.Sign {
		if r.keys, err = newRunKeys(cfg); err != nil {
			return nil, err
		}
	}
	for _, p := range cfg.Participants {
		co := opts.Client
		if r.keys != nil {
			co.SigningKey = r.keys.pairs[p.ID]
		}
		if r.clients[p.ID], err = client.NewWithOptions(r.nc, p.ID, co); err != nil {
			return nil, err
		}
		if r.parts[p.ID], err = participantFor(cfg, opts, p); err != nil {
			return nil, err
		}
	}
	r.orch, _ = client.NewWithOptions(r.nc, "relay", opts.Client)
	return r, nil
}

// participantFor is p as the run calls it: answered from the cassette of
// opts.Replay, or the model, recorded in opts.Record.
func participantFor(cfg *Config, opts Options, p ParticipantConfig) (Participant, error) {
	if opts.Replay != "" {
		return newCassette(nil, opts.Replay, p), nil
	}
	part, err := newParticipant(cfg, p)
	if err != nil {
		return nil, err
	}
	if opts.Record != "" {
		part = newCassette(part, opts.Record, p)
	}
	return part, nil
}

// close closes the run's connections and ends an embedded engine.
func (r *runner) close() {
	if r.nc != nil {
		r.nc.Close()
	}
	if r.eng != nil {
		r.eng.Close(0)
	}
	r.keys.wipe()
}

// charter is the charter of the run's deliberation, with the messages of
// a fork's prefix, whose participants it names too.
func (r *runner) charter() (client.Charter, []recording.Message, error) {
	cfg := r.cfg
	var ids []string
	for _, p := range cfg.Participants {
		ids = append(ids, p.ID)
	}
	if cfg.Principal != "" {
		ids = append(ids, cfg.Principal)
	}
	var pre []recording.Message
	if r.opts.Fork != nil {
		var preParts []string
		var err error
		if pre, preParts, err = prefix(r.opts.Fork, r.opts.ForkAt, r.opts.ForkAtPosition); err != nil {
			return client.Charter{}, nil, err
		}
		for _, t := range preParts {
			if !slices.Contains(ids, t) {
				ids = append(ids, t)
			}
		}
	}
	ch := client.Charter{Title: cfg.Title, Participants: ids, Principal: cfg.Principal, Limits: cfg.Limits, Policy: cfg.Policy}
	if r.keys != nil {
		ch.Keys, ch.RequireSignatures = r.keys.pub, true
	}
	return ch, pre, nil
}

// open opens the run's deliberation with charter ch.
func (r *runner) open(ctx context.Context, ch client.Charter) error {
	var err error
	if r.id, err = open(ctx, r.orch, ch); err != nil {
		return err
	}
	r.sum.Deliberation = r.id
	if r.opts.NATS != "" {
		base := r.httpBase()
		r.sum.Explorer = strings.TrimRight(base, "/") + "/deliberations/" + r.id
	}
	r.progress("deliberation %s: %q, %d rounds, context %s", r.id, r.cfg.Title, r.cfg.Rounds, r.cfg.Context)
	return nil
}

// fork publishes a fork's prefix into the deliberation (seed), connected
// as the engine's operator when its credentials are known.
func (r *runner) fork(ctx context.Context, pre []recording.Message) error {
	if len(pre) == 0 {
		return nil
	}
	seedNC := r.nc
	if r.eng.Operator != nil {
		var err error
		if seedNC, err = r.eng.connect("fork: ", r.eng.Operator, r.refused.option()); err != nil {
			return err
		}
		defer seedNC.Close()
	}
	if err := r.seed(ctx, seedNC, r.orch, pre, r.refused); err != nil {
		return err
	}
	r.progress("forked: %d artifacts of the recording up to %s", len(r.record), forkPoint(r.opts))
	return nil
}

// rounds gives every participant but the decider its turn in each round,
// then the decider its final turn, and while the decider asks the
// principal, waits for the answer (binding moments). It returns the
// participant whose output stayed invalid in a strict run ("" if none).
func (r *runner) rounds(ctx context.Context) (string, error) {
	cfg := r.cfg
	for round := 1; round <= cfg.Rounds; round++ {
		if failed, err := r.round(ctx, round, true); err != nil || failed != "" {
			return failed, err
		}
	}
	if cfg.Decider == "" {
		return "", nil
	}
	p := cfg.Participants[slices.IndexFunc(cfg.Participants, func(p ParticipantConfig) bool { return p.ID == cfg.Decider })]
	if failed, err := r.decide(ctx, p, cfg.Rounds); err != nil || failed != "" {
		return failed, err
	}
	// Binding moments: while the decider asks, wait for the principal.
	for ask := 0; cfg.Principal != "" && ask < cfg.MaxAsks; ask++ {
		kind, err := r.awaitPrincipal(ctx, r.nc)
		if err != nil {
			return "", err
		}
		if kind == "" || kind == binding.KindOption || kind == binding.KindDeclined {
			break
		}
		if kind == binding.KindQuestion {
			// The question is rejected: one more round, then the decider
			// again.
			if _, err := r.round(ctx, r.sum.Rounds+1, false); err != nil {
				return "", err
			}
		}
		if failed, err := r.decide(ctx, p, r.sum.Rounds); err != nil || failed != "" {
			return failed, err
		}
	}
	return "", nil
}

// round announces round n and gives every participant but the decider its
// turn; when strict (and the run is), a participant whose output stayed
// invalid ends the round and is returned.
func (r *runner) round(ctx context.Context, n int, strict bool) (string, error) {
	if err := r.orch.Round(ctx, r.id, n); err != nil {
		return "", err
	}
	r.sum.Rounds = n
	for _, p := range r.cfg.Participants {
		if p.ID == r.cfg.Decider {
			continue
		}
		if ok, err := r.turn(ctx, p, n, false); err != nil {
			return "", err
		} else if !ok && strict && r.cfg.Strict {
			return p.ID, nil
		}
	}
	return "", nil
}

// decide gives the decider p its final turn in round n; it returns p when
// its output stayed invalid in a strict run.
func (r *runner) decide(ctx context.Context, p ParticipantConfig, n int) (string, error) {
	ok, err := r.turn(ctx, p, n, true)
	if err != nil || ok || !r.cfg.Strict {
		return "", err
	}
	return p.ID, nil
}

// failStrict cancels the deliberation of a strict run whose participant
// failed ("" : nothing to do).
func (r *runner) failStrict(ctx context.Context, failed string) error {
	if failed == "" {
		return nil
	}
	r.sum.FailedClosed = failed + ": invalid output after its retries"
	if err := r.orch.Cancel(ctx, r.id, "strict relay: "+r.sum.FailedClosed); err != nil {
		return err
	}
	r.progress("failed closed: %s", r.sum.FailedClosed)
	return nil
}

// openVerdictTimeout bounds the wait for the engine's verdict on a run's
// charter.
const openVerdictTimeout = 30 * time.Second

// CharterError is the engine's refusal of a run's charter.
type CharterError struct {
	Deliberation string
	Code         string
	Message      string
}

func (e *CharterError) Error() string {
	return "relay: the engine refused the charter of deliberation " + e.Deliberation + ": " + e.Code + ": " + e.Message
}

// open opens a new deliberation and waits for the engine's verdict on its
// charter, so that a charter the engine refuses (a misspelt or negative
// limit: control.invalid) stops the run at once with the engine's reason
// instead of leaving it to publish into a deliberation that never opened.
func open(ctx context.Context, orch *client.Client, ch client.Charter) (string, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	id := u.String()
	ack, err := orch.Control(ctx, id, client.Control{Op: "open", Charter: &ch})
	if err != nil {
		return "", err
	}
	wctx, cancel := context.WithTimeout(ctx, openVerdictTimeout)
	defer cancel()
	o, err := orch.WaitOutcome(wctx, id, ack.Sequence, "")
	if err != nil {
		return "", fmt.Errorf("relay: no verdict on the charter of deliberation %s (published at position %d) within %s: %w",
			id, ack.Sequence, openVerdictTimeout, err)
	}
	if !o.Took() {
		msg := o.Message
		if msg == "" {
			msg = o.Note
		}
		return "", &CharterError{Deliberation: id, Code: o.Code, Message: msg}
	}
	return id, nil
}

// DefaultHTTP is engine serve's HTTP address, where the /bind page of an
// engine at --nats is looked for unless Options.HTTP says otherwise.
const DefaultHTTP = "http://127.0.0.1:8080"

// httpBase is the HTTP address of the engine at Options.NATS: its
// credentials file's, else Options.HTTP, else DefaultHTTP.
func (r *runner) httpBase() string {
	base := r.opts.HTTP
	if c := r.opts.Credentials; c != nil && c.HTTPURL != "" && (base == "" || base == DefaultHTTP) {
		base = c.HTTPURL
	}
	if base == "" {
		base = DefaultHTTP
	}
	return strings.TrimRight(base, "/")
}

// bindAddress says where the principal answers a binding moment: the
// deliberation's /bind page, as an address that signs the browser in
// (it carries the engine's HTTP token) when the relay knows the token and
// prints to a terminal; else the page and where its sign-in address is.
// A token is never written where it could reach a log.
func (r *runner) bindAddress() string {
	creds, path := r.eng.Credentials(), ""
	if creds != nil {
		path = filepath.Join(r.opts.Dir, "engine", service.CredentialsFile)
	} else if creds = r.opts.Credentials; creds != nil {
		path = r.opts.CredentialsPath
		// The engine draws its token at each start: the file's, now.
		if c, err := service.ReadCredentials(filepath.Dir(path)); err == nil {
			creds = c
		}
	}
	page := r.httpBase() + "/bind/" + r.id
	if creds != nil && creds.HTTPURL != "" {
		page = strings.TrimRight(creds.HTTPURL, "/") + "/bind/" + r.id
	}
	w := r.noticeWriter()
	switch {
	case creds != nil && creds.HTTPToken != "" && w != nil && isTerminal(w):
		return "answer at " + page + "?token=" + url.QueryEscape(creds.HTTPToken) + " (open it: it signs the browser in; or engine bind " + r.id + ")"
	case creds != nil && creds.HTTPToken != "":
		return "answer at " + page + " (sign in first: open the sign_in_url of " + path + ", or paste its http_token on the page; the token is not printed where this is not a terminal; or engine bind " + r.id + ")"
	}
	return "answer at " + page + " (sign in first with the sign_in_url engine serve prints on its terminal and writes to credentials.json in its data directory; relay --data DIR prints an address that signs in; or engine bind " + r.id + ")"
}

// notice writes a line a person must see (Options.Notices, else the
// progress writer).
func (r *runner) notice(format string, a ...any) {
	if w := r.noticeWriter(); w != nil {
		fmt.Fprintf(w, format+"\n", a...)
	}
}

func (r *runner) noticeWriter() io.Writer {
	if r.opts.Notices != nil {
		return r.opts.Notices
	}
	return r.opts.Progress
}

// isTerminal reports whether w is a terminal, the only place a secret is
// printed.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func (r *runner) progress(format string, a ...any) {
	if r.opts.Progress != nil {
		fmt.Fprintln(r.opts.Progress, inert(fmt.Sprintf(format, a...), false))
	}
}

// context returns what a turn shows of the record.
func (r *runner) context(final bool) []ContextArtifact {
	if final || r.cfg.Context == "full-history" {
		return slices.Clone(r.record)
	}
	if r.cfg.Context == "single-hop" {
		return slices.Clone(r.lastTurn)
	}
	// closure: the last turn's artifacts and everything they reference.
	byID := map[string]ContextArtifact{}
	refs := map[string][]string{}
	for _, c := range r.record {
		var a struct {
			ID   string `json:"artifact_id"`
			Refs []struct {
				ID string `json:"artifact_id"`
			} `json:"references"`
		}
		json.Unmarshal(c.Artifact, &a)
		byID[a.ID] = c
		for _, x := range a.Refs {
			refs[a.ID] = append(refs[a.ID], x.ID)
		}
	}
	keep := map[string]bool{}
	var stack []string
	for _, c := range r.lastTurn {
		var a struct {
			ID string `json:"artifact_id"`
		}
		json.Unmarshal(c.Artifact, &a)
		stack = append(stack, a.ID)
	}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if keep[id] {
			continue
		}
		keep[id] = true
		stack = append(stack, refs[id]...)
	}
	var out []ContextArtifact
	for _, c := range r.record {
		var a struct {
			ID string `json:"artifact_id"`
		}
		json.Unmarshal(c.Artifact, &a)
		if keep[a.ID] {
			out = append(out, c)
		}
	}
	return out
}

// turn gives participant p its turn, with retries; ok is false when its
// output stayed invalid.
func (r *runner) turn(ctx context.Context, p ParticipantConfig, round int, final bool) (bool, error) {
	t := Turn{Deliberation: r.id, Round: round, Participant: p.ID, Role: p.Role, Instructions: p.Instructions,
		Question: r.cfg.Question, Final: final, Context: r.context(final)}
	if final {
		t.AllowedTypes = []events.Type{events.TypeDecision}
	} else {
		t.AllowedTypes = []events.Type{events.TypeClaim, events.TypeEvidence, events.TypeObjection, events.TypeRevision}
	}
	r.current = p.ID
	for attempt := 0; attempt <= *r.cfg.MaxRetries; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(time.Duration(100<<attempt) * time.Millisecond):
			}
		}
		res, callErr := r.parts[p.ID].Take(ctx, t)
		if errors.Is(callErr, ErrReplayMiss) {
			return false, callErr
		}
		r.account(res)
		problem, err := r.answer(ctx, p, t, res, callErr)
		if err != nil {
			return false, err
		}
		if problem == "" {
			return true, nil
		}
		// Fail closed: the record keeps a FAILURE, the raw answer is kept
		// in the run directory, and the turn is retried.
		if err := r.refuse(ctx, p, round, attempt, res, problem); err != nil {
			return false, err
		}
	}
	return false, nil
}

// account adds a call's latency, tokens and cost to the summary.
func (r *runner) account(res Response) {
	r.sum.LatencyMS += res.Latency.Milliseconds()
	if res.Usage != nil {
		r.sum.Tokens += res.Usage["input_tokens"] + res.Usage["output_tokens"]
		r.sum.CostUSDMicros += res.Usage["cost_usd_micros"]
	}
}

// answer seals the answer res to turn t and publishes it as p's; it
// returns why the answer is refused ("" when the engine accepted it, now
// in the record).
func (r *runner) answer(ctx context.Context, p ParticipantConfig, t Turn, res Response, callErr error) (string, error) {
	var a *events.Artifact
	switch {
	case callErr != nil:
		return callErr.Error(), nil
	case res.Truncated:
		return "the answer was cut off (finish_reason length)", nil
	default:
		var err error
		if a, err = r.seal(res, t); err != nil {
			return err.Error(), nil
		}
	}
	c := r.clients[p.ID]
	ack, err := c.PublishArtifact(ctx, r.id, a)
	if err != nil {
		return "", err
	}
	// The orchestrator's reads (the state, the final closure) carry every
	// participant's write as min_position, not only its own: an engine
	// that lags behind it waits instead of answering that a decision it
	// has not folded yet is unknown.
	r.orch.Saw(ack.Sequence)
	if _, err := c.WaitPosition(ctx, r.id, ack.Sequence); err != nil {
		return "", err
	}
	if _, found, err := c.Artifact(ctx, r.id, a.ID.String()); err != nil {
		return "", err
	} else if !found {
		return "the engine rejected the artifact (see the deliberation's rejections)", nil
	}
	entry := ContextArtifact{Position: ack.Sequence, Participant: p.ID, Artifact: a.Canonical}
	r.record = append(r.record, entry)
	r.lastTurn = []ContextArtifact{entry}
	r.sum.Participants[p.ID]++
	r.progress("round %2d  %-12s %-9s %s", t.Round, p.ID, a.Type, a.ID.String()[:19])
	if t.Final {
		r.sum.FinalDecision = a.ID.String()
	}
	return "", nil
}

// refuse records an unusable answer of p: it keeps it in the run
// directory (keepInvalid) and publishes a FAILURE saying why.
func (r *runner) refuse(ctx context.Context, p ParticipantConfig, round, attempt int, res Response, problem string) error {
	r.sum.InvalidOutputs++
	base, err := keepInvalid(r.opts.Dir, p.ID, round, attempt, res.Output, problem)
	if err != nil {
		return err
	}
	ext := map[string]any{"parley.round": round}
	if res.Model != nil {
		ext["parley.model"] = res.Model
	}
	if res.Usage != nil {
		ext["parley.usage"] = res.Usage
	}
	if len(problem) > 2000 {
		problem = problem[:2000] + "…"
	}
	_, _, err = r.clients[p.ID].Publish(ctx, r.id, events.Draft{Type: events.TypeFailure, Extensions: ext,
		Payload: events.Failure{Code: CodeInvalidOutput, Retryable: true,
			Description: fmt.Sprintf("round %d, attempt %d: %s (raw answer kept as invalid/%s.txt, the cause as invalid/%s.cause.txt)", round, attempt+1, problem, base, base)}})
	if err != nil {
		return err
	}
	r.progress("round %2d  %-12s invalid output (attempt %d): %s", round, p.ID, attempt+1, firstLine(problem))
	return nil
}

// keepInvalid writes an unusable answer in dir/invalid as it came (empty
// when the call itself failed), and beside it the cause: why it was
// refused, the call's error (an exec participant's exit status and
// standard error). It returns the files' base name.
func keepInvalid(dir, participant string, round, attempt int, output []byte, problem string) (string, error) {
	base := fmt.Sprintf("round-%02d-%s-attempt-%d", round, participant, attempt+1)
	name := base + ".txt"
	os.MkdirAll(filepath.Join(dir, "invalid"), 0o750)
	if err := os.WriteFile(filepath.Join(dir, "invalid", name), output, 0o640); err != nil {
		return "", fmt.Errorf("relay: keep the invalid answer: %w", err)
	}
	cause := fmt.Sprintf("participant %s, round %d, attempt %d\ncause: %s\nraw answer: %d bytes in %s\n", participant, round, attempt+1, problem, len(output), name)
	if err := os.WriteFile(filepath.Join(dir, "invalid", base+".cause.txt"), []byte(cause), 0o640); err != nil {
		return "", fmt.Errorf("relay: keep the cause of an invalid answer: %w", err)
	}
	return base, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// required payload members by type; a model's empty extras are dropped.
var required = map[events.Type][]string{
	events.TypeClaim: {"statement"}, events.TypeEvidence: {"content", "provenance_class"},
	events.TypeObjection: {"statement", "blocking"}, events.TypeRevision: {"statement"},
	events.TypeDecision: {"outcome", "status", "objection_dispositions", "unresolved_issues"},
}

// seal turns an answer into a sealed artifact, or says why it cannot.
func (r *runner) seal(res Response, t Turn) (*events.Artifact, error) {
	var d struct {
		ArtifactType events.Type        `json:"artifact_type"`
		Payload      map[string]any     `json:"payload"`
		References   []events.Reference `json:"-"`
		Refs         []struct {
			ArtifactID string `json:"artifact_id"`
			Relation   string `json:"relation"`
		} `json:"references"`
		Extensions    map[string]any  `json:"extensions"`
		BindingMoment json.RawMessage `json:"binding_moment"`
		Provenance    json.RawMessage `json:"provenance"`
	}
	trimmed := strings.TrimSpace(string(res.Output))
	if trimmed == "" {
		return nil, errors.New("the answer is empty")
	}
	if trimmed[0] != '{' {
		return nil, fmt.Errorf("the answer is not a JSON object (a draft): it begins %q", clip(trimmed, 40))
	}
	dec := json.NewDecoder(strings.NewReader(trimmed))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("the answer is not a JSON draft: member %q is a JSON %s, not what a draft has there", te.Field, te.Value)
		}
		return nil, fmt.Errorf("the answer is not a JSON draft: %w", err)
	}
	if !slices.Contains(t.AllowedTypes, d.ArtifactType) {
		return nil, fmt.Errorf("artifact_type %q is not allowed in this turn (allowed: %v)", d.ArtifactType, t.AllowedTypes)
	}
	if d.Payload == nil {
		return nil, errors.New("the draft has no payload object")
	}
	for k, v := range d.Payload {
		if slices.Contains(required[d.ArtifactType], k) {
			continue
		}
		switch x := v.(type) {
		case string:
			if x == "" {
				delete(d.Payload, k)
			}
		case bool:
			if !x {
				delete(d.Payload, k)
			}
		case []any:
			if len(x) == 0 {
				delete(d.Payload, k)
			}
		}
	}
	known := map[string]bool{}
	for _, c := range r.record {
		var a struct {
			ID string `json:"artifact_id"`
		}
		json.Unmarshal(c.Artifact, &a)
		known[a.ID] = true
	}
	var refs []events.Reference
	for _, x := range d.Refs {
		id, ok := canon.ParseDigest(x.ArtifactID)
		if !ok || !known[x.ArtifactID] {
			return nil, fmt.Errorf("reference %q is not an artifact of the deliberation", x.ArtifactID)
		}
		refs = append(refs, events.Reference{Target: id, Relation: events.Relation(x.Relation)})
	}
	ext := map[string]any{}
	for k, v := range d.Extensions {
		if !strings.HasPrefix(k, "parley.") { // the relay's own are the relay's
			ext[k] = v
		}
	}
	if len(d.BindingMoment) > 0 {
		switch {
		case r.cfg.Principal == "":
			return nil, errors.New("binding_moment: this relay has no principal to ask")
		case d.ArtifactType != events.TypeDecision || d.Payload["status"] != string(events.Provisional):
			return nil, errors.New("binding_moment: only a provisional DECISION asks the principal")
		}
		env, err := binding.ParseEnvelope(d.BindingMoment)
		if err != nil {
			return nil, fmt.Errorf("binding_moment: %w", err)
		}
		ext[binding.ExtEnvelope] = json.RawMessage(env.Canonical)
	}
	if len(d.Provenance) > 0 && string(d.Provenance) != "null" {
		if d.ArtifactType != events.TypeEvidence {
			return nil, errors.New("provenance: only EVIDENCE carries provenance annotations")
		}
		set, err := provenance.Parse(d.Provenance)
		if err != nil {
			return nil, fmt.Errorf("provenance: %w", err)
		}
		ext[provenance.Extension] = set
	}
	ext["parley.round"] = t.Round
	if t.Role != "" {
		ext["parley.role"] = t.Role
	}
	if res.Model != nil {
		ext["parley.model"] = res.Model
	}
	if res.Usage != nil {
		ext["parley.usage"] = res.Usage
	}
	return events.Seal(events.Draft{Type: d.ArtifactType, Payload: d.Payload, References: refs, Extensions: ext})
}

// settle waits for the engine's end of the deliberation (the
// supervisor's TERMINATION, or wait_termination), then fills in the
// summary from its state, the final decision's closure and the record,
// which it returns for the report.
func (r *runner) settle(ctx context.Context) (*deliberationRecord, error) {
	v, err := r.awaitEnd(ctx)
	if err != nil {
		return nil, err
	}
	s := r.sum
	s.Termination = string(v.Status)
	s.Counts = v.Counts
	s.StateDigest = v.StateDigest.String()
	for k, n := range v.Participants {
		if k != wire.SupervisorToken {
			s.Participants[k] = n
		}
	}
	s.ObjectionsRaised = v.Counts[events.TypeObjection]
	if err := r.judgeFinal(ctx); err != nil {
		return nil, err
	}
	rec, err := fetchRecord(ctx, r.orch, r.id, v, s.FinalDecision)
	if err != nil {
		return nil, err
	}
	if rec.final >= 0 {
		s.FinalDecisionOrdinal = rec.entries[rec.final].Ordinal
	}
	s.Failures = rec.failures()
	if r.cfg.Principal != "" {
		s.Binding = rec.resolutions(r.cfg.Principal)
	}
	r.progress("termination %s; closure ok %v; state_digest %s", s.Termination, s.ClosureOK, s.StateDigest)
	return rec, nil
}

// awaitEnd waits for the deliberation to end with a TERMINATION, or for
// the config's wait_termination, and returns its state then.
func (r *runner) awaitEnd(ctx context.Context) (api.View, error) {
	wait, _ := time.ParseDuration(r.cfg.WaitTermination)
	deadline := time.Now().Add(wait)
	for {
		v, err := r.orch.State(ctx, r.id)
		if err != nil {
			return v, err
		}
		// The end, and the checkpoint that follows it (a recording sealed
		// before it would lack it, and its digest differ from the
		// engine's once it lands).
		if (v.Status.Terminal() && len(v.Terminations) > 0 && !v.Log.CheckpointDue) || time.Now().After(deadline) {
			// What one engine showed, the next read asks of any other.
			r.orch.Saw(v.Position)
			return v, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// judgeFinal fills in the final decision's closure and the objections it
// disposes of.
func (r *runner) judgeFinal(ctx context.Context) error {
	s := r.sum
	if s.FinalDecision == "" {
		return nil
	}
	res, err := r.orch.Closure(ctx, r.id, s.FinalDecision, 0)
	if err != nil {
		return err
	}
	s.ClosureOK = res.OK
	s.Findings = res.Findings
	if a, found, _ := r.orch.Artifact(ctx, r.id, s.FinalDecision); found {
		if art, err := events.Validate(a); err == nil {
			for _, x := range art.DecisionPayload().ObjectionDispositions {
				if x.Disposition.Public() {
					s.ObjectionsDisposed++
				}
			}
		}
	}
	return nil
}

// seed publishes a fork's prefix under the new deliberation, each artifact
// by its original participant, and takes the accepted ones as the record.
func (r *runner) seed(ctx context.Context, nc *nats.Conn, orch *client.Client, pre []recording.Message, refused *refusal) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	for _, m := range pre {
		_, tok, _ := strings.Cut(m.Subject, ".art.")
		ack, err := refused.publish(js, wire.ArtifactSubject(r.id, tok), m.Data)
		if err != nil {
			return fmt.Errorf("relay: fork: publish the prefix's artifact of %s at %d: %w%s", tok, m.Position, err, reservedHint(tok))
		}
		if _, err := orch.WaitPosition(ctx, r.id, ack.Sequence); err != nil {
			return err
		}
		a, err := events.Validate(m.Data)
		if err != nil {
			continue // a rejected submission of the recording stays rejected
		}
		if _, found, err := orch.Artifact(ctx, r.id, a.ID.String()); err != nil {
			return err
		} else if found {
			entry := ContextArtifact{Position: ack.Sequence, Participant: tok, Artifact: a.Canonical}
			r.record = append(r.record, entry)
			r.lastTurn = []ContextArtifact{entry}
		}
	}
	return nil
}

// reservedHint explains a refused publish under a token the embedded
// default reserves.
func reservedHint(tok string) string {
	if tok == wire.PrincipalToken || strings.HasPrefix(tok, "_") {
		return " (" + tok + " is reserved: publishing as it needs the operator user of the engine's credentials file, not a participant's connection)"
	}
	return ""
}

// awaitPrincipal waits, when the decider's last artifact asks the principal
// (a provisional DECISION carrying an envelope), for the principal's
// resolution to be admitted, takes it into the record and returns its
// kind; "" when the last artifact asks nothing.
func (r *runner) awaitPrincipal(ctx context.Context, nc *nats.Conn) (binding.Kind, error) {
	if len(r.record) == 0 {
		return "", nil
	}
	last, err := events.Validate(r.record[len(r.record)-1].Artifact)
	if err != nil {
		return "", nil
	}
	env, err := binding.EnvelopeOf(last)
	if err != nil {
		return "", nil
	}
	r.sum.BindingMoments++
	r.notice("binding moment %s asks %s: %q", env.Digest.String()[:19], r.cfg.Principal, env.Question.Stem)
	r.notice("  %s", r.bindAddress())
	wait, _ := time.ParseDuration(r.cfg.PrincipalTimeout)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	// The principal's artifacts, with an ordered push consumer (a
	// participant may not pull: ledger.Reader).
	// Why a wait ended without a resolution: stopped (Ctrl-C), the
	// principal_timeout, or err.
	ended := func(err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("relay: stopped while waiting for %s's resolution: %w", r.cfg.Principal, ctx.Err())
		}
		if wctx.Err() != nil {
			return fmt.Errorf("relay: no resolution from %s within principal_timeout %s", r.cfg.Principal, r.cfg.PrincipalTimeout)
		}
		return err
	}
	l, err := ledger.LocateConn(wctx, nc)
	if err != nil {
		return "", ended(err)
	}
	rd, err := l.Read(wctx, nc, l.Stored(wire.ArtifactSubject(r.id, r.cfg.Principal)), 0)
	if err != nil {
		return "", ended(err)
	}
	defer rd.Stop()
	c := r.clients[r.cfg.Decider]
	for {
		msg, err := rd.Next(wctx)
		if err != nil {
			return "", ended(err)
		}
		a, err := events.Validate(msg.Data)
		if err != nil {
			continue
		}
		rr, ok := binding.ResolutionOf(a)
		if !ok || rr.EnvelopeDigest != env.Digest.String() {
			continue
		}
		meta, err := msg.Metadata()
		if err != nil {
			return "", err
		}
		if _, err := c.WaitPosition(ctx, r.id, ledger.MsgPosition(meta)); err != nil {
			return "", err
		}
		if _, found, err := c.Artifact(ctx, r.id, a.ID.String()); err != nil || !found {
			continue // not admitted: keep waiting for one that is
		}
		entry := ContextArtifact{Position: ledger.MsgPosition(meta), Participant: r.cfg.Principal, Artifact: a.Canonical}
		r.record = append(r.record, entry)
		r.lastTurn = []ContextArtifact{entry}
		r.sum.Participants[r.cfg.Principal]++
		r.sum.Resolutions = append(r.sum.Resolutions, string(rr.Resolution))
		what := chosen(a, rr, env)
		if what != "" {
			what = ": " + clip(what, 100)
		}
		r.notice("binding moment %s resolved by %s: %s%s", env.Digest.String()[:19], r.cfg.Principal, rr.Resolution, what)
		if rr.Resolution == binding.KindOption {
			r.sum.FinalDecision = a.ID.String()
		}
		return rr.Resolution, nil
	}
}
