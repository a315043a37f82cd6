package termination_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

const delib = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"

var base = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// Scenario scripts in testdata/*.txt drive a projection and the
// supervisor, one statement a line ('#' starts a comment):
//
//	at DURATION                      the stream time of the next messages (after base)
//	open CHARTER-JSON                the open control message
//	ctl JSON                         another control message
//	claim P NAME [tokens=N] [cost=N] [pad=N]
//	                                 a CLAIM by participant P (with parley.usage; padded by N bytes)
//	objection P NAME blocking|nonblocking TARGET...
//	evidence P NAME TARGET
//	revision P NAME TARGET
//	decision P NAME final|provisional TARGET [dispose:NAME=KIND...]
//	decide AT                        Decide at base+AT; the emissions are then
//	                                 applied as the runner would publish them
//	want emit TYPE CODE|STATE ...    the emissions of the last decide, in order
//	want none                        no emission
//	want status S                    the deliberation's status
//	want unresolved NAME...          the last TERMINATION's unresolved_objections
//	want rejection CODE              a rejection with that code exists
func TestScenarios(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) < 10 {
		t.Fatalf("%d scenarios", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) { runScenario(t, file) })
	}
}

type world struct {
	t     *testing.T
	p     *projector.Projection
	seq   uint64
	now   time.Time
	ids   map[string]canon.Digest
	names map[canon.Digest]string
	last  []termination.Emission
	lastT *events.Termination
}

func (w *world) apply(subject string, data []byte) projector.Outcome {
	w.seq++
	return w.p.Apply(projector.Msg{Seq: w.seq, Subject: subject, Data: data, Time: w.now})
}

func (w *world) publish(participant, name string, d events.Draft) {
	a, err := events.Seal(d)
	if err != nil {
		w.t.Fatalf("seal %s: %v", name, err)
	}
	w.ids[name], w.names[a.ID] = a.ID, name
	w.apply(wire.ArtifactSubject(delib, participant), a.Canonical)
}

func (w *world) ref(name string, rel events.Relation) events.Reference {
	id, ok := w.ids[name]
	if !ok {
		w.t.Fatalf("unknown artifact %q", name)
	}
	return events.Reference{Target: id, Relation: rel}
}

func runScenario(t *testing.T, file string) {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := &world{t: t, p: projector.New(projector.Options{Rules: termination.Rules{}}), now: base, ids: map[string]canon.Digest{}, names: map[canon.Digest]string{}}
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		cmd, rest, _ := strings.Cut(text, " ")
		args := strings.Fields(rest)
		at := fmt.Sprintf("%s:%d", file, line)
		switch cmd {
		case "at":
			d, err := time.ParseDuration(args[0])
			if err != nil {
				t.Fatalf("%s: %v", at, err)
			}
			w.now = base.Add(d)
		case "open":
			w.apply(wire.ControlSubject(delib), []byte(`{"op":"open","charter":`+rest+`}`))
			if w.p.Deliberation(delib) == nil {
				t.Fatalf("%s: the deliberation did not open", at)
			}
		case "ctl":
			w.apply(wire.ControlSubject(delib), []byte(rest))
		case "claim":
			stmt := "claim " + args[1]
			var ext map[string]any
			for _, kv := range args[2:] {
				k, v, _ := strings.Cut(kv, "=")
				n, _ := strconv.Atoi(v)
				switch k {
				case "tokens":
					ext = map[string]any{"parley.usage": map[string]int{"input_tokens": n / 2, "output_tokens": n - n/2}}
				case "cost":
					ext = map[string]any{"parley.usage": map[string]int{"cost_usd_micros": n}}
				case "pad":
					stmt += strings.Repeat(".", n)
				}
			}
			w.publish(args[0], args[1], events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: stmt}, Extensions: ext})
		case "objection":
			var refs []events.Reference
			for _, tname := range args[3:] {
				refs = append(refs, w.ref(tname, events.ObjectsTo))
			}
			w.publish(args[0], args[1], events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "objection " + args[1], Blocking: args[2] == "blocking"}, References: refs})
		case "evidence":
			w.publish(args[0], args[1], events.Draft{Type: events.TypeEvidence, Payload: events.Evidence{Content: "evidence " + args[1], ProvenanceClass: events.ExternalEvidence},
				References: []events.Reference{w.ref(args[2], events.Supports)}})
		case "revision":
			w.publish(args[0], args[1], events.Draft{Type: events.TypeRevision, Payload: events.RevisionPayload{Statement: "revision " + args[1]},
				References: []events.Reference{w.ref(args[2], events.Revises)}})
		case "decision":
			d := events.Decision{Outcome: "outcome " + args[1], Status: events.DecisionStatus(args[2])}
			refs := []events.Reference{w.ref(args[3], events.Decides)}
			for _, a := range args[4:] {
				name, kind, _ := strings.Cut(strings.TrimPrefix(a, "dispose:"), "=")
				d.ObjectionDispositions = append(d.ObjectionDispositions, events.Disposition{Objection: w.ids[name], Disposition: events.DispositionKind(kind), Rationale: "because"})
			}
			w.publish(args[0], args[1], events.Draft{Type: events.TypeDecision, Payload: d, References: refs})
		case "decide":
			dur, err := time.ParseDuration(args[0])
			if err != nil {
				t.Fatalf("%s: %v", at, err)
			}
			d := w.p.Deliberation(delib)
			w.last = termination.Decide(d, base.Add(dur))
			// Deterministic: the same projection and time, the same bytes.
			again := termination.Decide(d, base.Add(dur))
			if len(again) != len(w.last) {
				t.Fatalf("%s: Decide is not deterministic", at)
			}
			for i := range again {
				if again[i].Artifact.ID != w.last[i].Artifact.ID {
					t.Fatalf("%s: Decide is not deterministic", at)
				}
			}
			// The runner publishes what it decided after deciding: the
			// emissions reach the stream at the time judged.
			now := w.now
			w.now = base.Add(dur)
			for _, e := range w.last {
				o := w.apply(wire.ArtifactSubject(delib, wire.SupervisorToken), e.Artifact.Canonical)
				if o.Rejection != nil {
					t.Fatalf("%s: the projector rejected the supervisor's %s: %+v", at, e.Artifact.Type, o.Rejection)
				}
				if tp := e.Artifact.TerminationPayload(); tp != nil {
					w.lastT = tp
				}
			}
			w.now = now
		case "want":
			d := w.p.Deliberation(delib)
			switch args[0] {
			case "none":
				if len(w.last) != 0 {
					t.Errorf("%s: emissions %v", at, describe(w.last))
				}
			case "emit":
				var want []string
				for i := 1; i+1 < len(args); i += 2 {
					want = append(want, args[i]+" "+args[i+1])
				}
				if got := describe(w.last); !slices.Equal(got, want) {
					t.Errorf("%s: emissions\n got  %q\n want %q", at, got, want)
				}
			case "status":
				if string(d.Status) != args[1] {
					t.Errorf("%s: status %s, want %s", at, d.Status, args[1])
				}
			case "unresolved":
				var got []string
				if w.lastT != nil {
					for _, id := range w.lastT.UnresolvedObjections {
						got = append(got, w.names[id])
					}
				}
				want := slices.Clone(args[1:])
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("%s: unresolved %v, want %v", at, got, want)
				}
			case "rejection":
				_, _, codes := d.Rejections()
				if codes[args[1]] == 0 {
					t.Errorf("%s: no rejection %s (%v)", at, args[1], codes)
				}
			default:
				t.Fatalf("%s: unknown want %q", at, args[0])
			}
		default:
			t.Fatalf("%s: unknown statement %q", at, cmd)
		}
	}
}

// describe renders emissions as "FAILURE code" / "TERMINATION state".
func describe(es []termination.Emission) []string {
	var out []string
	for _, e := range es {
		switch p := e.Artifact.Payload.(type) {
		case *events.Failure:
			out = append(out, "FAILURE "+p.Code)
		case *events.Termination:
			out = append(out, "TERMINATION "+string(p.State))
		default:
			b, _ := json.Marshal(p)
			out = append(out, string(e.Artifact.Type)+" "+string(b))
		}
	}
	return out
}
