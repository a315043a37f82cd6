// Command relay runs multi-model relay experiments against a parley engine:
// heterogeneous participants (OpenAI-compatible models, subprocesses,
// scripts) take turns publishing public artifacts, and the engine's
// supervisor ends the deliberation with an explicit record.
//
//	relay run [--nats URL] [--dir DIR] [--json] CONFIG.json
//	relay replay [--speed X] [--nats URL] FILE
//	relay fork FILE --at N [--nats URL] CONFIG.json
//	relay version
//
// Run "relay help" for every command and flag; docs/RELAY.md documents the
// configuration, the turn contract and the adapters.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/buildinfo"
	"github.com/parley-engine/parley/internal/suggest"
	"github.com/parley-engine/parley/internal/textsafe"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/relay"
	"github.com/parley-engine/parley/service"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise the module's build information says which build this is.
var version = ""

// command is one subcommand: its synopsis (the flags the docs show), what
// it does, and its flags.
type command struct {
	name, synopsis, summary, about string
	// flags registers the command's flags on fs and returns the function
	// that runs it with the positional arguments.
	flags func(fs *flag.FlagSet, stdout, stderr io.Writer) func(ctx context.Context, args []string) int
}

func commands() []command {
	return []command{
		{"run", "[--nats URL [--user U --password P | --creds FILE] [--http URL] [--data DIR] | --partitioned] [--dir DIR] [--json] [--quiet|--progress] [--record DIR | --replay DIR] [--parallel K] CONFIG.json",
			"run a relay experiment: participants take turns, the engine's supervisor ends it",
			`Runs the relay experiment CONFIG.json (docs/RELAY.md): its participants take
turns publishing artifacts into a new deliberation, the decider decides, and
the engine's supervisor ends the deliberation with a TERMINATION. Without
--nats the engine is an embedded one in DIR/engine. The run directory gets
report.md (statements, objections and their dispositions, every FAILURE with
its reason, the DAG picture dag.svg), summary.json, record.jsonl and
invalid/ (each invalid answer and its cause); a run whose config sets
"sign" also keys.json (the public keys its charter binds) and
recording.jsonl (a stream recording, signatures included, for engine
audit).

Exit status: 0 the deliberation completed with a verified closure; 1 it ended
otherwise (failed closed, exhausted, deadlock, not verified); 2 bad arguments
or configuration, or the run could not be carried out.`, runFlags},
		{"replay", "[--speed X] [--as ID] [--nats URL [--user U --password P | --creds FILE] | --partitioned] [--dir DIR] [--wait D] [--provenance-root DIR]... [--progress] FILE",
			"re-publish a recorded deliberation as a new one, with its pacing (demos, load)",
			`Re-publishes the stream recording FILE (engine export --format stream) as a
new deliberation (or --as ID), with the recording's pacing scaled by --speed.
The supervisor's recorded emissions are left out: the live supervisor judges
again. Prints {"deliberation","published","skipped_supervisor","status",
"state_digest"} once it has. A recording with a principal's resolutions needs
the operator user of the engine's credentials.json with --nats.

Exit status: 0 replayed; 2 bad arguments, an unreadable recording, or a
publish the engine refused.`, replayFlags},
		{"fork", "FILE (--at N | --at-position P) [--nats URL [--user U --password P | --creds FILE] [--http URL] [--data DIR] | --partitioned] [--dir DIR] [--json] CONFIG.json",
			"continue a recorded deliberation after message N with other participants",
			`A counterfactual run: the participants' artifacts of the stream recording
FILE up to message N (--at: its ordinal within the recorded deliberation, 1
for the open, as report.md, engine watch and the API's "ordinal" number
messages) open a new deliberation, copied with no model call, and the
participants of CONFIG.json carry on from there for its rounds.
--at-position P names the message by its stream position in the recording
instead. Output, exit status and run directory are those of relay run.`, forkFlags},
		{"version", "[--json]", "print the relay's version, Go version and protocol version",
			`Prints the relay's version: the module version, else the VCS revision and
its time that go build stamps ("-dirty" with local changes); a build that
carries neither (go run, go test) says so.`, versionFlags},
	}
}

// Run runs the relay command line with args (without the program name)
// and returns the exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			for _, c := range commands() {
				if c.name == args[1] {
					fs, _ := c.flagSet(stdout, stderr)
					c.usage(fs, stdout)
					return 0
				}
			}
		}
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			fs, run := c.flagSet(stdout, stderr)
			if wantsHelp(args[1:]) {
				c.usage(fs, stdout)
				return 0
			}
			fs.SetOutput(io.Discard)
			fs.Usage = func() {}
			pos, err := parse(fs, args[1:])
			if err != nil {
				if errors.Is(err, flag.ErrHelp) {
					c.usage(fs, stdout)
					return 0
				}
				fmt.Fprintf(stderr, "relay %s: %s (relay %s -h lists its flags)\n", c.name, suggest.FlagError(fs, err), c.name)
				return 2
			}
			return run(ctx, pos)
		}
	}
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	msg := fmt.Sprintf("relay: unknown command %q", args[0])
	if c := suggest.Closest(args[0], names); c != "" {
		msg += fmt.Sprintf(": did you mean %q?", c)
	}
	fmt.Fprintf(stderr, "%s (relay help lists the commands)\n", msg)
	return 2
}

// flagSet returns the command's flags and the function that runs it; its
// usage goes to the flag set's output (stderr, after a bad flag).
func (c command) flagSet(stdout, stderr io.Writer) (*flag.FlagSet, func(context.Context, []string) int) {
	fs := flag.NewFlagSet("relay "+c.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	run := c.flags(fs, stdout, stderr)
	fs.Usage = func() { c.usage(fs, fs.Output()) }
	return fs, run
}

// usage writes the command's synopsis, description and flags.
func (c command) usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "Usage: relay %s %s\n\n%s\n", c.name, c.synopsis, c.about)
	var any bool
	fs.VisitAll(func(*flag.Flag) { any = true })
	if any {
		fmt.Fprintln(w, "\nFlags (they may come before, between or after the file arguments):")
		out := fs.Output()
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(out)
	}
}

// wantsHelp reports whether args ask for a command's help.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help":
			return true
		case "--":
			return false
		}
	}
	return false
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: relay <command> [flags] FILE...")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "relay runs multi-model relay experiments against a parley engine, replays")
	fmt.Fprintln(w, "recorded deliberations and forks them (docs/RELAY.md).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "  help     this help; relay help COMMAND (or relay COMMAND -h) for a command's flags")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  relay %s %s\n", c.name, c.synopsis)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Flags may come before, between or after the file arguments. With --nats, --user and --password")
	fmt.Fprintln(w, "(or --creds) are the engine's NATS credentials: to replay or fork a recording that holds a principal's")
	fmt.Fprintln(w, "resolutions, give the operator user of the engine's credentials.json (docs/SECURITY.md).")
}

// parse parses flags wherever they stand among the arguments (the flag
// package stops at the first non-flag), and returns the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// engineFlags are the flags that reach a running engine.
type engineFlags struct {
	nats, http, data string
	partitioned      bool
	auth             natsAuth
}

func (e *engineFlags) register(fs *flag.FlagSet, withHTTP bool) {
	fs.StringVar(&e.nats, "nats", "", "NATS URL of a running engine (default: an embedded engine in DIR/engine)")
	fs.BoolVar(&e.partitioned, "partitioned", false, "the embedded engine keeps the record partitioned (engine serve --partitioned; without --nats)")
	e.auth.register(fs)
	if withHTTP {
		fs.StringVar(&e.http, "http", relay.DefaultHTTP, "the HTTP address of the engine at --nats, for the /bind address a binding moment prints (default: its credentials file's)")
		fs.StringVar(&e.data, "data", "", "the data directory of the engine at --nats: its credentials.json gives the participant user the relay connects as (without --user or --creds) and the address that opens /bind signed in (default ./parley-data, when it is that engine's)")
	}
}

// credentials returns the credentials file of the engine at --nats, and
// its path: --data's, or ./parley-data's when it names the same NATS
// server (nil when there is none, or it is another engine's).
func (e *engineFlags) credentials(stderr io.Writer) (*service.Credentials, string) {
	if e.nats == "" {
		return nil, ""
	}
	dir, explicit := e.data, e.data != ""
	if !explicit {
		dir = "./parley-data"
	}
	c, err := service.ReadCredentials(dir)
	if err != nil {
		if explicit {
			fmt.Fprintf(stderr, "relay: --data %s: %v (the /bind address is printed without a sign-in)\n", dir, err)
		}
		return nil, ""
	}
	if !explicit && !sameEndpoint(c.NATSURL, strings.Split(e.nats, ",")[0]) {
		return nil, ""
	}
	return c, filepath.Join(dir, service.CredentialsFile)
}

// sameEndpoint reports whether two URLs name the same host and port.
func sameEndpoint(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Host != "" && strings.EqualFold(ua.Host, ub.Host)
}

func runFlags(fs *flag.FlagSet, stdout, stderr io.Writer) func(context.Context, []string) int {
	var ef engineFlags
	ef.register(fs, true)
	dir := fs.String("dir", "", "run directory (default: relay-runs/<UTC time>)")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	quiet := fs.Bool("quiet", false, "no per-turn progress")
	progress := fs.Bool("progress", false, "per-turn progress on standard error even when it is not a terminal")
	record := fs.String("record", "", "record every participant call in this cassette directory")
	replay := fs.String("replay", "", "answer every participant call from this cassette directory (no network)")
	parallel := fs.Int("parallel", 1, "run this many deliberations of the config at once against one engine, each in DIR/run-NNN")
	return func(ctx context.Context, pos []string) int {
		if len(pos) != 1 {
			fmt.Fprintln(stderr, "relay run: need exactly one CONFIG file (relay run -h)")
			return 2
		}
		cfg, err := relay.Load(pos[0])
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		if *record != "" && *replay != "" {
			fmt.Fprintln(stderr, "relay run: --record and --replay exclude each other")
			return 2
		}
		opts := relay.Options{NATS: ef.nats, NATSOptions: ef.auth.options(), HTTP: ef.http, Partitioned: ef.partitioned, Dir: *dir, Record: *record, Replay: *replay,
			Notices: stderr}
		opts.Credentials, opts.CredentialsPath = ef.credentials(stderr)
		opts.NATSOptions = ef.auth.orParticipant(opts.NATSOptions, opts.Credentials)
		if !*quiet && (*progress || isTerminal(stderr)) {
			opts.Progress = stderr
		}
		if *parallel > 1 {
			return runFleet(ctx, cfg, *parallel, opts, *asJSON, stdout, stderr)
		}
		sum, err := relay.Run(ctx, cfg, opts)
		if err != nil {
			fmt.Fprintln(stderr, failure("relay", err))
			return 2
		}
		return printSummary(stdout, sum, *asJSON, "")
	}
}

func runFleet(ctx context.Context, cfg *relay.Config, k int, opts relay.Options, asJSON bool, stdout, stderr io.Writer) int {
	start := time.Now()
	sums, err := relay.RunFleet(ctx, cfg, k, opts)
	if err != nil {
		fmt.Fprintln(stderr, failure("relay", err))
		return 2
	}
	completed := 0
	for _, s := range sums {
		if s.Termination == "completed" && s.ClosureOK {
			completed++
		}
	}
	secs := time.Since(start).Seconds()
	if asJSON {
		b, _ := json.MarshalIndent(map[string]any{"runs": len(sums), "completed": completed, "seconds": secs, "summaries": sums}, "", "  ")
		fmt.Fprintf(stdout, "%s\n", textsafe.JSON(b)) // participants' words: printable
	} else {
		fmt.Fprintf(stdout, "%s\n  %-16s%d, completed and verified %d, %.1f s\n", cfg.Title, "runs", len(sums), completed, secs)
		for _, s := range sums {
			fmt.Fprintf(stdout, "  %-16s%s  %s  %s\n", "", s.Dir, s.Deliberation, s.Termination)
		}
	}
	if completed == len(sums) {
		return 0
	}
	return 1
}

// printSummary prints a run's summary (as JSON, or as a block for people)
// and returns its exit status.
func printSummary(w io.Writer, sum *relay.Summary, asJSON bool, forked string) int {
	if asJSON {
		b, _ := json.MarshalIndent(sum, "", "  ")
		fmt.Fprintf(w, "%s\n", textsafe.JSON(b)) // participants' words: printable
	} else {
		s := relay.FormatSummary(sum)
		if forked != "" {
			title, rest, _ := strings.Cut(s, "\n")
			s = title + "\n" + fmt.Sprintf("  %-16s%s\n", "forked after", forked) + rest
		}
		fmt.Fprint(w, s)
	}
	if sum.Termination == "completed" && sum.ClosureOK {
		return 0
	}
	return 1
}

func replayFlags(fs *flag.FlagSet, stdout, stderr io.Writer) func(context.Context, []string) int {
	var o relay.ReplayOptions
	fs.StringVar(&o.NATS, "nats", "", "NATS URL of a running engine (default: an embedded one in DIR/engine)")
	var auth natsAuth
	auth.register(fs)
	fs.StringVar(&o.Dir, "dir", "", "run directory for an embedded engine (default: relay-runs/<UTC time>)")
	fs.Float64Var(&o.Speed, "speed", 1, "pacing: 1 as recorded, 2 twice as fast, 0 as fast as possible")
	fs.StringVar(&o.As, "as", "", "deliberation id to replay under (default: a new one)")
	fs.DurationVar(&o.Wait, "wait", 0, "keep an embedded engine up this long after the replay (to look at it)")
	fs.BoolVar(&o.Partitioned, "partitioned", false, "the embedded engine keeps the record partitioned (engine serve --partitioned; without --nats)")
	fs.Func("provenance-root", "a directory the embedded engine re-verifies provenance annotations against (repeatable)", func(v string) error {
		o.ProvenanceRoots = append(o.ProvenanceRoots, v)
		return nil
	})
	progress := fs.Bool("progress", false, "a line per message on standard error even when it is not a terminal")
	return func(ctx context.Context, pos []string) int {
		if len(pos) != 1 {
			fmt.Fprintln(stderr, "relay replay: need exactly one recording FILE (relay replay -h)")
			return 2
		}
		if *progress || isTerminal(stderr) {
			o.Progress = stderr
		}
		o.NATSOptions = auth.options()
		if o.NATS != "" && len(o.NATSOptions) == 0 {
			if c, err := service.ReadCredentials("./parley-data"); err == nil && sameEndpoint(c.NATSURL, strings.Split(o.NATS, ",")[0]) {
				o.NATSOptions = auth.orParticipant(nil, c)
			}
		}
		f, err := os.Open(pos[0])
		if err != nil {
			fmt.Fprintln(stderr, failure("relay replay", err))
			return 2
		}
		defer f.Close()
		r, err := recording.NewReader(f)
		if err != nil {
			fmt.Fprintln(stderr, failure("relay replay", err))
			return 2
		}
		res, err := relay.Replay(ctx, r, o)
		if err != nil {
			fmt.Fprintln(stderr, failure("relay replay", err))
			return 2
		}
		b, _ := json.Marshal(res)
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
}

func forkFlags(fs *flag.FlagSet, stdout, stderr io.Writer) func(context.Context, []string) int {
	at := fs.Uint64("at", 0, "fork after message N of the recorded deliberation: its ordinal (1 for the open), as report.md and engine watch number messages")
	atPos := fs.Uint64("at-position", 0, "fork after the message at this stream position of the recording instead")
	var ef engineFlags
	ef.register(fs, true)
	dir := fs.String("dir", "", "run directory (default: relay-runs/<UTC time>)")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	return func(ctx context.Context, pos []string) int {
		if len(pos) != 2 || (*at == 0) == (*atPos == 0) {
			fmt.Fprintln(stderr, "Usage: relay fork FILE (--at N | --at-position P) [flags] CONFIG.json (relay fork -h)")
			return 2
		}
		f, err := os.Open(pos[0])
		if err != nil {
			fmt.Fprintln(stderr, failure("relay fork", err))
			return 2
		}
		defer f.Close()
		rec, err := recording.NewReader(f)
		if err != nil {
			fmt.Fprintln(stderr, failure("relay fork", err))
			return 2
		}
		cfg, err := relay.Load(pos[1])
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		opts := relay.Options{NATS: ef.nats, NATSOptions: ef.auth.options(), HTTP: ef.http, Partitioned: ef.partitioned, Dir: *dir, Fork: rec, ForkAt: *at, ForkAtPosition: *atPos,
			Notices: stderr}
		opts.Credentials, opts.CredentialsPath = ef.credentials(stderr)
		opts.NATSOptions = ef.auth.orParticipant(opts.NATSOptions, opts.Credentials)
		if isTerminal(stderr) {
			opts.Progress = stderr
		}
		sum, err := relay.Run(ctx, cfg, opts)
		if err != nil {
			fmt.Fprintln(stderr, failure("relay fork", err))
			return 2
		}
		forked := fmt.Sprintf("message %d of %s's deliberation %s", *at, pos[0], rec.Header().Deliberation)
		if *atPos > 0 {
			forked = fmt.Sprintf("stream position %d of %s (deliberation %s)", *atPos, pos[0], rec.Header().Deliberation)
		}
		return printSummary(stdout, sum, *asJSON, forked)
	}
}

func versionFlags(fs *flag.FlagSet, stdout, _ io.Writer) func(context.Context, []string) int {
	asJSON := fs.Bool("json", false, "print a JSON object")
	return func(_ context.Context, pos []string) int {
		bi := buildinfo.Read(version)
		if *asJSON {
			b, _ := json.Marshal(struct {
				Relay        string `json:"relay"`
				Revision     string `json:"revision,omitempty"`
				RevisionTime string `json:"revision_time,omitempty"`
				Modified     bool   `json:"modified,omitempty"`
				Go           string `json:"go"`
				Protocol     string `json:"protocol"`
			}{bi.Short(), bi.Revision, bi.Time, bi.Modified, runtime.Version(), events.ProtocolVersion})
			fmt.Fprintf(stdout, "%s\n", b)
			return 0
		}
		fmt.Fprintf(stdout, "relay     %s\ngo        %s\nprotocol  %s\n", bi.String(), runtime.Version(), events.ProtocolVersion)
		return 0
	}
}

// failure is the line that reports err for command: one prefix, the
// command's, whatever prefix the error carries of the package that made
// it ("relay: ", "recording: ").
func failure(command string, err error) string {
	msg := err.Error()
	for _, p := range []string{"relay: ", "recording: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return command + ": " + msg
}

// isTerminal reports whether w is a terminal: progress shows there and
// stays quiet when piped.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// natsAuth are the credentials flags for an engine given with --nats.
type natsAuth struct{ creds, user, password string }

func (a *natsAuth) register(fs *flag.FlagSet) {
	fs.StringVar(&a.creds, "creds", "", "NATS credentials file for the engine at --nats")
	fs.StringVar(&a.user, "user", "", "NATS user for the engine at --nats (the operator user of its credentials.json for replay and fork)")
	fs.StringVar(&a.password, "password", "", "NATS password (or PARLEY_NATS_PASSWORD)")
}

// orParticipant returns opts, or, when no credentials were given, the
// participant user of the engine's credentials file c (nil: none): a
// client of the embedded default without credentials may only read.
func (a *natsAuth) orParticipant(opts []nats.Option, c *service.Credentials) []nats.Option {
	if len(opts) > 0 || c == nil || c.NATSParticipantUser == "" {
		return opts
	}
	return []nats.Option{nats.UserInfo(c.NATSParticipantUser, c.NATSParticipantPassword)}
}

func (a *natsAuth) options() []nats.Option {
	var opts []nats.Option
	if a.creds != "" {
		opts = append(opts, nats.UserCredentials(a.creds))
	}
	if a.user != "" {
		if a.password == "" {
			a.password = os.Getenv("PARLEY_NATS_PASSWORD")
		}
		opts = append(opts, nats.UserInfo(a.user, a.password))
	}
	return opts
}
