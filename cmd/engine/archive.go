package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/archive"
	"github.com/parley-engine/parley/audit"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/signing"
)

// natsFlags are the connection flags of the commands that talk to a live
// engine's NATS. Without credentials a client of the embedded default is a
// reader, who publishes nothing the stream keeps. A command that writes
// sets participant (open, publish, control, mcp) or operator (import
// republishes a recording's _supervisor and principal messages); either
// adds --data and, when no other credential is given, uses that user of
// the credentials file a running engine wrote (in --data, or in
// ./parley-data for the engine at the URL that file names).
type natsFlags struct {
	url, creds, user, password string
	operator, participant      bool
	data                       string
	// from says where the credentials came from ("" none).
	from string

	mu         sync.Mutex
	violations []string
	violated   chan struct{} // closed at the first violation
}

// watch returns a context that ends when ctx does or when the server
// reports a permission violation on the connection: a publish it refused
// gets no acknowledgement, and waiting for one would only time out.
func (n *natsFlags) watch(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	n.mu.Lock()
	if n.violated == nil {
		n.violated = make(chan struct{})
	}
	ch := n.violated
	n.mu.Unlock()
	go func() {
		select {
		case <-ch:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

const defaultNATS = "nats://127.0.0.1:4222"

func (n *natsFlags) register(fs interface {
	StringVar(*string, string, string, string)
}) {
	fs.StringVar(&n.url, "nats", defaultNATS, "NATS URL of the engine (or of its cluster)")
	fs.StringVar(&n.creds, "creds", "", "NATS credentials file")
	fs.StringVar(&n.user, "user", "", "NATS user")
	fs.StringVar(&n.password, "password", "", "NATS password (or PARLEY_NATS_PASSWORD)")
	switch {
	case n.operator:
		fs.StringVar(&n.data, "data", "", "the engine's data directory: connect as the operator user of its credentials.json (default: ./parley-data's, for the engine that wrote it, when no --creds or --user is given)")
	case n.participant:
		fs.StringVar(&n.data, "data", "", "the engine's data directory: connect as the participant user of its credentials.json (default: ./parley-data's, for the engine that wrote it, when no --creds or --user is given)")
	}
}

func (n *natsFlags) connect(extra ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
	opts := []nats.Option{nats.Name("parley-engine-cli"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		n.mu.Lock()
		n.violations = append(n.violations, err.Error())
		if n.violated == nil {
			n.violated = make(chan struct{})
		}
		select {
		case <-n.violated:
		default:
			close(n.violated)
		}
		n.mu.Unlock()
	})}
	if n.password == "" {
		n.password = os.Getenv("PARLEY_NATS_PASSWORD")
	}
	switch {
	case n.creds != "" || n.user != "":
		if n.creds != "" {
			opts = append(opts, nats.UserCredentials(n.creds))
			n.from = n.creds
		}
		if n.user != "" {
			opts = append(opts, nats.UserInfo(n.user, n.password))
			n.from = "--user " + n.user
		}
	case n.operator || n.participant:
		c, path, err := engineCredentials(n.data)
		if err != nil {
			return nil, nil, err
		}
		user, password := "", ""
		if c != nil {
			user, password = c.NATSUser, c.NATSPassword
			if n.participant {
				user, password = c.NATSParticipantUser, c.NATSParticipantPassword
			}
		}
		if c != nil && user == "" && n.data != "" {
			return nil, nil, fmt.Errorf("%s holds no NATS user: that engine does not own its server's users (--nats-config or --nats); give --user and --password or --creds", path)
		}
		if user != "" {
			if n.url == defaultNATS && c.NATSURL != "" {
				n.url = c.NATSURL
			}
			if n.data != "" || sameEndpoint(n.url, c.NATSURL) {
				opts = append(opts, nats.UserInfo(user, password))
				n.from = path
			}
		}
	}
	nc, err := nats.Connect(n.url, append(opts, extra...)...)
	if err != nil {
		if n.from != "" {
			return nil, nil, fmt.Errorf("connect to %s with the credentials of %s: %w%s", n.url, n.from, err, connectHint(err))
		}
		return nil, nil, fmt.Errorf("connect to %s: %w%s", n.url, err, connectHint(err))
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// refused explains an error by the permission violations the server
// reported on the connection, if any.
func (n *natsFlags) refused() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.violations) == 0 {
		return ""
	}
	v := n.violations[len(n.violations)-1]
	if n.from == "" {
		return v + "; a client without credentials is a participant: use the operator user of the engine's credentials file (--data DIR, the engine's data directory) or --user and --password"
	}
	return v + " (connected with the credentials of " + n.from + ")"
}

func runExport(ctx context.Context, e *env, args []string) int {
	// It reads the stream: a client without credentials may not (it asks
	// the query service only), so it reads as the participant user of a
	// local engine's credentials when it finds them.
	nf := natsFlags{participant: true}
	var id, format, out string
	var rootDirs roots
	fs := newFlags(e, "export", "--deliberation ID [--format log|stream] [--out FILE] [--nats URL] [--root DIR]...", `Writes a deliberation of a live engine (or straight from its NATS cluster) as
a recording: "stream" (every message, bytes exact, with positions, times and
a hash chain; the default) or "log" (the DAG's artifacts in stream order,
what engine closure reads). docs/RECORDINGS.md describes both. The
trailer's state_digest comes from folding the messages here: where a
charter requires admissible provenance, give the engine's
--provenance-root directories as --root so that the fold judges evidence
as the engine did.`)
	fs.Var(&rootDirs, "root", "a directory to re-verify provenance annotations against, as the engine's --provenance-root (repeatable)")
	fs.StringVar(&id, "deliberation", "", "the deliberation's id")
	fs.StringVar(&format, "format", "stream", "stream or log")
	fs.StringVar(&out, "out", "-", "output file, - for standard output")
	nf.register(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if id == "" || (format != "stream" && format != "log") {
		fmt.Fprintln(e.stderr, "engine export: --deliberation is required, and --format is stream or log")
		return exitUsage
	}
	rv, err := rootDirs.open()
	if err != nil {
		fmt.Fprintf(e.stderr, "engine export: %v\n", err)
		return exitUsage
	}
	defer rv.Close()
	nc, js, err := nf.connect()
	if err != nil {
		fmt.Fprintf(e.stderr, "engine export: %v\n", err)
		return exitUsage
	}
	defer nc.Close()
	w := e.stdout
	var f *os.File
	if out != "-" {
		if f, err = os.Create(out); err != nil {
			fmt.Fprintf(e.stderr, "engine export: %v\n", err)
			return exitUsage
		}
		w = f
	}
	n, err := archive.ExportWith(ctx, js, id, recording.Format(format), w, rv.verifier())
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if errors.Is(err, archive.ErrNoDeliberation) {
		if f != nil {
			os.Remove(out) // nothing was written: no empty recording left behind
		}
		fmt.Fprintf(e.stderr, "engine export: the stream at %s holds no deliberation %s: check the id (engine open and the relay print it, the explorer lists them)\n", nf.url, id)
		return 1
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "engine export: %v\n", err)
		return 1
	}
	if out != "-" {
		fmt.Fprintf(e.stderr, "exported %d lines of %s to %s\n", n, id, out)
	}
	return exitOK
}

func runImport(ctx context.Context, e *env, args []string) int {
	nf := natsFlags{operator: true}
	var as string
	fs := newFlags(e, "import", "[--as ID] [--nats URL] FILE|-", `Publishes a stream recording into a live engine, in batches, on the
importer's subject (parley.<deliberation>.art._import), each message with its
original subject, position and time in headers, then marks the import's
end: until then nobody else's message counts in the deliberation, so what
participants publish meanwhile changes nothing, and an export gives the
recording back. It resumes an interrupted import of the same recording
without duplicates (a recording cut short, without its trailer, is imported
without the end: import the whole one to finish). It refuses an id that a
deliberation opened live holds ("the deliberation id is taken"): --as
imports under another id. What others published under the id before the
import began is ignored.

Only an importer may publish on the importer's subject: on the embedded
default, import connects as the operator user of the credentials file a
running engine writes in its data directory (--data DIR; by default
./parley-data's, for the engine that wrote it, when neither --creds nor
--user is given); under deploy/nats.conf, as the admin.`)
	fs.StringVar(&as, "as", "", "import under this deliberation id")
	nf.register(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(e.stderr, "engine import: need exactly one FILE argument (- for standard input)")
		return exitUsage
	}
	in, closeIn, err := openInput(e, fs.Arg(0))
	if err != nil {
		fmt.Fprintf(e.stderr, "engine import: %v\n", err)
		return exitUsage
	}
	defer closeIn()
	r, err := recording.NewReader(in)
	if err != nil {
		fmt.Fprintf(e.stderr, "engine import: %v\n", err)
		return exitUsage
	}
	nc, js, err := nf.connect()
	if err != nil {
		fmt.Fprintf(e.stderr, "engine import: %v\n", err)
		return exitUsage
	}
	defer nc.Close()
	start := time.Now()
	var progress func(int, int)
	if fh, ok := e.stderr.(*os.File); ok {
		if st, err := fh.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			progress = func(done, total int) { fmt.Fprintf(fh, "\r\033[K%d / %d messages", done, total) }
		}
	}
	res, err := archive.Import(ctx, js, r, as, progress)
	if progress != nil {
		fmt.Fprint(e.stderr, "\r\033[K")
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "engine import: %v\n", err)
		if why := nf.refused(); why != "" {
			fmt.Fprintf(e.stderr, "engine import: the server refused a publish: %s\n", why)
		}
		return 1
	}
	b, _ := json.Marshal(map[string]any{"ok": true, "deliberation": res.Deliberation, "messages": res.Messages,
		"skipped": res.Skipped, "published": res.Published, "atomic": res.Atomic, "complete": res.Complete, "seconds": time.Since(start).Seconds()})
	fmt.Fprintf(e.stdout, "%s\n", b)
	return exitOK
}

// connectHint is the next step after a failed connection to an engine's
// NATS server.
func connectHint(err error) string {
	switch {
	case errors.Is(err, nats.ErrNoServers):
		return " (is engine serve running? --nats names the address it prints on its \"nats\" line)"
	case errors.Is(err, nats.ErrAuthorization):
		return " (give the credentials of a user of that server: --creds, or --user and --password)"
	}
	return ""
}

func runAudit(_ context.Context, e *env, args []string) int {
	var asJSON bool
	var rootDirs, trusted, receiptFiles, checkpointFiles, witnesses roots
	fs := newFlags(e, "audit", "[--json] [--root DIR]... [--trusted-key KEY]... [--receipt FILE]... [--checkpoint FILE]... [--witness KEY]... FILE|-", `Audits a recording offline, with no server and no model call: every id and
artifact rule, the projector's fold and state_digest (equal to the live
engine's for the same messages), the closure of every decision at its own
position, that every supervisor emission was called for by the rules and
none is missing, the hash chain, and the rejections. A charter's provenance
policy is judged by the discipline alone unless --root re-verifies
annotations, as the engine's --provenance-root does (use the same roots, or
the supervisor's provenance judgements may read as unjustified). Exit
status: 0 no finding, 1 findings, 2 unusable input.

With --trusted-key (the engine's public key, "U…", or a file holding it:
what engine serve prints and credentials.json's engine_key), it also
checks what rests on that key, with public keys alone (docs/VERIFY.md):
every supervisor emission signed by it, every checkpoint of the log in the
recording verifying, every judgment covered by a trusted checkpoint, and
each --receipt (a C2SP tlog-proof from engine receipt, the client or a
relay run's receipts/) and --checkpoint (a signed checkpoint kept from
elsewhere) reproduced by the recording's log; and it says which
statements rest on which key. With --witness (a witness's cosignature
verifier key, as engine witness prints it, or NAME:PUBLICKEY; repeatable),
every --checkpoint must also carry a valid cosignature of each witness
(audit.not_witnessed): what engine witness keeps in its directory.`)
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fs.Var(&rootDirs, "root", "a directory to re-verify provenance annotations against (repeatable)")
	fs.Var(&trusted, "trusted-key", "an engine's public key, or a file holding it, to trust (repeatable)")
	fs.Var(&receiptFiles, "receipt", "a receipt file the recording must agree with (repeatable; needs --trusted-key)")
	fs.Var(&checkpointFiles, "checkpoint", "a signed checkpoint file the recording must reproduce (repeatable; needs --trusted-key)")
	fs.Var(&witnesses, "witness", "a witness whose cosignature every --checkpoint must carry: its verifier key, or NAME:PUBLICKEY (repeatable; needs --checkpoint)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	rv, err := rootDirs.open()
	if err != nil {
		fmt.Fprintf(e.stderr, "engine audit: %v\n", err)
		return exitUsage
	}
	defer rv.Close()
	verify := rv.verifier()
	if fs.NArg() != 1 {
		fmt.Fprintln(e.stderr, "engine audit: need exactly one FILE argument (- for standard input)")
		return exitUsage
	}
	in, closeIn, err := openInput(e, fs.Arg(0))
	if err != nil {
		fmt.Fprintf(e.stderr, "engine audit: %v\n", err)
		return exitUsage
	}
	defer closeIn()
	r, err := recording.NewReader(in)
	if err != nil {
		fmt.Fprintf(e.stderr, "engine audit: %v\n", err)
		return exitUsage
	}
	trust, err := loadTrust(trusted, receiptFiles, checkpointFiles, witnesses)
	if err != nil {
		fmt.Fprintf(e.stderr, "engine audit: %v\n", err)
		return exitUsage
	}
	rep, err := audit.RunTrusted(r, verify, trust)
	if err != nil {
		fmt.Fprintf(e.stderr, "engine audit: %v\n", err)
		return exitUsage
	}
	if asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(e.stdout, "%s\n", b)
	} else {
		fmt.Fprint(e.stdout, rep.Text())
	}
	if rep.OK {
		return exitOK
	}
	return exitRejected
}

// loadTrust reads the audit's trusted keys (each given as the key or a
// file holding it), receipts, checkpoints and the witnesses whose
// cosignatures the checkpoints must carry; nil without keys.
func loadTrust(keys, receipts, checkpoints, witnesses []string) (*audit.Trust, error) {
	if len(keys) == 0 {
		if len(receipts)+len(checkpoints)+len(witnesses) > 0 {
			return nil, errors.New("--receipt, --checkpoint and --witness need --trusted-key: a receipt proves something only under a key you trust")
		}
		return nil, nil
	}
	if len(witnesses) > 0 && len(checkpoints) == 0 {
		return nil, errors.New("--witness needs --checkpoint: a witness's cosignatures are on the checkpoints it keeps (engine witness --dir), not in the recording")
	}
	t := &audit.Trust{}
	for _, w := range witnesses {
		if _, err := audit.WitnessVerifier(w); err != nil {
			return nil, fmt.Errorf("--witness %s: not a witness's verifier key (NAME+HASH+KEY, as engine witness prints it) nor NAME:PUBLICKEY: %v", w, err)
		}
		t.Witnesses = append(t.Witnesses, w)
	}
	for _, k := range keys {
		key, err := publicKeyArg(k)
		if err != nil {
			return nil, fmt.Errorf("--trusted-key %s: %v", k, err)
		}
		if !signing.ValidKey(key) {
			return nil, fmt.Errorf("--trusted-key %s: not an nkeys user public key (U…): an engine's key is one", k)
		}
		t.EngineKeys = append(t.EngineKeys, key)
	}
	for _, f := range receipts {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--receipt: %v", err)
		}
		t.Receipts = append(t.Receipts, b)
	}
	for _, f := range checkpoints {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--checkpoint: %v", err)
		}
		t.Checkpoints = append(t.Checkpoints, b)
	}
	return t, nil
}
