package relay

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
)

// entry is one artifact of the deliberation's DAG as the report shows it:
// its ordinal within the deliberation (what a person reads), its stream
// position, who published it.
type entry struct {
	Ordinal, Position uint64
	Participant       string
	A                 *events.Artifact
}

// disposal is what a decision did with an objection.
type disposal struct {
	events.Disposition
	decision int // the deciding entry's index
}

// deliberationRecord is the whole DAG of a deliberation as the engine
// holds it (the relay's artifacts, its FAILUREs, the supervisor's, the
// principal's), with its rejections and final state: what the report and
// the picture are drawn from.
type deliberationRecord struct {
	entries    []entry
	byID       map[canon.Digest]int
	rejections []api.Rejection
	view       api.View
	// disposed maps each objection to its disposition by the latest
	// decision that disposes of it; final is the final decision's index
	// (-1 when none).
	disposed map[canon.Digest]disposal
	final    int
}

// fetchRecord reads a deliberation's artifacts (their ordinals and
// canonical bytes) and kept rejections from the engine.
func fetchRecord(ctx context.Context, c *client.Client, id string, v api.View, final string) (*deliberationRecord, error) {
	rec := &deliberationRecord{byID: map[canon.Digest]int{}, view: v, disposed: map[canon.Digest]disposal{}, final: -1}
	for e, err := range c.Artifacts(ctx, id, client.ListOptions{}) {
		if err != nil {
			return nil, fmt.Errorf("relay: read the deliberation's artifacts: %w", err)
		}
		b, found, err := c.Artifact(ctx, id, e.ArtifactID.String())
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		a, err := events.Validate(b)
		if err != nil {
			return nil, fmt.Errorf("relay: artifact %s of the engine: %w", e.ArtifactID, err)
		}
		rec.byID[a.ID] = len(rec.entries)
		rec.entries = append(rec.entries, entry{Ordinal: e.Ordinal, Position: e.Position, Participant: e.Participant, A: a})
	}
	for r, err := range c.Rejections(ctx, id, client.ListOptions{}) {
		if err != nil {
			return nil, fmt.Errorf("relay: read the deliberation's rejections: %w", err)
		}
		rec.rejections = append(rec.rejections, r)
	}
	for i, e := range rec.entries {
		if e.A.Type != events.TypeDecision {
			continue
		}
		for _, d := range e.A.DecisionPayload().ObjectionDispositions {
			rec.disposed[d.Objection] = disposal{d, i}
		}
		if e.A.ID.String() == final {
			rec.final = i
		}
	}
	return rec, nil
}

// ordinalOf returns the ordinal of artifact id in the record (0 unknown).
func (r *deliberationRecord) ordinalOf(id canon.Digest) uint64 {
	if i, ok := r.byID[id]; ok {
		return r.entries[i].Ordinal
	}
	return 0
}

// ref names an artifact for people: #ordinal and a short id.
func (r *deliberationRecord) ref(id canon.Digest) string {
	if o := r.ordinalOf(id); o > 0 {
		return fmt.Sprintf("#%d", o)
	}
	return shortID(id)
}

// openBlocking reports whether an objection is blocking and still open at
// the end.
func (r *deliberationRecord) openBlocking(id canon.Digest) bool {
	for _, o := range r.view.OpenBlockingObjections {
		if o == id {
			return true
		}
	}
	return false
}

// shortID is the first 8 hex digits of an artifact id.
func shortID(id canon.Digest) string {
	s := strings.TrimPrefix(id.String(), "sha256:")
	if len(s) > 8 {
		s = s[:8]
	}
	return s
}

// qualifier is the short note beside an artifact's type: an objection's
// blocking, a decision's status, evidence's provenance class.
func qualifier(a *events.Artifact) string {
	switch p := a.Payload.(type) {
	case *events.Objection:
		if p.Blocking {
			return "blocking"
		}
		return "non-blocking"
	case *events.Decision:
		s := string(p.Status)
		if _, err := binding.EnvelopeOf(a); err == nil {
			s += ", asks the principal"
		}
		return s
	case *events.Evidence:
		return string(p.ProvenanceClass)
	case *events.Failure:
		if p.Retryable {
			return "retryable"
		}
	}
	return ""
}

// clip shortens s to at most n runes on one line, with an ellipsis.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n-1])) + "…"
}

// wrap breaks s into lines of at most width runes, at spaces (a longer
// word is cut), keeping at most max lines: the last one ends in an
// ellipsis when the text was cut.
func wrap(s string, width, max int) []string {
	var lines []string
	line := ""
	// Past max lines the rest is not looked at (a statement can be a
	// megabyte without a space).
	for w := range strings.FieldsSeq(s) {
		if len(lines) > max {
			break
		}
		for len(lines) <= max && utf8.RuneCountInString(w) > width {
			if line != "" {
				lines, line = append(lines, line), ""
			}
			cut := 0
			for range width {
				_, n := utf8.DecodeRuneInString(w[cut:])
				cut += n
			}
			lines, w = append(lines, w[:cut]), w[cut:]
		}
		switch {
		case line == "":
			line = w
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) <= width:
			line += " " + w
		default:
			lines, line = append(lines, line), w
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	if len(lines) > max {
		last := []rune(lines[max-1])
		if len(last) >= width {
			last = last[:width-1]
		}
		lines = append(lines[:max-1], string(last)+"…")
	}
	return lines
}
