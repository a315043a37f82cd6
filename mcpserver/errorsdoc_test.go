package mcpserver_test

import (
	"os"
	"strings"
	"testing"

	"github.com/parley-engine/parley/mcpserver"
)

// docs/ERRORS.md lists the server's outcomes and codes.
func TestErrorsDoc(t *testing.T) {
	b, err := os.ReadFile("../docs/ERRORS.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, c := range []string{mcpserver.OutcomeOK, mcpserver.OutcomeRefused, mcpserver.OutcomeError,
		mcpserver.CodeParticipantMismatch, mcpserver.CodeInvalidArgument, mcpserver.CodeNoAnswer, mcpserver.CodeNotResolved, mcpserver.CodeNotPrincipal} {
		if !strings.Contains(doc, "| `"+c+"` |") {
			t.Errorf("docs/ERRORS.md does not list %s", c)
		}
	}
}
