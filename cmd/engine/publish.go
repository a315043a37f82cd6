package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/suggest"
	"github.com/parley-engine/parley/internal/textsafe"
	"github.com/parley-engine/parley/signing"
	"github.com/parley-engine/parley/wire"
)

// cliToken is the participant token the open and control commands
// publish with; control messages do not carry it.
const cliToken = "cli"

// liveFlags are the flags of the commands that publish to a live engine
// and wait for its verdict.
type liveFlags struct {
	nats    natsFlags
	timeout time.Duration
	quiet   bool
	// key signs the artifact engine publish publishes (--key); nil:
	// unsigned.
	key nkeys.KeyPair
	// force publishes to a deliberation the engine does not know
	// (--force; publish and control).
	force bool
	// receipt, when set, is the file engine publish writes the message's
	// receipt to, waiting up to receiptWait for a checkpoint to cover it.
	receipt     string
	receiptWait time.Duration
}

// registerForce adds --force, for the commands that publish into an
// existing deliberation.
func (l *liveFlags) registerForce(fs *flag.FlagSet) {
	fs.BoolVar(&l.force, "force", false, "publish even when the engine knows no deliberation of that id (the message is recorded as a rejection)")
}

// unknownDeliberation reports, before anything is published, that the
// engine answers that it knows no deliberation id: a mistyped id would
// otherwise be recorded for good, as a rejection. Nothing is said when
// the engine cannot be asked in a few seconds (the publish then says
// what it says).
func unknownDeliberation(ctx context.Context, e *env, cl *client.Client, id string) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err := cl.State(ctx, id)
	var se *client.ServiceError
	if !errors.As(err, &se) || se.Status != "404" {
		return false
	}
	printLine(e.stderr, verdictLine{Deliberation: id, ErrorClass: "usage", Code: "deliberation.unknown",
		Message: "the engine knows no deliberation " + id + ", and nothing was published: check the id (engine open prints it; the explorer lists them), or give --force to publish anyway"})
	return true
}

func (l *liveFlags) register(fs *flag.FlagSet, quiet string) {
	l.nats.participant = true
	l.nats.register(fs)
	fs.DurationVar(&l.timeout, "timeout", 10*time.Second, "how long to wait for the engine's verdict (and to publish)")
	fs.BoolVar(&l.quiet, "quiet", false, quiet)
}

const liveAbout = `It waits, up to --timeout, for the engine's verdict on the message. Exit
status: 0 it took effect, and {"ok":true,"deliberation":…,"position":N,
"outcome":"accepted|pending|applied",…} goes to standard output; 1 it was
refused: {"ok":false,…,"outcome":"rejected|late","code":…,"message":…} on
standard error (the message stays in the stream, recorded as a rejection),
or it failed its checks here and nothing was published (the error as engine
id prints it); 2 bad arguments, unreadable input, no connection, or (publish
and control, without --force) a deliberation the engine does not know,
"code":"deliberation.unknown" (nothing published); 3 the message was published at "position" but the verdict did
not come in time, or the engine no longer keeps it.`

// verdictLine is the JSON line a publishing command prints.
type verdictLine struct {
	OK           bool   `json:"ok"`
	Deliberation string `json:"deliberation"`
	Position     uint64 `json:"position"`
	// Ordinal is the message's rank within the deliberation (1 for its
	// open), when the engine's verdict carries it.
	Ordinal      uint64 `json:"ordinal,omitempty"`
	ArtifactID   string `json:"artifact_id,omitempty"`
	ArtifactType string `json:"artifact_type,omitempty"`
	Op           string `json:"op,omitempty"`
	Outcome      string `json:"outcome,omitempty"`
	ErrorClass   string `json:"error_class,omitempty"`
	Code         string `json:"code,omitempty"`
	Message      string `json:"message,omitempty"`
	// Published is set on the failures of a message that is in the
	// stream, at Position.
	Published bool `json:"published,omitempty"`
}

func printLine(w io.Writer, v verdictLine) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	// A message may quote a participant's text: the same value, with its
	// bidirectional and invisible characters as JSON escapes.
	w.Write(textsafe.JSON(buf.Bytes()))
}

// await waits for the verdict on the message of deliberation id at
// ack.Sequence and reports it; quiet, when ok, is what --quiet prints
// instead of the JSON line.
func await(ctx context.Context, e *env, l *liveFlags, cl *client.Client, id string, ack *jetstream.PubAck, artifactID, op, quiet string) int {
	line := verdictLine{Deliberation: id, Position: ack.Sequence, ArtifactID: artifactID, Op: op}
	o, err := cl.WaitOutcome(ctx, id, ack.Sequence, artifactID)
	if err != nil {
		line.Published = true
		line.Message = fmt.Sprintf("published at position %d, but the engine gave no verdict within %s: %v", ack.Sequence, l.timeout, err)
		if o.Outcome != "" {
			line.Outcome = string(o.Outcome)
		}
		var se *client.ServiceError
		if errors.As(err, &se) {
			line.Message = fmt.Sprintf("published at position %d, but the engine's outcome query failed: %v", ack.Sequence, err)
		}
		printLine(e.stderr, line)
		return exitNoVerdict
	}
	line.Outcome, line.ArtifactType, line.Ordinal = string(o.Outcome), o.ArtifactType, o.Ordinal
	if line.Op == "" {
		line.Op = o.Op
	}
	switch o.Outcome {
	case api.VerdictAccepted, api.VerdictApplied:
		line.OK = true
		if l.quiet {
			if quiet != "" {
				fmt.Fprintln(e.stdout, quiet)
			}
			return exitOK
		}
		printLine(e.stdout, line)
		return exitOK
	case api.VerdictRejected:
		line.Published, line.ErrorClass, line.Code, line.Message = true, o.ErrorClass, o.Code, o.Message
		printLine(e.stderr, line)
		return exitRejected
	case api.VerdictLate:
		line.Published, line.Message = true, o.Note
		printLine(e.stderr, line)
		return exitRejected
	default: // unknown
		line.Published, line.Message = true, o.Note
		printLine(e.stderr, line)
		return exitNoVerdict
	}
}

// connectClient connects and returns a client publishing as token.
func connectClient(e *env, name string, l *liveFlags, token string) (*client.Client, func(), bool) {
	nc, _, err := l.nats.connect()
	if err != nil {
		fmt.Fprintf(e.stderr, "engine %s: %v\n", name, err)
		return nil, nil, false
	}
	cl, err := client.NewWithOptions(nc, token, client.Options{SigningKey: l.key})
	if err != nil {
		nc.Close()
		fmt.Fprintf(e.stderr, "engine %s: %v\n", name, err)
		return nil, nil, false
	}
	return cl, nc.Close, true
}

// publishOne connects as token, publishes one message with publish
// (bounded by --timeout, and cut short by a permission violation), and
// waits for the engine's verdict on it (await).
func publishOne(ctx context.Context, e *env, l *liveFlags, name, token, id, artifactID, op, quiet string,
	publish func(context.Context, *client.Client) (*jetstream.PubAck, error)) int {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	cl, closeConn, ok := connectClient(e, name, l, token)
	if !ok {
		return exitUsage
	}
	defer closeConn()
	if name != "open" && !l.force && unknownDeliberation(ctx, e, cl, id) {
		return exitUsage
	}
	pctx, stop := l.nats.watch(ctx)
	ack, err := publish(pctx, cl)
	stop()
	if err != nil {
		return publishFailed(e, name, &l.nats, err)
	}
	code := await(ctx, e, l, cl, id, ack, artifactID, op, quiet)
	if code == exitOK && l.receipt != "" {
		return keepReceipt(e, name, l, cl, id, ack.Sequence)
	}
	return code
}

// keepReceipt writes the receipt of the message at position seq to
// l.receipt, once a checkpoint covers it (the engine checkpoints after
// each judgment and at the end), waiting up to l.receiptWait.
func keepReceipt(e *env, name string, l *liveFlags, cl *client.Client, id string, seq uint64) int {
	ctx, cancel := context.WithTimeout(context.Background(), l.receiptWait+l.timeout)
	defer cancel()
	o, err := cl.Outcome(ctx, id, seq)
	if err != nil || o.Ordinal == 0 {
		fmt.Fprintf(e.stderr, "engine %s: --receipt: the message's ordinal: %v\n", name, err)
		return exitNoVerdict
	}
	list, err := waitReceipts(ctx, cl, id, []uint64{o.Ordinal}, l.receiptWait)
	switch {
	case err != nil:
		fmt.Fprintf(e.stderr, "engine %s: --receipt: %v\n", name, err)
		return exitNoVerdict
	case len(list.Receipts) != 1 || list.Receipts[0].Receipt == "":
		fmt.Fprintf(e.stderr, "engine %s: --receipt: no checkpoint covers #%d yet (the engine checkpoints after each judgment and at the end): ask later with engine receipt %s %d\n", name, o.Ordinal, id, o.Ordinal)
		return exitNoVerdict
	}
	if err := os.WriteFile(l.receipt, []byte(list.Receipts[0].Receipt), 0o640); err != nil {
		fmt.Fprintf(e.stderr, "engine %s: --receipt: %v\n", name, err)
		return exitUsage
	}
	return exitOK
}

// publishFailed reports a publish that got no acknowledgement: refused by
// the server (a permission violation: exit 1, nothing was stored), or
// unanswered (exit 2: the message may or may not be in the stream).
func publishFailed(e *env, name string, nf *natsFlags, err error) int {
	if why := nf.refused(); why != "" {
		fmt.Fprintf(e.stderr, "engine %s: the server refused the publish, nothing was stored: %s\n", name, why)
		return 1
	}
	fmt.Fprintf(e.stderr, "engine %s: %v (no acknowledgement: the message may or may not be in the stream)\n", name, err)
	return exitUsage
}

// charterFile is the charter a file gives engine open: members other than
// these are refused here, since the engine would ignore them.
type charterFile struct {
	Title        *string         `json:"title"`
	Participants []string        `json:"participants"`
	Terminators  []string        `json:"terminators"`
	Principal    string          `json:"principal"`
	Limits       json.RawMessage `json:"limits"`
	Policy       json.RawMessage `json:"policy"`
	// Keys and RequireSignatures: the charter's key binding
	// (docs/VERIFY.md).
	Keys              map[string]string `json:"keys"`
	RequireSignatures bool              `json:"require_signatures"`
}

// object decodes a charter's limits or policy, numbers as written.
func object(name string, raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("charter: %s must be a JSON object: %w", name, err)
	}
	return m, nil
}

func readCharter(e *env, path string) (client.Charter, error) {
	var ch client.Charter
	in, closeIn, err := openInput(e, path)
	if err != nil {
		return ch, err
	}
	defer closeIn()
	b, err := io.ReadAll(io.LimitReader(in, canon.DefaultMaxSize+1))
	if err != nil {
		return ch, err
	}
	if len(b) > canon.DefaultMaxSize {
		return ch, errors.New("charter: larger than 1 MiB")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f charterFile
	if err := dec.Decode(&f); err != nil {
		return ch, fmt.Errorf("charter %s: %w (members: title, participants, terminators, principal, limits, policy, keys, require_signatures)", path, err)
	}
	if f.Title != nil {
		ch.Title = *f.Title
	}
	ch.Participants, ch.Terminators, ch.Principal = f.Participants, f.Terminators, f.Principal
	ch.Keys, ch.RequireSignatures = f.Keys, f.RequireSignatures
	if ch.Limits, err = object("limits", f.Limits); err != nil {
		return ch, err
	}
	if ch.Policy, err = object("policy", f.Policy); err != nil {
		return ch, err
	}
	return ch, nil
}

func runOpen(ctx context.Context, e *env, args []string) int {
	var l liveFlags
	var id, title, participants, principal, charterPath string
	fs := newFlags(e, "open", "[--id UUID] [--title T] [--participants a,b] [--principal TOKEN] [--charter FILE|-] [--nats URL] [--timeout D] [--quiet]",
		`Opens a deliberation: publishes {"op":"open","charter":{…}} on
parley.<id>.ctl and prints the deliberation's id with the engine's verdict.
The charter file is {"title":…,"participants":[…],"terminators":[…],
"principal":…,"limits":{…},"policy":{…}};
--title, --participants and --principal override its members (a
principal the participants do not list is added to them). The engine checks the
limits and policy: a charter it refuses (control.invalid, an unknown limit
included) exits 1 with its reason, and the deliberation is not open.

`+liveAbout)
	fs.StringVar(&id, "id", "", "the deliberation's id, a UUID (default: a new version 7 UUID)")
	fs.StringVar(&title, "title", "", "the charter's title")
	fs.StringVar(&participants, "participants", "", "the participant tokens, comma-separated (default: anyone may take part)")
	fs.StringVar(&principal, "principal", "", "the participant whose resolutions of binding moments count (default principal)")
	fs.StringVar(&charterPath, "charter", "", "a charter file, - for standard input")
	l.register(fs, "print only the deliberation's id")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(e.stderr, "engine open: no arguments besides the flags (the charter goes in --charter FILE)")
		return exitUsage
	}
	var ch client.Charter
	if charterPath != "" {
		var err error
		if ch, err = readCharter(e, charterPath); err != nil {
			fmt.Fprintf(e.stderr, "engine open: %v\n", err)
			return exitUsage
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["title"] {
		ch.Title = title
	}
	if set["participants"] {
		ch.Participants = nil
		for _, t := range strings.Split(participants, ",") {
			if t = strings.TrimSpace(t); t != "" {
				ch.Participants = append(ch.Participants, t)
			}
		}
	}
	if set["principal"] {
		ch.Principal = principal
	}
	if ch.Principal != "" && len(ch.Participants) > 0 && !slices.Contains(ch.Participants, ch.Principal) {
		ch.Participants = append(ch.Participants, ch.Principal)
	}
	for _, t := range ch.Participants {
		if !wire.ValidToken(t) {
			fmt.Fprintf(e.stderr, "engine open: participant %q is not a token ([A-Za-z0-9][A-Za-z0-9_-]{0,63})\n", t)
			return exitUsage
		}
	}
	if id == "" {
		u, err := uuid.NewV7()
		if err != nil {
			fmt.Fprintf(e.stderr, "engine open: %v\n", err)
			return exitUsage
		}
		id = u.String()
	} else if !wire.ValidDeliberation(id) {
		fmt.Fprintf(e.stderr, "engine open: --id %q is not a UUID in canonical lowercase form\n", id)
		return exitUsage
	}
	return publishOne(ctx, e, &l, "open", cliToken, id, "", "open", id, func(ctx context.Context, cl *client.Client) (*jetstream.PubAck, error) {
		return cl.Control(ctx, id, client.Control{Op: "open", Charter: &ch})
	})
}

func runPublish(ctx context.Context, e *env, args []string) int {
	var l liveFlags
	var id, as, keyPath string
	fs := newFlags(e, "publish", "--deliberation ID --as TOKEN [--key FILE] [--nats URL] [--timeout D] [--quiet] FILE|-",
		`Publishes an artifact as participant TOKEN on parley.<ID>.art.<TOKEN>. An
artifact without an artifact_id is sealed exactly as engine seal does; one
with an artifact_id is checked as engine verify does (the id must match).
An artifact that fails its checks is not published: its error goes to
standard error as engine id prints it, and the command exits 1.

With --key FILE (an nkeys user seed, "SU…", alone or in a NATS credentials
file), the artifact is signed for this deliberation and token (the
Parley-Key and Parley-Signature headers, docs/VERIFY.md): a charter that
binds the seed's public key to TOKEN admits it. Without it, unsigned.

`+liveAbout)
	fs.StringVar(&id, "deliberation", "", "the deliberation's id")
	fs.StringVar(&as, "as", "", "the participant token to publish as")
	fs.StringVar(&keyPath, "key", "", "a file holding the nkeys user seed to sign the artifact with")
	fs.StringVar(&l.receipt, "receipt", "", "write the artifact's receipt (a signed proof it is in the record) to this file once a checkpoint covers it")
	fs.DurationVar(&l.receiptWait, "receipt-wait", time.Minute, "with --receipt: how long to wait for a checkpoint to cover the artifact (the engine checkpoints after each judgment and at the end)")
	l.register(fs, "print only the artifact's id")
	l.registerForce(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if keyPath != "" {
		kp, err := readSigningKey(keyPath)
		if err != nil {
			fmt.Fprintf(e.stderr, "engine publish: --key %s: %v\n", keyPath, err)
			return exitUsage
		}
		l.key = kp
	}
	switch {
	case fs.NArg() != 1:
		fmt.Fprintln(e.stderr, "engine publish: need exactly one FILE argument (- for standard input)")
		return exitUsage
	case !wire.ValidDeliberation(id):
		fmt.Fprintf(e.stderr, "engine publish: --deliberation %q is not a UUID in canonical lowercase form\n", id)
		return exitUsage
	case !wire.ValidToken(as):
		fmt.Fprintf(e.stderr, "engine publish: --as %q is not a participant token ([A-Za-z0-9][A-Za-z0-9_-]{0,63})\n", as)
		return exitUsage
	}
	in, closeIn, err := openInput(e, fs.Arg(0))
	if err != nil {
		fmt.Fprintf(e.stderr, "engine publish: %v\n", err)
		return exitUsage
	}
	doc, err := io.ReadAll(io.LimitReader(in, canon.DefaultMaxSize+1))
	closeIn()
	if err != nil {
		fmt.Fprintf(e.stderr, "engine publish: read %s: %v\n", fs.Arg(0), err)
		return exitUsage
	}
	a, err := prepare(doc)
	if err != nil {
		e.stderr.Write(append(appendError(nil, err), '\n'))
		return exitRejected
	}
	return publishOne(ctx, e, &l, "publish", as, id, a.ID.String(), "", a.ID.String(), func(ctx context.Context, cl *client.Client) (*jetstream.PubAck, error) {
		return cl.PublishArtifact(ctx, id, a)
	})
}

// readSigningKey reads an nkeys user seed from path: the seed alone (an
// .nk file) or in a NATS credentials file.
func readSigningKey(path string) (nkeys.KeyPair, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	kp, err := nkeys.ParseDecoratedNKey(b)
	if err != nil {
		return nil, errors.New("no nkeys seed in the file")
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, errors.New("no nkeys seed in the file")
	}
	return signing.KeyPair(string(seed))
}

// prepare seals an artifact without an artifact_id, as engine seal does,
// and checks one with an artifact_id, as engine verify does.
func prepare(doc []byte) (*events.Artifact, error) {
	c := canon.New(canon.AMD)
	v := events.NewValidator()
	canonical, err := c.Canonicalize(doc)
	if err != nil {
		return nil, err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(canonical, &members); err != nil {
		return nil, err
	}
	if _, ok := members["artifact_id"]; ok {
		return v.Validate(doc)
	}
	return seal(c, v, doc)
}

func runControl(ctx context.Context, e *env, args []string) int {
	var l liveFlags
	var id, reason string
	fs := newFlags(e, "control", "--deliberation ID [--nats URL] [--timeout D] [--quiet] suspend|resume|cancel [--reason R]|round N",
		`Publishes a control message on parley.<ID>.ctl: suspend, resume, cancel
(with --reason) or round N (rounds must increase), and prints the engine's
verdict: applied, or rejected with its reason (a round that does not
increase, a control message after the deliberation ended…).

`+liveAbout)
	fs.StringVar(&id, "deliberation", "", "the deliberation's id")
	fs.StringVar(&reason, "reason", "", "the reason of a cancel")
	l.register(fs, "print nothing when the engine applies it")
	l.registerForce(fs)
	rest, code, ok := parseInterspersed(fs, args)
	if !ok {
		return code
	}
	if !wire.ValidDeliberation(id) {
		fmt.Fprintf(e.stderr, "engine control: --deliberation %q is not a UUID in canonical lowercase form\n", id)
		return exitUsage
	}
	var ctl client.Control
	switch {
	case len(rest) == 1 && (rest[0] == "suspend" || rest[0] == "resume" || rest[0] == "cancel"):
		ctl.Op = rest[0]
	case len(rest) == 2 && rest[0] == "round":
		n, err := strconv.Atoi(rest[1])
		if err != nil || n < 1 {
			fmt.Fprintf(e.stderr, "engine control: round %q is not a round number (1 or more)\n", rest[1])
			return exitUsage
		}
		ctl.Op, ctl.Round = "round", n
	default:
		msg := "engine control: need one of suspend, resume, cancel, round N"
		if len(rest) > 0 {
			if c := suggest.Closest(rest[0], []string{"suspend", "resume", "cancel", "round"}); c != "" && c != rest[0] {
				msg += fmt.Sprintf(" (%q: did you mean %s?)", rest[0], c)
			}
		}
		fmt.Fprintln(e.stderr, msg)
		return exitUsage
	}
	if reason != "" {
		if ctl.Op != "cancel" {
			fmt.Fprintln(e.stderr, "engine control: --reason is for cancel")
			return exitUsage
		}
		ctl.Reason = reason
	}
	return publishOne(ctx, e, &l, "control", cliToken, id, "", ctl.Op, "", func(ctx context.Context, cl *client.Client) (*jetstream.PubAck, error) {
		return cl.Control(ctx, id, ctl)
	})
}

// parseInterspersed parses flags that may come before, between or after
// the positional arguments, and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, int, bool) {
	var rest []string
	for {
		if code, ok := parse(fs, args); !ok {
			return nil, code, false
		}
		args = fs.Args()
		if len(args) == 0 {
			return rest, 0, true
		}
		rest = append(rest, args[0])
		args = args[1:]
	}
}
