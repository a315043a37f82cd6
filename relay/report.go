package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/wire"
)

// FailureLine is one FAILURE of the record: the relay's (a participant's
// invalid output) or the supervisor's (a breached limit, a decision that
// does not verify).
type FailureLine struct {
	Ordinal     uint64 `json:"ordinal"`
	Participant string `json:"participant"`
	Code        string `json:"code"`
	Reason      string `json:"reason"`
}

// Resolved is one binding moment the principal resolved: the question,
// the kind of resolution and what was chosen or answered.
type Resolved struct {
	Question   string `json:"question"`
	Resolution string `json:"resolution"`
	// Chosen is the option's label (option), the principal's own words
	// (answer), or empty (question, declined).
	Chosen  string `json:"chosen,omitempty"`
	Ordinal uint64 `json:"ordinal,omitempty"` // of the principal's artifact
}

// mdCell escapes text for a Markdown table cell: on one line, with no
// cell boundary, raw HTML, link, image or code span of its own.
func mdCell(s string) string {
	return mdText(strings.Join(strings.Fields(s), " "))
}

// mdText escapes text for Markdown: backslashes (so that none escapes
// the escape of the next character), the table's pipes, the angle
// brackets of raw HTML and autolinks, the brackets of links and images,
// and backticks.
var mdText = strings.NewReplacer(`\`, `\\`, "|", `\|`, "<", "&lt;", ">", "&gt;", "[", `\[`, "]", `\]`, "`", "\\`").Replace

// mdCode is a code (a FAILURE's, which its author chooses) as a code
// span in a table cell; one that carries a backslash, which a code span
// would show doubled, as escaped text instead.
func mdCode(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if strings.Contains(s, `\`) {
		return mdText(s)
	}
	return "`" + strings.NewReplacer("|", `\|`, "`", "'").Replace(s) + "`"
}

// maxPicture is the most artifacts dag.svg is drawn for.
const maxPicture = 1000

// writeReport writes the run directory's files: summary.json, report.md,
// record.jsonl (the relay's accepted artifacts), dag.dot and dag.svg.
func writeReport(ctx context.Context, dir string, s *Summary, record []ContextArtifact, rec *deliberationRecord) error {
	var recBytes []byte
	for _, c := range record {
		recBytes = append(append(recBytes, c.Artifact...), '\n')
	}
	if err := os.WriteFile(filepath.Join(dir, "record.jsonl"), recBytes, 0o640); err != nil {
		return err
	}
	dot := dagDOT(rec)
	if err := os.WriteFile(filepath.Join(dir, "dag.dot"), []byte(dot), 0o640); err != nil {
		return err
	}
	picture := "dag.svg"
	var svg []byte
	var err error
	if len(rec.entries) > maxPicture {
		// dot's layout grows faster than the graph: past this size the
		// picture would take minutes and be unreadable anyway.
		picture = ""
		s.Notes = append(s.Notes, fmt.Sprintf("no DAG picture: %d artifacts, more than the %d it is drawn for (dag.dot has the graph)", len(rec.entries), maxPicture))
	} else if svg, err = renderSVG(ctx, dot); err != nil {
		// The report stands without its picture; say why in it.
		picture = ""
		s.Notes = append(s.Notes, "no DAG picture: "+err.Error())
	} else if err := os.WriteFile(filepath.Join(dir, "dag.svg"), svg, 0o640); err != nil {
		return err
	}
	sb, _ := json.MarshalIndent(s, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), sb, 0o640); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(reportMarkdown(s, rec, picture)), 0o640)
}

func reportMarkdown(s *Summary, rec *deliberationRecord, picture string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", s.Title)
	closure := "not verified"
	if s.ClosureOK {
		closure = "verified"
	}
	row := func(k, v string) { fmt.Fprintf(&b, "| %s | %s |\n", k, v) }
	b.WriteString("| | |\n| --- | --- |\n")
	row("deliberation", "`"+s.Deliberation+"`")
	if s.Explorer != "" {
		row("explorer", "<"+s.Explorer+">")
	}
	term := "**" + s.Termination + "**"
	for _, e := range rec.entries {
		if e.A.Type == events.TypeTermination && e.Participant == wire.SupervisorToken {
			term += fmt.Sprintf(" (#%d, %s)", e.Ordinal, mdCell(e.A.Text()))
		}
	}
	row("termination", term)
	if s.FailedClosed != "" {
		row("failed closed", mdCell(s.FailedClosed))
	}
	row("rounds", fmt.Sprint(s.Rounds))
	if rec.final >= 0 {
		f := rec.entries[rec.final]
		row("final decision", fmt.Sprintf("#%d by %s: %s (closure **%s**)", f.Ordinal, f.Participant, mdCell(clip(f.A.Text(), 200)), closure))
	} else {
		row("final decision", "none")
	}
	row("artifacts", countsLine(s.Counts))
	row("objections", fmt.Sprintf("%d raised, %d disposed of by the final decision, %d blocking still open", s.ObjectionsRaised, s.ObjectionsDisposed, len(rec.view.OpenBlockingObjections)))
	row("failures", fmt.Sprint(len(s.Failures)))
	row("invalid outputs", fmt.Sprintf("%d (raw answers and their causes in `invalid/`)", s.InvalidOutputs))
	row("rejections", fmt.Sprint(rec.view.Rejections))
	row("usage", fmt.Sprintf("%d tokens, %d micro-USD, model latency %d ms", s.Tokens, s.CostUSDMicros, s.LatencyMS))
	row("state_digest", "`"+s.StateDigest+"`")
	b.WriteString("\n")
	for _, n := range s.Notes {
		fmt.Fprintf(&b, "> %s\n\n", n)
	}

	if rec.final >= 0 {
		f := rec.entries[rec.final]
		d := f.A.DecisionPayload()
		fmt.Fprintf(&b, "## The final decision (#%d, %s)\n\n%s\n\n", f.Ordinal, f.Participant, mdQuote(d.Outcome))
		if len(s.Findings) > 0 {
			b.WriteString("Its closure does not verify:\n\n")
			for _, x := range s.Findings {
				fmt.Fprintf(&b, "- %s on %s: %s\n", mdCode(x.Code), rec.ref(mustDigest(x.ArtifactID)), mdCell(x.Message))
			}
			b.WriteString("\n")
		} else if s.ClosureOK {
			b.WriteString("Its closure verifies: every blocking objection against what it rests on is disposed of publicly.\n\n")
		}
		if len(d.UnresolvedIssues) > 0 {
			b.WriteString("Unresolved issues:\n\n")
			for _, u := range d.UnresolvedIssues {
				fmt.Fprintf(&b, "- %s\n", mdCell(u.Description))
			}
			b.WriteString("\n")
		}
	} else if len(s.Findings) > 0 {
		b.WriteString("## Closure findings\n\n")
		for _, x := range s.Findings {
			fmt.Fprintf(&b, "- %s on %s: %s\n", mdCode(x.Code), rec.ref(mustDigest(x.ArtifactID)), mdCell(x.Message))
		}
		b.WriteString("\n")
	}

	// Objections and their dispositions.
	var objections []entry
	for _, e := range rec.entries {
		if e.A.Type == events.TypeObjection {
			objections = append(objections, e)
		}
	}
	if len(objections) > 0 {
		b.WriteString("## Objections\n\n| # | by | objects to | blocking | statement | disposition |\n| --- | --- | --- | --- | --- | --- |\n")
		for _, e := range objections {
			var to []string
			for _, r := range e.A.References {
				if r.Relation == events.ObjectsTo {
					to = append(to, rec.ref(r.Target))
				}
			}
			blocking := "no"
			if e.A.Blocking() {
				blocking = "**yes**"
			}
			disp := "none"
			if d, ok := rec.disposed[e.A.ID]; ok {
				disp = fmt.Sprintf("**%s** by #%d", d.Disposition.Disposition, rec.entries[d.decision].Ordinal)
				if d.Rationale != "" {
					disp += ": " + mdCell(clip(d.Rationale, 160))
				}
			} else if rec.openBlocking(e.A.ID) {
				disp = "**open** (blocking)"
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s |\n", e.Ordinal, e.Participant, strings.Join(to, ", "), blocking, mdCell(clip(e.A.Text(), 200)), disp)
		}
		b.WriteString("\n")
	}

	if len(s.Binding) > 0 {
		b.WriteString("## Binding moments\n\n| # | question | resolution | chosen or answered |\n| --- | --- | --- | --- |\n")
		for _, r := range s.Binding {
			fmt.Fprintf(&b, "| %d | %s | %s | %s |\n", r.Ordinal, mdCell(r.Question), r.Resolution, mdCell(r.Chosen))
		}
		b.WriteString("\n")
	}

	if len(s.Failures) > 0 {
		fmt.Fprintf(&b, "## Failures (%d)\n\n| # | participant | code | reason |\n| --- | --- | --- | --- |\n", len(s.Failures))
		for _, f := range s.Failures {
			fmt.Fprintf(&b, "| %d | %s | %s | %s |\n", f.Ordinal, f.Participant, mdCode(f.Code), mdCell(f.Reason))
		}
		b.WriteString("\n")
	}

	if picture != "" {
		fmt.Fprintf(&b, "## The DAG\n\n![the deliberation's DAG](%s)\n\n", picture)
	}

	b.WriteString("## Artifacts\n\n| # | position | round | participant | type | text | references |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, e := range rec.entries {
		var refs []string
		for _, r := range e.A.References {
			refs = append(refs, fmt.Sprintf("%s %s", r.Relation, rec.ref(r.Target)))
		}
		typ := string(e.A.Type)
		if q := qualifier(e.A); q != "" {
			typ += " (" + mdCell(q) + ")"
		}
		round := ""
		if raw, ok := e.A.Extensions["parley.round"]; ok {
			round = mdCell(string(raw))
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %s | %s | %s | %s |\n", e.Ordinal, e.Position, round, e.Participant, typ,
			mdCell(clip(e.A.Text(), 240)), strings.Join(refs, ", "))
	}
	b.WriteString("\n")

	if len(rec.rejections) > 0 {
		b.WriteString("## Rejected messages\n\n| # | position | participant | code | message |\n| --- | --- | --- | --- | --- |\n")
		for _, r := range rec.rejections {
			fmt.Fprintf(&b, "| %d | %d | %s | %s | %s |\n", r.Ordinal, r.Position, r.Participant, mdCode(r.Code), mdCell(clip(r.Message, 200)))
		}
		b.WriteString("\n")
	}
	b.WriteString("`#` is the message's ordinal within the deliberation (1 for its open), the same whatever else the engine's stream holds: `relay fork --at N` takes it. `position` is its stream position in this engine.\n")
	return b.String()
}

// mdQuote quotes text as a Markdown block quote.
func mdQuote(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = "> " + mdText(l)
	}
	return strings.Join(lines, "\n")
}

func mustDigest(s string) canon.Digest {
	d, _ := canon.ParseDigest(s)
	return d
}

// countsLine writes counts by type in the protocol's order.
func countsLine(counts map[events.Type]int) string {
	total := 0
	var parts []string
	for _, t := range typeOrder {
		if n := counts[t]; n > 0 {
			total += n
			parts = append(parts, fmt.Sprintf("%d %s", n, t))
		}
	}
	if total == 0 {
		return "0"
	}
	return fmt.Sprintf("%d: %s", total, strings.Join(parts, ", "))
}

// failures lists every FAILURE of the record.
func (r *deliberationRecord) failures() []FailureLine {
	var out []FailureLine
	for _, e := range r.entries {
		if f, ok := e.A.Payload.(*events.Failure); ok {
			out = append(out, FailureLine{Ordinal: e.Ordinal, Participant: e.Participant, Code: f.Code, Reason: f.Description})
		}
	}
	return out
}

// resolutions lists the binding moments the principal resolved, with what
// was chosen or answered.
func (r *deliberationRecord) resolutions(principal string) []Resolved {
	var out []Resolved
	for _, e := range r.entries {
		if e.Participant != principal {
			continue
		}
		rr, ok := binding.ResolutionOf(e.A)
		if !ok {
			continue
		}
		res := Resolved{Resolution: string(rr.Resolution), Ordinal: e.Ordinal}
		var env *binding.Envelope
		for _, x := range r.entries {
			if en, err := binding.EnvelopeOf(x.A); err == nil && en.Digest.String() == rr.EnvelopeDigest {
				env = en
			}
		}
		if env != nil {
			res.Question = env.Question.Stem
		}
		res.Chosen = chosen(e.A, rr, env)
		out = append(out, res)
	}
	return out
}

// chosen is what a resolution chose or answered: the option's label, or
// the principal's words.
func chosen(a *events.Artifact, rr binding.ResolutionRecord, env *binding.Envelope) string {
	switch rr.Resolution {
	case binding.KindOption:
		if env != nil && rr.OptionIdx != nil && *rr.OptionIdx >= 0 && *rr.OptionIdx < len(env.Question.Options) {
			return fmt.Sprintf("option %d: %s", *rr.OptionIdx+1, env.Question.Options[*rr.OptionIdx].Label)
		}
		return a.Text()
	case binding.KindAnswer:
		return a.Text()
	}
	return ""
}

// FormatSummary is the summary of a run as a block for people, naming the
// run directory; participants' words in it are inert on a terminal.
func FormatSummary(s *Summary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", s.Title)
	line := func(k, format string, a ...any) { fmt.Fprintf(&b, "  %-16s"+format+"\n", append([]any{k}, a...)...) }
	if s.Dir != "" {
		files := "report.md, dag.svg, summary.json, record.jsonl"
		if s.Recording != "" {
			files += ", keys.json, recording.jsonl, engine.pub, receipts/"
		}
		line("run directory", "%s (%s)", s.Dir, files)
	}
	line("deliberation", "%s", s.Deliberation)
	if s.Explorer != "" {
		line("explorer", "%s", s.Explorer)
	}
	line("termination", "%s", s.Termination)
	if s.FailedClosed != "" {
		line("failed closed", "%s", s.FailedClosed)
	}
	line("rounds", "%d", s.Rounds)
	line("artifacts", "%s", countsLine(s.Counts))
	if len(s.Participants) > 0 {
		names := make([]string, 0, len(s.Participants))
		for k := range s.Participants {
			names = append(names, k)
		}
		slices.Sort(names)
		parts := make([]string, len(names))
		for i, k := range names {
			parts[i] = fmt.Sprintf("%s %d", k, s.Participants[k])
		}
		line("participants", "%s", strings.Join(parts, ", "))
	}
	line("objections", "%d raised, %d disposed of by the final decision", s.ObjectionsRaised, s.ObjectionsDisposed)
	switch {
	case s.FinalDecision == "":
		line("final decision", "none")
	case s.ClosureOK:
		line("final decision", "#%d %s, closure verified", s.FinalDecisionOrdinal, s.FinalDecision)
	default:
		line("final decision", "#%d %s, closure NOT verified (%d findings)", s.FinalDecisionOrdinal, s.FinalDecision, len(s.Findings))
	}
	for _, r := range s.Binding {
		line("principal", "%s: %s", r.Resolution, clip(r.Chosen, 100))
	}
	line("invalid output", "%d", s.InvalidOutputs)
	if len(s.Failures) > 0 {
		line("failures", "%d (each with its reason in report.md)", len(s.Failures))
		for i, f := range s.Failures {
			if i == 3 {
				line("", "…")
				break
			}
			line("", "#%d %s %s: %s", f.Ordinal, f.Participant, f.Code, clip(f.Reason, 100))
		}
	}
	line("tokens", "%d (cost %d micro-USD, model latency %d ms)", s.Tokens, s.CostUSDMicros, s.LatencyMS)
	line("state_digest", "%s", s.StateDigest)
	for _, n := range s.Notes {
		line("note", "%s", n)
	}
	return inert(b.String(), true)
}
