package termination_test

import (
	"os"
	"strings"
	"testing"

	"github.com/parley-engine/parley/audit"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/termination"
)

// docs/ERRORS.md lists every code of the projector, the closure verifier
// and the supervisor in a table row.
func TestErrorsDoc(t *testing.T) {
	b, err := os.ReadFile("../docs/ERRORS.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, list := range [][]string{projector.Codes, closure.Codes, termination.Codes, audit.Codes} {
		for _, c := range list {
			if !strings.Contains(doc, "| `"+c+"` |") {
				t.Errorf("docs/ERRORS.md does not list %s", c)
			}
		}
	}
}
