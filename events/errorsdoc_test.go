package events_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
)

var update = flag.Bool("update", false, "rewrite the generated tables of docs/ERRORS.md")

// docs/ERRORS.md lists every code of canon and events. The tables between
// the markers are generated from Codes; go test ./events -run ErrorsDoc
// -update rewrites them.
func TestErrorsDoc(t *testing.T) {
	const path = "../docs/ERRORS.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	var rows strings.Builder
	rows.WriteString("| code | class | meaning |\n| --- | --- | --- |\n")
	for _, e := range canon.Codes {
		rows.WriteString("| `" + e.Code + "` | `" + string(e.Class) + "` | " + e.Msg + " |\n")
	}
	doc = replaceBetween(t, doc, "<!-- canon codes -->", "<!-- end canon codes -->", rows.String())
	rows.Reset()
	rows.WriteString("| code | class | meaning |\n| --- | --- | --- |\n")
	for _, e := range events.Codes {
		rows.WriteString("| `" + e.Code + "` | `" + e.Class + "` | " + strings.ReplaceAll(e.Msg, "|", "\\|") + " |\n")
	}
	doc = replaceBetween(t, doc, "<!-- events codes -->", "<!-- end events codes -->", rows.String())
	if *update {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if doc != string(b) {
		t.Errorf("%s is out of date with the codes; run go test ./events -run ErrorsDoc -update", path)
	}
}

func replaceBetween(t *testing.T, doc, start, end, body string) string {
	t.Helper()
	i, j := strings.Index(doc, start), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("markers %s ... %s not found", start, end)
	}
	return doc[:i+len(start)] + "\n" + body + doc[j:]
}
