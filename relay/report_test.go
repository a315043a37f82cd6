package relay

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/wire"
)

// svgDoc is the part of Graphviz's SVG the checks read.
type svgDoc struct {
	ViewBox string  `xml:"viewBox,attr"`
	Graph   svgG    `xml:"g"`
	Width   string  `xml:"width,attr"`
	Height  string  `xml:"height,attr"`
	Extra   []svgEl `xml:",any"`
}

type svgG struct {
	ID        string    `xml:"id,attr"`
	Class     string    `xml:"class,attr"`
	Transform string    `xml:"transform,attr"`
	Title     string    `xml:"title"`
	Groups    []svgG    `xml:"g"`
	Polygons  []svgEl   `xml:"polygon"`
	Paths     []svgEl   `xml:"path"`
	Ellipses  []svgEl   `xml:"ellipse"`
	Texts     []svgText `xml:"text"`
	Links     []svgG    `xml:"a"`
}

// flat gathers the shapes and texts of g and of its nested groups and
// links (a tooltip wraps a node's or an edge's shapes in <g><a>).
func (g svgG) flat() svgG {
	out := svgG{ID: g.ID, Class: g.Class, Title: g.Title, Polygons: g.Polygons, Paths: g.Paths, Ellipses: g.Ellipses, Texts: g.Texts}
	for _, c := range append(append([]svgG{}, g.Groups...), g.Links...) {
		f := c.flat()
		out.Polygons = append(out.Polygons, f.Polygons...)
		out.Paths = append(out.Paths, f.Paths...)
		out.Ellipses = append(out.Ellipses, f.Ellipses...)
		out.Texts = append(out.Texts, f.Texts...)
	}
	return out
}

type svgEl struct {
	Fill      string `xml:"fill,attr"`
	Stroke    string `xml:"stroke,attr"`
	Dash      string `xml:"stroke-dasharray,attr"`
	Width     string `xml:"stroke-width,attr"`
	Points    string `xml:"points,attr"`
	D         string `xml:"d,attr"`
	CX        string `xml:"cx,attr"`
	CY        string `xml:"cy,attr"`
	XMLNameEl xml.Name
}

type svgText struct {
	X    float64 `xml:"x,attr"`
	Y    float64 `xml:"y,attr"`
	Text string  `xml:",chardata"`
}

type box struct{ x0, y0, x1, y1 float64 }

var number = regexp.MustCompile(`-?[0-9]+(\.[0-9]+)?`)

func numbers(s string) []float64 {
	var out []float64
	for _, m := range number.FindAllString(s, -1) {
		f, _ := strconv.ParseFloat(m, 64)
		out = append(out, f)
	}
	return out
}

func bbox(ns []float64) box {
	b := box{1e18, 1e18, -1e18, -1e18}
	for i := 0; i+1 < len(ns); i += 2 {
		b.x0, b.x1 = min(b.x0, ns[i]), max(b.x1, ns[i])
		b.y0, b.y1 = min(b.y0, ns[i+1]), max(b.y1, ns[i+1])
	}
	return b
}

func (b box) inside(x, y, margin float64) bool {
	return x > b.x0+margin && x < b.x1-margin && y > b.y0+margin && y < b.y1-margin
}

// bezier samples a Graphviz edge path (M x,y C x1,y1 x2,y2 x3,y3 …).
func bezier(d string) [][2]float64 {
	ns := numbers(d)
	var pts [][2]float64
	if len(ns) < 2 {
		return nil
	}
	p0 := [2]float64{ns[0], ns[1]}
	pts = append(pts, p0)
	for i := 2; i+5 < len(ns); i += 6 {
		p1, p2, p3 := [2]float64{ns[i], ns[i+1]}, [2]float64{ns[i+2], ns[i+3]}, [2]float64{ns[i+4], ns[i+5]}
		for k := 1; k <= 40; k++ {
			t := float64(k) / 40
			u := 1 - t
			x := u*u*u*p0[0] + 3*u*u*t*p1[0] + 3*u*t*t*p2[0] + t*t*t*p3[0]
			y := u*u*u*p0[1] + 3*u*u*t*p1[1] + 3*u*t*t*p2[1] + t*t*t*p3[1]
			pts = append(pts, [2]float64{x, y})
		}
		p0 = p3
	}
	return pts
}

// svgReport is what checkSVG found.
type svgReport struct {
	nodes     map[string]box      // node name -> box
	nodeText  map[string]string   // node name -> its text
	relations map[string][]string // relation -> the styles of its edges
	edges     int
}

// checkSVG parses a DAG picture and checks the layout rules: an opaque
// white background; every edge's line clear of every node but its two
// ends; an arrowhead on every edge; one style per relation, different
// from the others'; text on every node, inside it; the legend inside the
// drawing.
func checkSVG(t *testing.T, svg []byte) svgReport {
	t.Helper()
	var doc svgDoc
	if err := xml.Unmarshal(svg, &doc); err != nil {
		t.Fatalf("the SVG does not parse: %v", err)
	}
	g := doc.Graph
	if len(g.Polygons) == 0 || g.Polygons[0].Fill != "white" {
		t.Errorf("no opaque white background: %+v", g.Polygons)
	}
	canvas := bbox(numbers(g.Polygons[0].Points))
	rep := svgReport{nodes: map[string]box{}, nodeText: map[string]string{}, relations: map[string][]string{}}
	for _, n := range g.Groups {
		if !strings.Contains(n.Class, "node") {
			continue
		}
		n = n.flat()
		var ns []float64
		for _, p := range n.Paths {
			ns = append(ns, numbers(p.D)...)
		}
		for _, p := range n.Polygons {
			ns = append(ns, numbers(p.Points)...)
		}
		b := bbox(ns)
		rep.nodes[n.Title] = b
		var words []string
		for _, tx := range n.Texts {
			words = append(words, strings.TrimSpace(tx.Text))
			if !b.inside(tx.X, tx.Y, 0) {
				t.Errorf("node %s: text %q at %.1f,%.1f outside its box %+v", n.Title, tx.Text, tx.X, tx.Y, b)
			}
		}
		rep.nodeText[n.Title] = strings.Join(words, " ")
		if len(n.Texts) == 0 {
			t.Errorf("node %s has no text", n.Title)
		}
	}
	for _, e := range g.Groups {
		if !strings.Contains(e.Class, "edge") {
			continue
		}
		e = e.flat()
		rep.edges++
		from, to, ok := strings.Cut(e.Title, "->")
		if !ok || len(e.Paths) == 0 {
			t.Fatalf("edge %q: no ends or no line", e.Title)
		}
		if len(e.Polygons)+len(e.Ellipses) == 0 {
			t.Errorf("edge %s has no arrowhead", e.Title)
		}
		for _, p := range bezier(e.Paths[0].D) {
			for name, b := range rep.nodes {
				if name != from && name != to && b.inside(p[0], p[1], 1) {
					t.Errorf("edge %s passes through node %s at %.1f,%.1f", e.Title, name, p[0], p[1])
					break
				}
			}
		}
		rel := ""
		for _, c := range strings.Fields(e.Class) {
			if strings.HasPrefix(c, "rel-") {
				rel = strings.TrimPrefix(c, "rel-")
			}
		}
		if rel == "" {
			t.Errorf("edge %s names no relation", e.Title)
		}
		head := "none"
		if len(e.Polygons) > 0 {
			head = fmt.Sprintf("polygon/%d points/fill %s", len(numbers(e.Polygons[0].Points))/2, e.Polygons[0].Fill)
		}
		rep.relations[rel] = append(rep.relations[rel], fmt.Sprintf("%s|%s|%s|%s", e.Paths[0].Stroke, e.Paths[0].Dash, e.Paths[0].Width, head))
	}
	seen := map[string]string{}
	for rel, styles := range rep.relations {
		for _, s := range styles[1:] {
			if s != styles[0] {
				t.Errorf("relation %s drawn in two styles: %s and %s", rel, styles[0], s)
			}
		}
		color := strings.Split(styles[0], "|")[0]
		if other, ok := seen[color]; ok {
			t.Errorf("relations %s and %s share the colour %s", rel, other, color)
		}
		seen[color] = rel
	}
	// The legend (the graph's label) lies inside the canvas.
	legend := false
	for _, tx := range g.Texts {
		if strings.Contains(tx.Text, "Legend") {
			legend = true
		}
		if !canvas.inside(tx.X, tx.Y, 0) {
			t.Errorf("legend text %q at %.1f,%.1f outside the drawing %+v", tx.Text, tx.X, tx.Y, canvas)
		}
	}
	if !legend {
		t.Error("no legend")
	}
	return rep
}

// A relay run's report and picture, on the twelve-round relay of scripts.
func TestReport_Fleet(t *testing.T) {
	cfg, err := Load("../examples/relay/fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	s, err := Run(ctx, cfg, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	report, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	md := string(report)
	for _, want := range []string{
		"| termination | **completed** (#51, completed:",
		"## The final decision (#50, judge)",
		"> Adopt the read-through cache as revised in round 12.",
		"Its closure verifies",
		// an objection with its statement, its target and its disposition
		"| 12 | critic | #11 | **yes** | Round 3: the effect on the tail latency of the mixed workload is not shown. | **addressed** by #50: ",
		"| 3 | 3 | 1 | architect | CLAIM | A read-through cache in front of the ledger halves p99 latency. |  |",
		"| 5 | 5 | 1 | verifier | EVIDENCE (TRACE_VERIFIED_OBSERVATION) |",
		"supports #3, considers #4",
		"![the deliberation's DAG](dag.svg)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if s.FinalDecisionOrdinal != 50 || s.Dir != dir || len(s.Failures) != 0 {
		t.Errorf("summary %+v", s)
	}
	// Every artifact of the engine's DAG has its row, by ordinal.
	rows := regexp.MustCompile(`(?m)^\| (\d+) \| (\d+) \| `).FindAllStringSubmatch(md[strings.Index(md, "## Artifacts"):], -1)
	if len(rows) != 38 {
		t.Errorf("%d artifact rows, want 38", len(rows))
	}
	svg, err := os.ReadFile(filepath.Join(dir, "dag.svg"))
	if err != nil {
		t.Fatal(err)
	}
	rep := checkSVG(t, svg)
	if len(rep.nodes) != 38 || rep.edges < 37 {
		t.Errorf("%d nodes, %d edges", len(rep.nodes), rep.edges)
	}
	for _, rel := range []string{"supports", "objects-to", "revises", "considers", "decides"} {
		if len(rep.relations[rel]) == 0 {
			t.Errorf("no %s edge", rel)
		}
	}
	if txt := rep.nodeText["a12"]; !strings.Contains(txt, "#12 OBJECTION") || !strings.Contains(txt, "critic") ||
		!strings.Contains(txt, "Round 3: the effect on the tail") || !strings.Contains(txt, "disposed: addressed by #50") {
		t.Errorf("node a12 reads %q", txt)
	}
	if txt := rep.nodeText["a4"]; !strings.Contains(txt, "non-blocking") {
		t.Errorf("node a4 reads %q", txt)
	}
	if txt := rep.nodeText["a51"]; !strings.Contains(txt, "TERMINATION") || !strings.Contains(txt, "supervisor") {
		t.Errorf("node a51 reads %q", txt)
	}
}

// The picture of a deliberation with an open blocking objection, a
// decision that hides it and a run of FAILUREs: the objection is marked
// open, the run is one node, and the layout rules hold.
func TestDAG_OpenBlockingAndFailures(t *testing.T) {
	claim := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The cache halves p99 latency on every workload we run in production today."}})
	obj := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "Only one workload was measured.", Blocking: true},
		References: []events.Reference{{Target: claim.ID, Relation: events.ObjectsTo}}})
	ev := events.MustSeal(events.Draft{Type: events.TypeEvidence, Payload: events.Evidence{Content: "p99 77 ms", ProvenanceClass: "TRACE_VERIFIED_OBSERVATION"},
		References: []events.Reference{{Target: claim.ID, Relation: events.Supports}}})
	rev := events.MustSeal(events.Draft{Type: events.TypeRevision, Payload: events.RevisionPayload{Statement: "Halves p99 on reads."},
		References: []events.Reference{{Target: claim.ID, Relation: events.Revises}}})
	dec := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "Adopt the cache.", Status: events.Final,
		ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: rev.ID, Relation: events.Decides}}})
	rec := &deliberationRecord{byID: map[canon.Digest]int{}, disposed: map[canon.Digest]disposal{}, final: 4,
		view: api.View{OpenBlockingObjections: []canon.Digest{obj.ID}}}
	add := func(ord uint64, part string, a *events.Artifact) {
		rec.byID[a.ID] = len(rec.entries)
		rec.entries = append(rec.entries, entry{Ordinal: ord, Position: ord + 100, Participant: part, A: a})
	}
	add(2, "alice", claim)
	add(3, "bob", obj)
	add(4, "carol", ev)
	add(5, "alice", rev)
	add(6, "alice", dec)
	for i := range 5 {
		f := events.MustSeal(events.Draft{Type: events.TypeFailure, Payload: events.Failure{Code: CodeInvalidOutput, Retryable: true,
			Description: fmt.Sprintf("attempt %d", i)}})
		add(uint64(7+i), "estimator", f)
	}
	sup := events.MustSeal(events.Draft{Type: events.TypeFailure, Payload: events.Failure{Code: "closure.hidden_blocking_objection", Description: "the decision hides #3"},
		References: []events.Reference{{Target: dec.ID, Relation: events.Considers}}})
	add(12, wire.SupervisorToken, sup)
	svg, err := renderSVG(context.Background(), dagDOT(rec))
	if err != nil {
		t.Fatal(err)
	}
	rep := checkSVG(t, svg)
	if txt := rep.nodeText["a3"]; !strings.Contains(txt, "BLOCKING, open") {
		t.Errorf("the open blocking objection reads %q", txt)
	}
	if txt := rep.nodeText["a7"]; !strings.Contains(txt, "#7–#11, 5×") || !strings.Contains(txt, CodeInvalidOutput) {
		t.Errorf("the run of failures reads %q", txt)
	}
	if len(rep.nodes) != 7 { // five artifacts, the run of failures, the supervisor's FAILURE
		t.Errorf("%d nodes: %v", len(rep.nodes), rep.nodeText)
	}
	for _, rel := range []string{"supports", "objects-to", "revises", "considers", "decides"} {
		if len(rep.relations[rel]) != 1 {
			t.Errorf("%s: %v", rel, rep.relations[rel])
		}
	}
	// The report lists every FAILURE, each with its reason.
	md := reportMarkdown(&Summary{Title: "t", Failures: rec.failures()}, rec, "dag.svg")
	for i := range 5 {
		if !strings.Contains(md, fmt.Sprintf("| %d | estimator | `participant.invalid_output` | attempt %d |", 7+i, i)) {
			t.Errorf("report.md lacks failure %d:\n%s", i, md)
		}
	}
	if !strings.Contains(md, "| 12 | _supervisor | `closure.hidden_blocking_objection` | the decision hides #3 |") ||
		!strings.Contains(md, "| 3 | bob | #2 | **yes** | Only one workload was measured. | **open** (blocking) |") {
		t.Errorf("report.md:\n%s", md)
	}
}

// A participant whose command cannot run: each attempt's raw answer is
// empty, and its cause (the exit status and standard error) is kept
// beside it and in the FAILURE.
func TestRun_InvalidOutputCause(t *testing.T) {
	dir := t.TempDir()
	cfg := map[string]any{"title": "broken exec", "rounds": 1, "strict": true, "max_retries": 1,
		"participants": []any{map[string]any{"id": "broken", "adapter": "exec", "command": []string{"sh", "-c", "echo the model server is down >&2; exit 3"}}}}
	b, _ := json.Marshal(cfg)
	os.WriteFile(filepath.Join(dir, "relay.json"), b, 0o644)
	c, err := Load(filepath.Join(dir, "relay.json"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := filepath.Join(dir, "run")
	s, err := Run(ctx, c, Options{Dir: run})
	if err != nil {
		t.Fatal(err)
	}
	if s.FailedClosed == "" || s.InvalidOutputs != 2 || len(s.Failures) != 2 {
		t.Fatalf("summary %+v", s)
	}
	for i := 1; i <= 2; i++ {
		base := filepath.Join(run, "invalid", fmt.Sprintf("round-01-broken-attempt-%d", i))
		raw, err := os.ReadFile(base + ".txt")
		if err != nil || len(raw) != 0 {
			t.Errorf("raw answer %d: %v %q", i, err, raw)
		}
		cause, err := os.ReadFile(base + ".cause.txt")
		if err != nil || !strings.Contains(string(cause), "exit status 3") || !strings.Contains(string(cause), "the model server is down") {
			t.Errorf("cause %d: %v %q", i, err, cause)
		}
		if !strings.Contains(s.Failures[i-1].Reason, "exit status 3: the model server is down") {
			t.Errorf("failure %d: %+v", i, s.Failures[i-1])
		}
	}
	out := FormatSummary(s)
	if !strings.Contains(out, "run directory   "+run) || !strings.Contains(out, "failures        2") || strings.Contains(out, "map[") {
		t.Errorf("summary block:\n%s", out)
	}
}

// benchRecord is a deliberation of n rounds like the twelve-round
// example's: a revision, an objection to it (every third blocking,
// disposed of by the decision), evidence for it.
func benchRecord(rounds int) *deliberationRecord {
	rec := &deliberationRecord{byID: map[canon.Digest]int{}, disposed: map[canon.Digest]disposal{}, final: -1}
	add := func(part string, a *events.Artifact) {
		rec.byID[a.ID] = len(rec.entries)
		rec.entries = append(rec.entries, entry{Ordinal: uint64(len(rec.entries) + 2), Participant: part, A: a})
	}
	prev := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "A read-through cache in front of the ledger halves p99 latency."}})
	add("architect", prev)
	var disp []events.Disposition
	for r := 1; r <= rounds; r++ {
		if r > 1 {
			rev := events.MustSeal(events.Draft{Type: events.TypeRevision, Payload: events.RevisionPayload{Statement: fmt.Sprintf("Revision %d: the cache, revised once more.", r)},
				References: []events.Reference{{Target: prev.ID, Relation: events.Revises}}})
			add("architect", rev)
			prev = rev
		}
		obj := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: fmt.Sprintf("Round %d: the tail latency is not shown.", r), Blocking: r%3 == 0},
			References: []events.Reference{{Target: prev.ID, Relation: events.ObjectsTo}}})
		add("critic", obj)
		if r%3 == 0 {
			disp = append(disp, events.Disposition{Objection: obj.ID, Disposition: events.Addressed, Rationale: "measured"})
		}
		ev := events.MustSeal(events.Draft{Type: events.TypeEvidence, Payload: events.Evidence{Content: fmt.Sprintf("Round %d: p99 %d ms.", r, 80-r%40), ProvenanceClass: "TRACE_VERIFIED_OBSERVATION"},
			References: []events.Reference{{Target: prev.ID, Relation: events.Supports}, {Target: obj.ID, Relation: events.Considers}}})
		add("verifier", ev)
	}
	dec := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "Adopt it.", Status: events.Final, ObjectionDispositions: disp, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: prev.ID, Relation: events.Decides}}})
	add("judge", dec)
	rec.final = len(rec.entries) - 1
	for _, d := range disp {
		rec.disposed[d.Objection] = disposal{d, rec.final}
	}
	return rec
}

// BenchmarkDAG lays out and renders the picture of deliberations of 37,
// 151, 601 and 1000 artifacts (12, 50, 200 and 333 rounds: the last is
// the most the relay draws, maxPicture).
func BenchmarkDAG(b *testing.B) {
	for _, rounds := range []int{12, 50, 200, 333} {
		rec := benchRecord(rounds)
		b.Run(fmt.Sprintf("artifacts=%d", len(rec.entries)), func(b *testing.B) {
			dot := dagDOT(rec)
			if _, err := renderSVG(context.Background(), dot); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := renderSVG(context.Background(), dagDOT(rec)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The layout rules hold on a larger deliberation too.
func TestDAG_Larger(t *testing.T) {
	rec := benchRecord(50)
	svg, err := renderSVG(context.Background(), dagDOT(rec))
	if err != nil {
		t.Fatal(err)
	}
	rep := checkSVG(t, svg)
	if len(rep.nodes) != len(rec.entries) {
		t.Errorf("%d nodes for %d artifacts", len(rep.nodes), len(rec.entries))
	}
}
