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
	opts := relay.Options{NATS: *natsURL, Dir: *dir, Record: *record, Replay: *replay}
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
	fmt.Fprintln(w, "Usage: relay run [--nats URL] [--dir DIR] [--json] [--quiet] [--record DIR | --replay DIR] [--parallel K] CONFIG.json")
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
