package relay

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
)

// hostileRecord is a deliberation whose participants wrote to break the
// report and the picture: table boundaries, raw HTML, links and images,
// code spans, a backslash before a pipe, Graphviz and XML markup, control
// characters, a FAILURE code of their own and an extension value, and a
// statement of a megabyte without a space.
func hostileRecord(t *testing.T) *deliberationRecord {
	t.Helper()
	texts := []string{
		"closes | the | table |\n| 9 | forged | row |",
		`<script>window.__pwned=1</script><img src=x onerror="alert(1)">`,
		"[click](javascript:alert(1)) ![pixel](https://tracker.example/p.png) <https://evil.example>",
		"a backslash \\| before a pipe, `code | span`",
		`</TD></TR></TABLE>> ]]></svg><svg onload=alert(1)> & &amp; &#60; "quotes' \N \G \L`,
		"controls \x01\x1b[2J\x7f and \u202e bidi",
	}
	claim := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: texts[0]},
		Extensions: map[string]any{"parley.round": "1 | <b>x</b> [y](z)"}})
	obj := events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: texts[1], Blocking: true},
		References: []events.Reference{{Target: claim.ID, Relation: events.ObjectsTo}}})
	ev := events.MustSeal(events.Draft{Type: events.TypeEvidence, Payload: events.Evidence{Content: texts[2], ProvenanceClass: "TRACE_VERIFIED_OBSERVATION"},
		References: []events.Reference{{Target: claim.ID, Relation: events.Supports}}})
	rev := events.MustSeal(events.Draft{Type: events.TypeRevision, Payload: events.RevisionPayload{Statement: texts[3]},
		References: []events.Reference{{Target: claim.ID, Relation: events.Revises}}})
	long := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: strings.Repeat("x", 1<<20-1024)}})
	fail := events.MustSeal(events.Draft{Type: events.TypeFailure, Payload: events.Failure{Code: "code|`with`<b>|", Description: texts[5]}})
	dec := events.MustSeal(events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: texts[4] + "\n\n# not a heading\n<img src=x onerror=alert(1)>",
		Status: events.Final, UnresolvedIssues: []events.Issue{{Description: texts[1]}},
		ObjectionDispositions: []events.Disposition{{Objection: obj.ID, Disposition: events.Addressed, Rationale: texts[0] + texts[2]}}},
		References: []events.Reference{{Target: rev.ID, Relation: events.Decides}, {Target: obj.ID, Relation: events.Considers}}})
	rec := &deliberationRecord{byID: map[canon.Digest]int{}, disposed: map[canon.Digest]disposal{}, final: -1}
	add := func(ord uint64, part string, a *events.Artifact) {
		rec.byID[a.ID] = len(rec.entries)
		rec.entries = append(rec.entries, entry{Ordinal: ord, Position: ord, Participant: part, A: a})
	}
	add(2, "mallory", claim)
	add(3, "mallory", obj)
	add(4, "mallory", ev)
	add(5, "mallory", rev)
	add(6, "mallory", long)
	add(7, "mallory", fail)
	add(8, "mallory", dec)
	rec.final = 6
	rec.disposed[obj.ID] = disposal{decision: 6, Disposition: dec.Payload.(*events.Decision).ObjectionDispositions[0]}
	rec.view = api.View{}
	return rec
}

// unescaped matches a character that Markdown would read as markup: one
// not preceded by an odd number of backslashes.
func unescaped(s string, c byte) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] != c {
			continue
		}
		bs := 0
		for j := i - 1; j >= 0 && s[j] == '\\'; j-- {
			bs++
		}
		if bs%2 == 0 {
			n++
		}
	}
	return n
}

func TestReport_HostileText(t *testing.T) {
	rec := hostileRecord(t)
	md := reportMarkdown(&Summary{Title: "hostile", Failures: rec.failures()}, rec, "dag.svg")
	// Every table keeps its columns: each row has as many cell
	// boundaries as its header.
	cols := 0
	for _, l := range strings.Split(md, "\n") {
		if !strings.HasPrefix(l, "|") {
			cols = 0
			continue
		}
		n := unescaped(l, '|')
		if cols == 0 {
			cols = n
		} else if n != cols {
			t.Errorf("a row with %d cell boundaries in a table of %d: %q", n, cols, l)
		}
	}
	// No raw HTML, no link or image but the DAG's, no code span but the
	// report's own codes.
	for _, l := range strings.Split(md, "\n") {
		// (a code span shows what it holds as it is)
		l = regexp.MustCompile("`[^`]*`").ReplaceAllString(strings.TrimPrefix(l, ">"), "")
		if strings.ContainsAny(l, "<>") {
			t.Errorf("raw angle bracket: %q", l)
		}
	}
	if n := unescaped(md, '['); n != 1 || !strings.Contains(md, "![the deliberation's DAG](dag.svg)") {
		t.Errorf("%d unescaped [ (want only the DAG's image):\n%s", n, md)
	}
	if regexp.MustCompile("(?m)^#+ not a heading").MatchString(md) {
		t.Error("the decision's outcome made a heading of its own")
	}
	for _, want := range []string{
		`closes \| the \| table \| \| 9 \| forged \| row \|`,
		`&lt;script&gt;window.__pwned=1&lt;/script&gt;&lt;img src=x onerror="alert(1)"&gt;`,
		`\[click\](javascript:alert(1)) !\[pixel\](https://tracker.example/p.png) &lt;https://evil.example&gt;`,
		"a backslash \\\\\\| before a pipe, \\`code \\| span\\`",
		"| 7 | mallory | `code\\|'with'<b>\\|` | controls \x01\x1b\\[2J\x7f and \u202e bidi |",
		"| 2 | 2 | \"1 \\| &lt;b&gt;x&lt;/b&gt; \\[y\\](z)\" | mallory | CLAIM |",
		"> # not a heading",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}

	// The picture: well-formed XML, no element or event handler of the
	// participants', their words as text; the megabyte statement cut.
	start := time.Now()
	dot := dagDOT(rec)
	if len(dot) > 64<<10 {
		t.Errorf("dag.dot is %d bytes for seven artifacts", len(dot))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svg, err := renderSVG(ctx, dot)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dag.dot %d bytes, dag.svg %d bytes in %v", len(dot), len(svg), time.Since(start))
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var text strings.Builder
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("dag.svg is not well-formed XML: %v", err)
		}
		switch x := tok.(type) {
		case xml.StartElement:
			switch x.Name.Local {
			case "svg", "g", "title", "polygon", "path", "ellipse", "text", "a", "defs", "style", "polyline":
			default:
				t.Errorf("an element <%s> in dag.svg", x.Name.Local)
			}
			for _, a := range x.Attr {
				if strings.HasPrefix(strings.ToLower(a.Name.Local), "on") {
					t.Errorf("an event handler %s=%q in dag.svg", a.Name.Local, a.Value)
				}
			}
		case xml.CharData:
			text.Write(x)
			text.WriteByte(' ')
		}
	}
	// (a word joiner keeps a backslash from starting a Graphviz escape)
	words := strings.ReplaceAll(strings.Join(strings.Fields(text.String()), " "), "\u2060", "")
	for _, want := range []string{"<script>window.__pwned=1</script>", "]]></svg><svg", `& &amp; &#60; "quotes'`, `"quotes' \N \G \L`, `controls \x01\x1b[2J\x7f and \u202e bidi`} {
		if !strings.Contains(strings.ReplaceAll(words, " ", ""), strings.ReplaceAll(want, " ", "")) {
			t.Errorf("dag.svg's text lacks %q:\n%s", want, words)
		}
	}
}

// The summary printed on the terminal, the progress lines and what a
// human participant is shown carry participants' words inert.
func TestTerminal_HostileText(t *testing.T) {
	rec := hostileRecord(t)
	out := FormatSummary(&Summary{Title: "hostile", FinalDecision: "adopt \x1b]52;c;cm0K\x07 it", FinalDecisionOrdinal: 8, Failures: rec.failures(),
		Binding: []Resolved{{Resolution: "answered", Chosen: "yes\r\x1b[2Kno \u202eright"}}})
	var progress bytes.Buffer
	r := &runner{opts: Options{Progress: &progress}}
	r.progress("round %2d  %-12s invalid output (attempt %d): %s", 1, "mallory", 1, "line\rover \x1b[2J")
	var human bytes.Buffer
	a := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "shown \x1b[8m hidden\n== round 9, fake"}})
	h := NewHuman(strings.NewReader("CLAIM\nok\n"), &human)
	if _, err := h.Take(context.Background(), Turn{Round: 2, Participant: "alice", Question: "q \x07", Context: []ContextArtifact{{Participant: "mallory", Artifact: a.Canonical}}}); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{"summary": out, "progress": progress.String(), "human": human.String()} {
		for _, r := range s {
			if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r < 0xa0) || (r >= 0x202a && r <= 0x202e) {
				t.Errorf("the %s carries %U: %q", name, r, s)
				break
			}
		}
	}
	for _, want := range []string{`adopt \x1b]52;c;cm0K\x07 it`, `yes \x1b[2Kno \u202eright`, `controls \x01\x1b[2J\x7f and \u202e bidi`} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(progress.String(), `line\x0dover \x1b[2J`+"\n") || !strings.Contains(human.String(), `shown \x1b[8m hidden\x0a== round 9, fake`) {
		t.Errorf("progress %q, human %q", progress.String(), human.String())
	}
}
