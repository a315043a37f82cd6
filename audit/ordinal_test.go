package audit_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/parley-engine/parley/audit"
	"github.com/parley-engine/parley/recording"
)

// A deliberation recorded from a used engine, whose stream holds other
// deliberations' messages between its own: the report names each message
// by its ordinal within the deliberation, the same as on a fresh engine,
// and the JSON carries the stream position beside it.
func TestAudit_UsedEngineNamesOrdinals(t *testing.T) {
	b, err := os.ReadFile("testdata/twelve-round.stream.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	r, err := recording.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, _ := recording.NewWriter(&out, recording.Stream, r.Header().Deliberation)
	for {
		m, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		m.Position = 1000 + 3*m.Position // two other messages before each
		if err := w.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err = recording.NewReader(&out)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Run(r)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Decisions) != 1 {
		t.Fatalf("%s", rep.Text())
	}
	d := rep.Decisions[0]
	if d.Ordinal != 50 || d.Position != 1000+3*50 {
		t.Errorf("decision at position %d, #%d; want %d, #50", d.Position, d.Ordinal, 1000+3*50)
	}
	text := rep.Text()
	if !strings.Contains(text, "decision     #50 "+d.ID) || strings.Contains(text, "1150") {
		t.Errorf("the report does not name the decision #50:\n%s", text)
	}
	j, _ := json.Marshal(rep)
	if !strings.Contains(string(j), `"position":1150,"ordinal":50`) {
		t.Errorf("JSON lacks position and ordinal: %s", j)
	}
}
