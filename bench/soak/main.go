// Command soak runs honest relays beside one class of hostile client at a
// time, against `engine serve` in a process of its own (built from this
// repository), and reports for each class:
//
//   - the bytes the attacker sent;
//   - the engine's RSS growth over the attack (VmRSS before and near its
//     end, and the peak), and again once the attack has stopped and the
//     engine has settled (-settle: the embedded server's block caches
//     expire 10 s after their last use, and a quiet engine gives freed
//     memory back), against the goal of at most 1% of the bytes sent (at
//     most 100 MB for 1 GB of hostile traffic);
//   - whether every honest relay completed its deliberations with a
//     verified closure;
//   - the honest participants' ingest latency p99 (a publish until the
//     engine's projection has applied it) during the attack, against the
//     same engine's in the phase just before with no attacker (goal:
//     within 2x);
//   - whether a fresh NATS client and a fresh HTTP client could connect
//     while the attack went on.
//
// The attacker runs in a process of its own (child.go), the honest relays
// in the soak's. The classes (-classes, attacks.go): slow-bodies (sockets
// sending a request's headers and one byte of its body), live-feeds (more
// live feeds than the engine serves, from one network and several),
// metric-labels (names a metric label could be made of), closure-reads
// (closure verifications at positions never asked before), big-messages
// (control messages, artifacts with unknown references and opens of
// about 900 KB, fold.go), junk (small claims from a token the charter
// does not name, as fast as a client can), opens (the smallest opens, each
// under a new id). A class is a file that registers an attack. Each class
// runs once per -engine-args (the engine's extra flags), one engine after
// the other; the classes that write to the stream (big-messages, junk,
// opens, metric-labels) run once per -attackers: without credentials (the
// embedded default lets such a client only read: the check is that the
// record keeps nothing of it) and as the participant user (an insider
// who read the engine's data directory).
//
//	go run ./bench/soak
//	go run ./bench/soak -short
//	go run ./bench/soak -classes big-messages -engine-args '' -engine-args '--memory-limit 512MiB'
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// options of a soak run.
type options struct {
	classes      []string
	phase        time.Duration // each of the baseline and the attack
	settle       time.Duration // after the attack, before the memory is read again
	relays       int
	fds          int // the engine's open-descriptor limit (0: the soak's own)
	sz           sizes
	engineBinary string // built into a temporary directory when empty
	// engineArgs are the engine variants each class runs against, each
	// the extra flags of its `engine serve` (one variant without any when
	// empty).
	engineArgs [][]string
	// attackers are who the writer classes attack as: "anonymous" (a
	// client without credentials) and "participant" (an insider with the
	// participant's password). The other classes run once.
	attackers []string
	verbose   bool
}

// result is one class's figures.
type result struct {
	Class      string `json:"class"`
	EngineArgs string `json:"engine_args,omitempty"`
	Attacker   string `json:"attacker"`
	// Recorded counts the messages the engine refused during the attack
	// (every code): what an attacker made the record keep.
	Recorded                  int64 `json:"recorded"`
	BytesSent                 int64 `json:"bytes_sent"`
	RSSBefore, RSSAfter, Peak int64 `json:"-"`
	RSSGrowth                 int64 `json:"rss_growth_bytes"`
	// RSSSettled is the RSS growth once the attack has stopped and the
	// embedded server's caches of the stream's blocks have expired
	// (settle): what the engine keeps, against what it held meanwhile.
	RSSSettled            int64   `json:"rss_growth_settled_bytes"`
	SettledShare          float64 `json:"rss_growth_settled_per_byte_sent"`
	HeapBefore, HeapAfter int64   `json:"-"`
	HeapSettled           int64   `json:"-"`
	Reclaims              int64   `json:"reclaims"`
	// LimitHits counts the engine's hits of its soft memory limit
	// (parley_memory_limit_hits_total, limit.memory).
	LimitHits     int64         `json:"memory_limit_hits"`
	GrowthShare   float64       `json:"rss_growth_per_byte_sent"`
	Descriptors   int           `json:"engine_descriptors"`
	Relays        int           `json:"relays"`
	Deliberations int           `json:"deliberations"`
	Completed     int           `json:"completed"`
	Verified      int           `json:"verified"`
	BaselineP99   time.Duration `json:"baseline_p99_ns"`
	AttackP99     time.Duration `json:"attack_p99_ns"`
	Ratio         float64       `json:"p99_ratio"`
	FreshNATS     string        `json:"fresh_nats"`
	FreshHTTP     string        `json:"fresh_http"`
	Note          string        `json:"note"`
	Load          string        `json:"load_average"` // /proc/loadavg's 1, 5 and 15 minutes near the attack's end
	Check         string        `json:"check,omitempty"`
	Errors        []string      `json:"errors,omitempty"`
}

func main() {
	if os.Getenv(attackerEnv) != "" {
		runAttacker()
		return
	}
	var o options
	classes := flag.String("classes", "", "comma-separated classes to run (default: all: "+strings.Join(names(), ", ")+")")
	flag.DurationVar(&o.phase, "phase", 20*time.Second, "length of the baseline and of the attack phase of each class")
	flag.DurationVar(&o.settle, "settle", 30*time.Second, "wait after each attack before the engine's memory is read again (past the embedded server's 10 s cache expiry)")
	flag.IntVar(&o.relays, "relays", 4, "honest relays")
	flag.IntVar(&o.fds, "engine-fds", 20000, "the engine's open-descriptor limit, soft and hard (through prlimit; 0: the soak's own)")
	flag.IntVar(&o.sz.Sockets, "sockets", 19900, "slow-bodies: sockets held at once")
	flag.IntVar(&o.sz.Feeds, "feeds", 40, "live-feeds: feeds asked for per address (16 addresses)")
	flag.IntVar(&o.sz.DAG, "dag", 90000, "closure-reads: artifacts of the deliberation read")
	flag.IntVar(&o.sz.Readers, "readers", 8, "closure-reads: concurrent readers")
	flag.IntVar(&o.sz.LabelRate, "label-rate", 2000, "metric-labels: hostile messages a second")
	short := flag.Bool("short", false, "small sizes for a quick check (2 s phases, a 3 s settle, 2 relays, 1,024 descriptors, 900 sockets, a 5,000-artifact DAG); flags given with it still apply")
	asJSON := flag.Bool("json", false, "print the results as JSON")
	flag.BoolVar(&o.verbose, "v", false, "say what each phase does as it goes")
	attackers := flag.String("attackers", "anonymous,participant", "who the writer classes attack as, comma-separated: anonymous (no credentials: the embedded default lets it only read) and participant (an insider holding the participant's password)")
	flag.StringVar(&o.engineBinary, "engine", "", "an engine binary to run instead of building ./cmd/engine (an earlier build, to compare)")
	flag.Func("engine-args", "extra `flags` of engine serve, space-separated (--memory-limit 512MiB); repeat it to run each class once per variant, one after the other (an empty one: the engine's defaults)", func(v string) error {
		o.engineArgs = append(o.engineArgs, strings.Fields(v))
		return nil
	})
	flag.Parse()
	if *short {
		// The small sizes, then whatever was given explicitly.
		o = shortOptions(o)
		o.engineArgs = nil
		flag.CommandLine.Parse(os.Args[1:])
	}
	if *classes != "" {
		o.classes = strings.Split(*classes, ",")
	}
	o.attackers = strings.Split(*attackers, ",")
	for _, a := range o.attackers {
		if a != "anonymous" && a != "participant" {
			log.Fatalf("-attackers: %q is neither anonymous nor participant", a)
		}
	}
	fmt.Printf("machine: %d CPUs, %s, load average %s\n", runtime.NumCPU(), runtime.Version(), loadAverage())
	res, err := run(context.Background(), o)
	if err != nil {
		log.Fatal(err)
	}
	if *asJSON {
		json.NewEncoder(os.Stdout).Encode(res)
		return
	}
	report(os.Stdout, res, o)
}

func shortOptions(o options) options {
	o.phase, o.relays, o.fds, o.settle = 2*time.Second, 2, 1024, 3*time.Second
	o.sz = sizes{Sockets: 900, Feeds: 40, DAG: 5000, Readers: 8, LabelRate: 500, Consumers: 50}
	return o
}

func names() []string {
	var out []string
	for _, a := range attacks {
		out = append(out, a.name())
	}
	return out
}

func (o options) logf(format string, args ...any) {
	if o.verbose {
		log.Printf(format, args...)
	}
}

// run runs every class of o.classes (all when empty), each on an engine
// of its own.
func run(ctx context.Context, o options) ([]result, error) {
	dir, err := os.MkdirTemp("", "parley-soak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := o.engineBinary
	if bin == "" {
		if bin, err = buildEngine(ctx, dir); err != nil {
			return nil, err
		}
	}
	variants := o.engineArgs
	if len(variants) == 0 {
		variants = [][]string{nil}
	}
	var out []result
	for _, a := range attacks {
		if len(o.classes) > 0 && !slices.Contains(o.classes, a.name()) {
			continue
		}
		who := o.attackers
		if len(who) == 0 {
			who = []string{"anonymous", "participant"}
		}
		if !asBoth(a) {
			who = []string{"anonymous"}
		}
		for _, args := range variants {
			for _, as := range who {
				r, err := runClass(ctx, o, bin, dir, a, args, as)
				if err != nil {
					return out, fmt.Errorf("%s %s as %s: %w", a.name(), strings.Join(args, " "), as, err)
				}
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// runClass starts an engine (with the extra flags args), prepares it for
// the class, runs the honest relays alone for a phase (the baseline), then
// beside the attack for a phase, and stops the engine.
func runClass(ctx context.Context, o options, bin, dir string, a attack, args []string, as string) (result, error) {
	r := result{Class: a.name(), EngineArgs: strings.Join(args, " "), Relays: o.relays, Attacker: as}
	extra := args
	if o.sz.Consumers > 0 {
		extra = append(slices.Clone(args), "--max-consumers", strconv.Itoa(o.sz.Consumers))
	}
	e, err := startEngine(ctx, bin, dir, o.fds, extra...)
	if err != nil {
		return r, err
	}
	e.insider = as == "participant"
	defer e.stop()
	o.logf("%s: engine pid %d, setting up", a.name(), e.cmd.Process.Pid)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	err = a.setup(sctx, e, o.sz)
	cancel()
	if err != nil {
		return r, fmt.Errorf("setup: %w", err)
	}
	finish := 30 * time.Second
	o.logf("%s: baseline", a.name())
	bctx, cancel := context.WithTimeout(ctx, o.phase)
	base := runHonest(bctx, e, o.relays, finish)
	cancel()
	r.BaselineP99 = p99(base.latencies)

	o.logf("%s: attack", a.name())
	recorded := e.recorded()
	r.RSSBefore, _ = e.memory()
	r.HeapBefore = e.heap()
	actx, cancel := context.WithTimeout(ctx, o.phase)
	defer cancel()
	var sent int64
	var wg sync.WaitGroup
	var note string
	var attackErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent, note, attackErr = runAttack(ctx, a, e, o.sz, o.phase)
	}()
	// The probes, the memory and the descriptors near the end of the
	// attack, while it goes on.
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-actx.Done():
		case <-time.After(o.phase * 9 / 10):
		}
		r.RSSAfter, r.Peak = e.memory()
		r.Descriptors = e.descriptors()
		r.HeapAfter = e.heap()
		r.FreshNATS, r.FreshHTTP = e.freshNATS(), e.freshHTTP()
		r.Load = loadAverage()
	}()
	hon := runHonest(actx, e, o.relays, finish)
	wg.Wait()
	if attackErr != nil {
		return r, attackErr
	}
	// What stays: the embedded server keeps the blocks of the stream it
	// wrote or read in memory for 10 s after their last use (nats-server's
	// cache expiry, not configurable), and the Go runtime gives freed
	// memory back to the system over some seconds.
	o.logf("%s: settling %s", a.name(), o.settle)
	time.Sleep(o.settle)
	rss, _ := e.memory()
	r.RSSSettled = rss - r.RSSBefore
	r.HeapSettled = e.heap()
	r.Reclaims = e.metric("parley_memory_reclaims_total")
	r.LimitHits = e.metric("parley_memory_limit_hits_total")
	r.Note = note
	r.Recorded = e.recorded() - recorded
	switch c, ok := a.(checked); {
	case writes(a) && !e.insider:
		// Nothing a client without credentials sends is recorded.
		if sent == 0 {
			r.Check = "sent nothing"
		} else if r.Recorded != 0 {
			r.Check = fmt.Sprintf("the record kept %d messages of a client without credentials", r.Recorded)
		}
	case ok:
		r.Check = c.check()
	}
	r.BytesSent = sent
	r.RSSGrowth = r.RSSAfter - r.RSSBefore
	if r.BytesSent > 0 {
		r.GrowthShare = float64(r.RSSGrowth) / float64(r.BytesSent)
		r.SettledShare = float64(r.RSSSettled) / float64(r.BytesSent)
	}
	r.AttackP99 = p99(hon.latencies)
	if r.BaselineP99 > 0 {
		r.Ratio = float64(r.AttackP99) / float64(r.BaselineP99)
	}
	r.Deliberations, r.Completed, r.Verified = hon.deliberations, hon.completed, hon.verified
	r.Errors = append(base.errs, hon.errs...)
	return r, nil
}

// name is the class, with the engine's extra flags when it has some.
func (r result) name() string {
	n := r.Class
	if r.Attacker == "participant" {
		n += " (participant)"
	}
	if r.EngineArgs == "" {
		return n
	}
	return n + " [" + r.EngineArgs + "]"
}

// loadAverage is the machine's load average over 1, 5 and 15 minutes
// ("" where /proc/loadavg is not).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return ""
}

func p99(ls []time.Duration) time.Duration {
	if len(ls) == 0 {
		return 0
	}
	s := slices.Clone(ls)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*99/100)]
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }

func report(w *os.File, res []result, o options) {
	fmt.Fprintf(w, "engine: its own process, %d open descriptors; %d honest relays; phases of %s (baseline, then attack)\n\n", o.fds, o.relays, o.phase)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "class\tsent\tRSS growth (of sent)\tsettled (of sent)\tpeak RSS\tfds\tcompleted/verified\tp99 baseline -> attack\tfresh NATS\tfresh HTTP")
	for _, r := range res {
		share := "-"
		if r.BytesSent > 0 {
			share = fmt.Sprintf("%.2f%%", 100*r.GrowthShare)
		}
		settled := "-"
		if r.BytesSent > 0 {
			settled = fmt.Sprintf("%.2f%%", 100*r.SettledShare)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s (%s)\t%s (%s)\t%s\t%d\t%d/%d of %d\t%s -> %s (%.2fx)\t%s\t%s\n", r.name(), mb(r.BytesSent), mb(r.RSSGrowth), share, mb(r.RSSSettled), settled, mb(r.Peak), r.Descriptors,
			r.Completed, r.Verified, r.Deliberations, r.BaselineP99.Round(10*time.Microsecond), r.AttackP99.Round(10*time.Microsecond), r.Ratio, r.FreshNATS, r.FreshHTTP)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, r := range res {
		fmt.Fprintf(w, "%s: %s; %d messages recorded (refused); the engine's Go heap in use %s before, %s at the end, %s settled (%d reclaims, %d limit.memory hits); load average near the attack's end %s\n", r.name(), r.Note, r.Recorded, mb(r.HeapBefore), mb(r.HeapAfter), mb(r.HeapSettled), r.Reclaims, r.LimitHits, r.Load)
		if r.Check != "" {
			fmt.Fprintf(w, "  NOT HELD: %s\n", r.Check)
		}
		for i, e := range r.Errors {
			if i == 5 {
				fmt.Fprintf(w, "  … %d more\n", len(r.Errors)-5)
				break
			}
			fmt.Fprintf(w, "  error: %s\n", e)
		}
	}
}
