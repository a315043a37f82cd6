package relay

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// humanParticipant asks a person on the terminal: it shows the turn's
// context and asks for the artifact type, the text, and for a reference to
// the last artifact shown. Its input and output can be redirected (tests).
type humanParticipant struct {
	mu  sync.Mutex
	in  *bufio.Reader
	out io.Writer
}

func newHuman(ParticipantConfig) *humanParticipant { return NewHuman(os.Stdin, os.Stderr) }

// NewHuman returns a human participant that reads answers from in and
// writes its questions to out.
func NewHuman(in io.Reader, out io.Writer) *humanParticipant {
	return &humanParticipant{in: bufio.NewReader(in), out: out}
}

func (h *humanParticipant) ask(prompt string) (string, error) {
	fmt.Fprint(h.out, prompt)
	line, err := h.in.ReadString('\n')
	if err != nil && line == "" {
		return "", fmt.Errorf("relay: human: %w", err)
	}
	return strings.TrimSpace(line), nil
}

func (h *humanParticipant) Take(_ context.Context, t Turn) (Response, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(h.out, "\n== round %d, %s (%s)\n%s\n", t.Round, t.Participant, t.Role, inert(t.Question, true))
	var last string
	for _, c := range t.Context {
		var a struct {
			ID      string         `json:"artifact_id"`
			Type    string         `json:"artifact_type"`
			Payload map[string]any `json:"payload"`
		}
		json.Unmarshal(c.Artifact, &a)
		// what other participants wrote, on one line, inert
		fmt.Fprintln(h.out, inert(fmt.Sprintf("  [%s] %s by %s: %v", a.ID[:19], a.Type, c.Participant, a.Payload), false))
		last = a.ID
	}
	typ := "DECISION"
	if !t.Final {
		var err error
		if typ, err = h.ask("artifact type (CLAIM, EVIDENCE, OBJECTION, REVISION): "); err != nil {
			return Response{}, err
		}
		typ = strings.ToUpper(typ)
	}
	text, err := h.ask("text: ")
	if err != nil {
		return Response{}, err
	}
	d := map[string]any{"artifact_type": typ, "references": []any{}}
	rel := ""
	switch typ {
	case "CLAIM":
		d["payload"] = map[string]any{"statement": text}
	case "EVIDENCE":
		d["payload"] = map[string]any{"content": text, "provenance_class": "EXTERNAL_EVIDENCE"}
		rel = "supports"
	case "OBJECTION":
		b, _ := h.ask("blocking (y/n): ")
		d["payload"] = map[string]any{"statement": text, "blocking": strings.HasPrefix(strings.ToLower(b), "y")}
		rel = "objects-to"
	case "REVISION":
		d["payload"] = map[string]any{"statement": text}
		rel = "revises"
	case "DECISION":
		d["payload"] = map[string]any{"outcome": text, "status": "final", "objection_dispositions": []any{}, "unresolved_issues": []any{}}
		rel = "decides"
	}
	if rel != "" && last != "" {
		d["references"] = []any{map[string]any{"artifact_id": last, "relation": rel}}
	}
	out, _ := json.Marshal(d)
	return Response{Output: out, Model: map[string]any{"provider": "human"}}, nil
}
