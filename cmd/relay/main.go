// Command relay runs multi-model relay experiments against a parley engine:
// heterogeneous participants (OpenAI-compatible models, subprocesses,
// scripts) take turns publishing public artifacts, and the engine's
// supervisor ends the deliberation with an explicit record.
//
//	relay run [--nats URL] [--dir DIR] [--json] CONFIG.json
//
// docs/RELAY.md documents the configuration, the turn contract and the
// adapters.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/relay"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes: 0 the deliberation completed with a verified closure; 1 it
// ended otherwise (failed closed, exhausted, deadlock, not verified); 2 bad
// arguments or configuration, or the run could not be carried out.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "replay" {
		return runReplay(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "fork" {
		return runFork(ctx, args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "run" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "help" || args[0] == "--help") {
			usage(stdout)
			return 0
		}
		usage(stderr)
		return 2
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	natsURL := fs.String("nats", "", "NATS URL of a running engine (default: an embedded engine in the run directory)")
	var auth natsAuth
	auth.register(fs)
	dir := fs.String("dir", "", "run directory (default: relay-runs/<UTC time>)")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	quiet := fs.Bool("quiet", false, "no per-turn progress")
	progress := fs.Bool("progress", false, "per-turn progress on standard error even when it is not a terminal")
	record := fs.String("record", "", "record every participant call in this cassette directory")
	replay := fs.String("replay", "", "answer every participant call from this cassette directory (no network)")
	parallel := fs.Int("parallel", 1, "run this many deliberations of the config at once against one engine")
	fs.Usage = func() { usage(stderr); fs.PrintDefaults() }
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "relay run: need exactly one CONFIG file")
		return 2
	}
	cfg, err := relay.Load(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if *record != "" && *replay != "" {
		fmt.Fprintln(stderr, "relay run: --record and --replay exclude each other")
		return 2
	}
	opts := relay.Options{NATS: *natsURL, NATSOptions: auth.options(), Dir: *dir, Record: *record, Replay: *replay}
	if !*quiet && (*progress || isTerminal(stderr)) {
		opts.Progress = stderr
	}
	if *parallel > 1 {
		start := time.Now()
		sums, err := relay.RunFleet(ctx, cfg, *parallel, opts)
		if err != nil {
			fmt.Fprintf(stderr, "relay: %v\n", err)
			return 2
		}
		completed := 0
		for _, s := range sums {
			if s.Termination == "completed" && s.ClosureOK {
				completed++
			}
		}
		secs := time.Since(start).Seconds()
		if *asJSON {
			b, _ := json.MarshalIndent(map[string]any{"runs": len(sums), "completed": completed, "seconds": secs, "summaries": sums}, "", "  ")
			fmt.Fprintf(stdout, "%s\n", b)
		} else {
			fmt.Fprintf(stdout, "runs %d, completed and verified %d, %.1f s\n", len(sums), completed, secs)
		}
		if completed == len(sums) {
			return 0
		}
		return 1
	}
	sum, err := relay.Run(ctx, cfg, opts)
	if err != nil {
		fmt.Fprintf(stderr, "relay: %v\n", err)
		return 2
	}
	if *asJSON {
		b, _ := json.MarshalIndent(sum, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		fmt.Fprintf(stdout, "deliberation   %s\ntermination    %s\nrounds         %d\nartifacts      %v\nfinal decision %s\nclosure ok     %v\ninvalid output %d\ntokens         %d\nstate_digest   %s\n",
			sum.Deliberation, sum.Termination, sum.Rounds, sum.Counts, sum.FinalDecision, sum.ClosureOK, sum.InvalidOutputs, sum.Tokens, sum.StateDigest)
		if sum.FailedClosed != "" {
			fmt.Fprintf(stdout, "failed closed  %s\n", sum.FailedClosed)
		}
	}
	if sum.Termination == "completed" && sum.ClosureOK {
		return 0
	}
	return 1
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: relay run [--nats URL] [--dir DIR] [--json] [--quiet|--progress] [--record DIR | --replay DIR] [--parallel K] CONFIG.json")
	fmt.Fprintln(w, "       relay replay [--nats URL] [--dir DIR] [--speed X] [--as ID] [--wait D] FILE")
	fmt.Fprintln(w, "       relay fork FILE --at POS [--nats URL] [--dir DIR] [--json] CONFIG.json")
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

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o relay.ReplayOptions
	fs.StringVar(&o.NATS, "nats", "", "NATS URL of a running engine (default: an embedded one)")
	var auth natsAuth
	auth.register(fs)
	fs.StringVar(&o.Dir, "dir", "", "run directory for an embedded engine")
	fs.Float64Var(&o.Speed, "speed", 1, "pacing: 1 as recorded, 2 twice as fast, 0 as fast as possible")
	fs.StringVar(&o.As, "as", "", "deliberation id to replay under (default: a new one)")
	fs.DurationVar(&o.Wait, "wait", 0, "keep an embedded engine up this long after the replay")
	fs.Func("provenance-root", "a directory the embedded engine re-verifies provenance annotations against (repeatable)", func(v string) error {
		o.ProvenanceRoots = append(o.ProvenanceRoots, v)
		return nil
	})
	progress := fs.Bool("progress", false, "a line per message on standard error")
	pos, err := parse(fs, args)
	if err != nil || len(pos) != 1 {
		fmt.Fprintln(stderr, "Usage: relay replay [flags] FILE")
		return 2
	}
	if *progress || isTerminal(stderr) {
		o.Progress = stderr
	}
	o.NATSOptions = auth.options()
	f, err := os.Open(pos[0])
	if err != nil {
		fmt.Fprintln(stderr, "relay replay:", err)
		return 2
	}
	defer f.Close()
	r, err := recording.NewReader(f)
	if err != nil {
		fmt.Fprintln(stderr, "relay replay:", err)
		return 2
	}
	res, err := relay.Replay(ctx, r, o)
	if err != nil {
		fmt.Fprintln(stderr, "relay replay:", err)
		return 2
	}
	b, _ := json.Marshal(res)
	fmt.Fprintf(stdout, "%s\n", b)
	return 0
}

func runFork(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fork", flag.ContinueOnError)
	fs.SetOutput(stderr)
	at := fs.Uint64("at", 0, "fork after this stream position of the recording")
	natsURL := fs.String("nats", "", "NATS URL of a running engine (default: an embedded one)")
	var auth natsAuth
	auth.register(fs)
	dir := fs.String("dir", "", "run directory")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	pos, err := parse(fs, args)
	if err != nil || len(pos) != 2 || *at == 0 {
		fmt.Fprintln(stderr, "Usage: relay fork FILE --at POS [flags] CONFIG.json")
		return 2
	}
	f, err := os.Open(pos[0])
	if err != nil {
		fmt.Fprintln(stderr, "relay fork:", err)
		return 2
	}
	defer f.Close()
	rec, err := recording.NewReader(f)
	if err != nil {
		fmt.Fprintln(stderr, "relay fork:", err)
		return 2
	}
	cfg, err := relay.Load(pos[1])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	opts := relay.Options{NATS: *natsURL, NATSOptions: auth.options(), Dir: *dir, Fork: rec, ForkAt: *at}
	if isTerminal(stderr) {
		opts.Progress = stderr
	}
	sum, err := relay.Run(ctx, cfg, opts)
	if err != nil {
		fmt.Fprintf(stderr, "relay fork: %v\n", err)
		return 2
	}
	b, _ := json.MarshalIndent(sum, "", "  ")
	if *asJSON {
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		fmt.Fprintf(stdout, "deliberation %s (forked at %d)\ntermination  %s\nclosure ok   %v\n", sum.Deliberation, *at, sum.Termination, sum.ClosureOK)
	}
	if sum.Termination == "completed" && sum.ClosureOK {
		return 0
	}
	return 1
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
