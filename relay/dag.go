package relay

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"regexp"
	"strings"
	"sync"

	"github.com/goccy/go-graphviz"

	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/wire"
)

// The picture of a deliberation's DAG is laid out by Graphviz's layered
// dot layout (github.com/goccy/go-graphviz: Graphviz compiled to
// WebAssembly, run in process, no program to install): older artifacts
// above, every reference an arrow from the referring artifact to the one
// it references, routed around the other nodes; one colour, line style
// and arrowhead per relation; each node carries its ordinal, type,
// participant and text; objections are marked blocking or not, open or
// disposed (and how); the legend is part of the drawing, on an opaque
// white background.

// typeColor is each artifact type's colour (border and legend), typeFill
// its node's background.
var typeColor = map[events.Type]string{
	events.TypeClaim: "#4c78a8", events.TypeEvidence: "#54a24b", events.TypeObjection: "#e45756", events.TypeRevision: "#f58518",
	events.TypeDecision: "#2a7f7a", events.TypeFailure: "#9d755d", events.TypeTermination: "#59504e",
}

var typeFill = map[events.Type]string{
	events.TypeClaim: "#e3ebf5", events.TypeEvidence: "#e4f2e2", events.TypeObjection: "#fbe3e3", events.TypeRevision: "#fdebd8",
	events.TypeDecision: "#dcefee", events.TypeFailure: "#efe6e0", events.TypeTermination: "#e6e3e2",
}

// relationStyle is how a relation's arrows are drawn.
type relationStyle struct {
	color, style, arrowhead, about string
	penwidth                       float64
}

// relationStyles are the relations' styles, all different from one
// another in colour and in line style or arrowhead.
var relationStyles = map[events.Relation]relationStyle{
	events.Supports:   {"#2e7d32", "solid", "normal", "solid green line, filled arrow", 1.4},
	events.ObjectsTo:  {"#c62828", "bold", "vee", "bold red line, open V arrow", 2},
	events.Revises:    {"#e65100", "dashed", "onormal", "dashed orange line, hollow arrow", 1.4},
	events.Supersedes: {"#6a1b9a", "dashed", "box", "dashed purple line, square head", 1.4},
	events.Considers:  {"#616161", "dotted", "odiamond", "dotted grey line, hollow diamond", 1.4},
	events.Decides:    {"#1565c0", "bold", "diamond", "bold blue line, filled diamond", 2},
}

var relationOrder = []events.Relation{events.Supports, events.ObjectsTo, events.Revises, events.Supersedes, events.Considers, events.Decides}

var typeOrder = []events.Type{events.TypeClaim, events.TypeEvidence, events.TypeObjection, events.TypeRevision,
	events.TypeDecision, events.TypeFailure, events.TypeTermination}

// dagNode is one node of the picture: an artifact, or a run of FAILUREs
// alike (same participant and code, nothing referencing them) drawn as
// one, so that a run that failed a hundred times stays readable (the
// report lists every one).
type dagNode struct {
	name  string
	first int // index of the (first) entry
	count int
	last  int // index of the last entry of a run
}

func nodeName(ordinal uint64) string { return fmt.Sprintf("a%d", ordinal) }

// dagDOT writes the record as a Graphviz graph.
func dagDOT(rec *deliberationRecord) string {
	referenced := map[int]bool{}
	for _, e := range rec.entries {
		for _, r := range e.A.References {
			if j, ok := rec.byID[r.Target]; ok {
				referenced[j] = true
			}
		}
	}
	var nodes []dagNode
	nodeOf := map[int]string{}
	for i, e := range rec.entries {
		if e.A.Type == events.TypeFailure && len(e.A.References) == 0 && !referenced[i] && len(nodes) > 0 {
			p := &nodes[len(nodes)-1]
			prev := rec.entries[p.last]
			if prev.A.Type == events.TypeFailure && len(prev.A.References) == 0 && !referenced[p.last] && prev.Participant == e.Participant &&
				prev.A.Payload.(*events.Failure).Code == e.A.Payload.(*events.Failure).Code {
				p.count++
				p.last = i
				nodeOf[i] = p.name
				continue
			}
		}
		n := dagNode{name: nodeName(e.Ordinal), first: i, count: 1, last: i}
		nodeOf[i] = n.name
		nodes = append(nodes, n)
	}

	var b strings.Builder
	b.WriteString("digraph deliberation {\n")
	b.WriteString(`  graph [rankdir=BT, bgcolor="white", pad="0.3", nodesep="0.35", ranksep="0.45", fontname="Helvetica", fontsize=11, labelloc=b, labeljust=l];` + "\n")
	b.WriteString(`  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10, margin="0.08,0.05", penwidth=1.4];` + "\n")
	b.WriteString(`  edge [fontname="Helvetica", fontsize=9, arrowsize=0.8];` + "\n")
	fmt.Fprintf(&b, "  label=<%s>;\n", legend(rec))
	for _, n := range nodes {
		b.WriteString("  " + nodeDOT(rec, n) + "\n")
	}
	for i, e := range rec.entries {
		for _, r := range e.A.References {
			j, ok := rec.byID[r.Target]
			if !ok {
				continue
			}
			st, ok := relationStyles[r.Relation]
			if !ok {
				st = relationStyle{"#000000", "solid", "normal", "", 1}
			}
			fmt.Fprintf(&b, "  %s -> %s [class=%q, color=%q, style=%q, arrowhead=%q, penwidth=%.1f, tooltip=%q];\n",
				nodeOf[i], nodeOf[j], "rel-"+string(r.Relation), st.color, st.style, st.arrowhead, st.penwidth,
				fmt.Sprintf("#%d %s #%d", e.Ordinal, r.Relation, rec.entries[j].Ordinal))
		}
	}
	b.WriteString("}\n")
	return b.String()
}

// esc escapes text for an HTML-like label: its markup, Graphviz's
// escapes (\N, \G, \L... would be replaced by names, even written as
// entities: a word joiner after the backslash keeps them as they are
// written), and the control characters XML has no place for, which are
// shown as escapes.
func esc(s string) string {
	return gvEscapes.ReplaceAllString(html.EscapeString(inert(s, false)), "\\\u2060$1")
}

var gvEscapes = regexp.MustCompile(`\\([GNEHTLlnr])`)

func nodeDOT(rec *deliberationRecord, n dagNode) string {
	e := rec.entries[n.first]
	a := e.A
	color, fill, pen := typeColor[a.Type], typeFill[a.Type], 1.4
	style := "rounded,filled"
	var rows []string
	head := fmt.Sprintf("#%d", e.Ordinal)
	if n.count > 1 {
		head = fmt.Sprintf("#%d–#%d, %d×", e.Ordinal, rec.entries[n.last].Ordinal, n.count)
	}
	who := e.Participant
	if who == wire.SupervisorToken {
		who = "supervisor"
	}
	rows = append(rows, fmt.Sprintf(`<B>%s %s</B>  <FONT COLOR="#444444">%s</FONT>`, esc(head), a.Type, esc(who)))
	text := a.Text()
	if n.count > 1 {
		text = a.Payload.(*events.Failure).Code + " (the report lists each one)"
	}
	var lines []string
	for _, l := range wrap(text, 34, 4) {
		lines = append(lines, esc(l))
	}
	if len(lines) > 0 {
		rows = append(rows, strings.Join(lines, `<BR ALIGN="LEFT"/>`)+`<BR ALIGN="LEFT"/>`)
	}
	if a.Type == events.TypeObjection {
		blocking := a.Blocking()
		d, disposed := rec.disposed[a.ID]
		switch {
		case disposed && d.Disposition.Disposition.Public():
			rows = append(rows, fmt.Sprintf(`<FONT COLOR="#2e7d32"><B>✓ disposed: %s by %s</B></FONT>`, esc(string(d.Disposition.Disposition)),
				esc(fmt.Sprintf("#%d", rec.entries[d.decision].Ordinal))))
			style = "rounded,filled,dashed"
			fill = "#eef5ec"
		case rec.openBlocking(a.ID):
			rows = append(rows, `<FONT COLOR="#b71c1c"><B>■ BLOCKING, open</B></FONT>`)
			pen = 3.2
			color = "#b71c1c"
		case disposed:
			rows = append(rows, fmt.Sprintf(`<FONT COLOR="#8d6e00"><B>%s by #%d</B></FONT>`, esc(string(d.Disposition.Disposition)), rec.entries[d.decision].Ordinal))
		case blocking:
			rows = append(rows, `<FONT COLOR="#b71c1c"><B>■ BLOCKING</B></FONT>`)
			pen = 2.4
		default:
			rows = append(rows, `<FONT COLOR="#666666">non-blocking</FONT>`)
		}
		if blocking {
			pen = max(pen, 2.4)
		}
	}
	if a.Type == events.TypeDecision {
		if q := qualifier(a); q != "" {
			rows = append(rows, `<FONT COLOR="#444444">`+esc(q)+`</FONT>`)
		}
	}
	var t strings.Builder
	t.WriteString(`<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="1">`)
	for _, r := range rows {
		t.WriteString(`<TR><TD ALIGN="LEFT" BALIGN="LEFT">` + r + `</TD></TR>`)
	}
	t.WriteString(`</TABLE>`)
	tooltip := fmt.Sprintf("#%d %s by %s, %s", e.Ordinal, a.Type, e.Participant, a.ID)
	return fmt.Sprintf("%s [label=<%s>, color=%q, fillcolor=%q, style=%q, penwidth=%.1f, class=%q, tooltip=%q];",
		n.name, t.String(), color, fill, style, pen, "type-"+strings.ToLower(string(a.Type)), tooltip)
}

// legend is the graph's label: the types present with their colours, every
// relation present with its style, and the objection marks.
func legend(rec *deliberationRecord) string {
	types := map[events.Type]bool{}
	rels := map[events.Relation]bool{}
	objections := false
	for _, e := range rec.entries {
		types[e.A.Type] = true
		objections = objections || e.A.Type == events.TypeObjection
		for _, r := range e.A.References {
			rels[r.Relation] = true
		}
	}
	var b strings.Builder
	b.WriteString(`<TABLE BORDER="1" COLOR="#999999" CELLBORDER="0" CELLSPACING="1" CELLPADDING="2" BGCOLOR="white">`)
	b.WriteString(`<TR><TD ALIGN="LEFT" BALIGN="LEFT" COLSPAN="2"><B>Legend</B><BR/>#N: the message's ordinal in the deliberation<BR/>an arrow points from an artifact to what it<BR/>references</TD></TR>`)
	for _, t := range typeOrder {
		if types[t] {
			fmt.Fprintf(&b, `<TR><TD BGCOLOR="%s" WIDTH="28" HEIGHT="12"> </TD><TD ALIGN="LEFT">%s</TD></TR>`, typeColor[t], t)
		}
	}
	for _, r := range relationOrder {
		if rels[r] {
			st := relationStyles[r]
			fmt.Fprintf(&b, `<TR><TD ALIGN="LEFT"><FONT COLOR="%s"><B>--&gt;</B></FONT></TD><TD ALIGN="LEFT"><FONT COLOR="%s"><B>%s</B></FONT>: %s</TD></TR>`, st.color, st.color, r, esc(st.about))
		}
	}
	if objections {
		b.WriteString(`<TR><TD><FONT COLOR="#b71c1c"><B>■</B></FONT></TD><TD ALIGN="LEFT">blocking objection (a thick border while still open at the end)</TD></TR>`)
		b.WriteString(`<TR><TD><FONT COLOR="#2e7d32"><B>✓</B></FONT></TD><TD ALIGN="LEFT">objection disposed of by a decision (dashed border), and how</TD></TR>`)
	}
	b.WriteString(`</TABLE>`)
	return b.String()
}

// graphviz is started once per process: it compiles Graphviz's
// WebAssembly module.
var (
	gvOnce sync.Once
	gv     *graphviz.Graphviz
	gvErr  error
	gvMu   sync.Mutex // a Graphviz instance renders one graph at a time
)

// renderSVG lays out and renders a DOT graph as SVG.
func renderSVG(ctx context.Context, dot string) ([]byte, error) {
	gvOnce.Do(func() { gv, gvErr = graphviz.New(context.Background()) })
	if gvErr != nil {
		return nil, fmt.Errorf("relay: graphviz: %w", gvErr)
	}
	gvMu.Lock()
	defer gvMu.Unlock()
	g, err := graphviz.ParseBytes([]byte(dot))
	if err != nil {
		return nil, fmt.Errorf("relay: graphviz: parse the DAG: %w", err)
	}
	defer g.Close()
	var buf bytes.Buffer
	if err := gv.Render(ctx, g, graphviz.SVG, &buf); err != nil {
		return nil, fmt.Errorf("relay: graphviz: render the DAG: %w", err)
	}
	return buf.Bytes(), nil
}
