package closure_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
)

// Scenario scripts in testdata/*.txt, one statement a line:
//
//	claim NAME                                  a CLAIM
//	objection NAME blocking|nonblocking REL:NAME...
//	revision NAME REL:NAME...
//	evidence NAME REL:NAME...
//	decision NAME final|provisional [REL:NAME...] [dispose:NAME=KIND...] [unresolved:NAME...]
//	ghost NAME                                  an id that is never added (an unavailable artifact)
//	verify NAME [at=N]                          positions are the artifacts' line order, from 1
//	want ok=BOOL closure_size=N                 the result
//	want finding CODE [NAME]                    a finding (each finding must be wanted)
//
// A '#' starts a comment. Every want of a verify comes after it.
func TestScenarios(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) < 10 {
		t.Fatalf("%d scenarios", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) { runScenario(t, file) })
	}
}

func runScenario(t *testing.T, file string) {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g := closure.NewMemGraph()
	ids := map[string]canon.Digest{}
	names := map[canon.Digest]string{}
	var pos uint64
	var res *closure.Result
	var wanted []string
	check := func() {
		if res == nil {
			return
		}
		var got []string
		for _, fd := range res.Findings {
			got = append(got, fd.Code+" "+names[mustDigest(fd.ArtifactID)])
		}
		slices.Sort(got)
		slices.Sort(wanted)
		if !slices.Equal(got, wanted) {
			t.Errorf("%s: findings\n got  %q\n want %q", file, got, wanted)
		}
		res, wanted = nil, nil
	}
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		text, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		at := fmt.Sprintf("%s:%d", file, line)
		ref := func(spec string) events.Reference {
			rel, name, ok := strings.Cut(spec, ":")
			id, known := ids[name]
			if !ok || !known {
				t.Fatalf("%s: bad reference %q", at, spec)
			}
			return events.Reference{Target: id, Relation: events.Relation(rel)}
		}
		add := func(typ events.Type, name string, info closure.Info, refs []events.Reference) {
			// A unique id per name, derived from the scenario and the name.
			id, _ := canon.ID([]byte(fmt.Sprintf(`{"scenario":%q,"name":%q}`, file, name)))
			ids[name], names[id] = id, name
			pos++
			info.Position, info.Type = pos, typ
			g.AddNode(id, info, refs)
		}
		switch cmd, args := fields[0], fields[1:]; cmd {
		case "claim":
			add(events.TypeClaim, args[0], closure.Info{}, nil)
		case "objection":
			var refs []events.Reference
			for _, a := range args[2:] {
				refs = append(refs, ref(a))
			}
			add(events.TypeObjection, args[0], closure.Info{Blocking: args[1] == "blocking"}, refs)
		case "revision", "evidence":
			var refs []events.Reference
			for _, a := range args[1:] {
				refs = append(refs, ref(a))
			}
			typ := events.TypeRevision
			if cmd == "evidence" {
				typ = events.TypeEvidence
			}
			add(typ, args[0], closure.Info{}, refs)
		case "decision":
			d := &events.Decision{Outcome: "o", Status: events.DecisionStatus(args[1])}
			var refs []events.Reference
			for _, a := range args[2:] {
				switch {
				case strings.HasPrefix(a, "dispose:"):
					name, kind, _ := strings.Cut(strings.TrimPrefix(a, "dispose:"), "=")
					id, ok := ids[name]
					if !ok {
						t.Fatalf("%s: unknown %s", at, name)
					}
					d.ObjectionDispositions = append(d.ObjectionDispositions, events.Disposition{Objection: id, Disposition: events.DispositionKind(kind), Rationale: "r"})
				case strings.HasPrefix(a, "unresolved:"):
					id := ids[strings.TrimPrefix(a, "unresolved:")]
					d.UnresolvedIssues = append(d.UnresolvedIssues, events.Issue{Description: "open", Objection: &id})
				default:
					refs = append(refs, ref(a))
				}
			}
			add(events.TypeDecision, args[0], closure.Info{Decision: d}, refs)
		case "ghost":
			id, _ := canon.ID([]byte(fmt.Sprintf(`{"ghost":%q}`, args[0])))
			ids[args[0]], names[id] = id, args[0]
		case "verify":
			check()
			var atPos uint64
			if len(args) > 1 {
				n, err := strconv.ParseUint(strings.TrimPrefix(args[1], "at="), 10, 64)
				if err != nil {
					t.Fatalf("%s: %v", at, err)
				}
				atPos = n
			}
			r := closure.Verify(g, ids[args[0]], atPos, closure.Limits{})
			res = &r
		case "want":
			if res == nil {
				t.Fatalf("%s: want before verify", at)
			}
			if args[0] == "finding" {
				name := ""
				if len(args) > 2 {
					name = args[2]
				}
				wanted = append(wanted, args[1]+" "+name)
				continue
			}
			for _, kv := range args {
				k, v, _ := strings.Cut(kv, "=")
				var got string
				switch k {
				case "ok":
					got = strconv.FormatBool(res.OK)
				case "closure_size":
					got = strconv.Itoa(res.ClosureSize)
				case "status":
					got = res.Status
				case "position":
					got = strconv.FormatUint(res.Position, 10)
				default:
					t.Fatalf("%s: unknown want %q", at, k)
				}
				if got != v {
					t.Errorf("%s: %s = %s, want %s (findings %+v)", at, k, got, v, res.Findings)
				}
			}
		default:
			t.Fatalf("%s: unknown statement %q", at, cmd)
		}
	}
	check()
}

func mustDigest(s string) canon.Digest {
	d, _ := canon.ParseDigest(s)
	return d
}
