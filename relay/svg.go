package relay

import (
	"encoding/json"
	"fmt"
	"html"
	"strings"
)

var typeColor = map[string]string{
	"CLAIM": "#4c78a8", "EVIDENCE": "#54a24b", "OBJECTION": "#e45756", "REVISION": "#f58518",
	"DECISION": "#72b7b2", "FAILURE": "#9d755d", "TERMINATION": "#79706e",
}

// dagSVG draws the record: one lane per participant, artifacts left to
// right in stream order, a line for every reference.
func dagSVG(record []ContextArtifact) string {
	type node struct {
		id, typ, part string
		x, y          int
		refs          []string
	}
	lanes := map[string]int{}
	var order []string
	var nodes []node
	at := map[string]int{}
	for i, c := range record {
		var a struct {
			ID   string `json:"artifact_id"`
			Type string `json:"artifact_type"`
			Refs []struct {
				ID string `json:"artifact_id"`
			} `json:"references"`
		}
		json.Unmarshal(c.Artifact, &a)
		if _, ok := lanes[c.Participant]; !ok {
			lanes[c.Participant] = len(order)
			order = append(order, c.Participant)
		}
		n := node{id: a.ID, typ: a.Type, part: c.Participant, x: 140 + 36*i, y: 40 + 60*lanes[c.Participant]}
		for _, r := range a.Refs {
			n.refs = append(n.refs, r.ID)
		}
		at[a.ID] = len(nodes)
		nodes = append(nodes, n)
	}
	w, h := 180+36*len(nodes), 60+60*len(order)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	for p, i := range lanes {
		fmt.Fprintf(&b, `<text x="8" y="%d">%s</text>`+"\n", 44+60*i, html.EscapeString(p))
	}
	for _, n := range nodes {
		for _, r := range n.refs {
			if j, ok := at[r]; ok {
				t := nodes[j]
				fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#bbb"/>`+"\n", n.x, n.y, t.x, t.y)
			}
		}
	}
	for _, n := range nodes {
		fmt.Fprintf(&b, `<circle cx="%d" cy="%d" r="9" fill="%s"><title>%s %s</title></circle>`+"\n", n.x, n.y, typeColor[n.typ], n.typ, html.EscapeString(n.id))
	}
	x := 140
	for _, t := range []string{"CLAIM", "EVIDENCE", "OBJECTION", "REVISION", "DECISION"} {
		fmt.Fprintf(&b, `<circle cx="%d" cy="%d" r="6" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", x, h-14, typeColor[t], x+10, h-10, t)
		x += 110
	}
	b.WriteString("</svg>\n")
	return b.String()
}
