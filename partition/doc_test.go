package partition_test

import (
	"os"
	"strings"
	"testing"

	"github.com/parley-engine/parley/lease"
	"github.com/parley-engine/parley/partition"
)

// docs/ERRORS.md lists every code of partition and lease in a table row.
func TestErrorsDoc_Codes(t *testing.T) {
	b, err := os.ReadFile("../docs/ERRORS.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range append(append([]string{}, partition.Codes...), lease.Codes...) {
		if !strings.Contains(string(b), "| `"+c+"` |") {
			t.Errorf("docs/ERRORS.md does not list %s", c)
		}
	}
}

// docs/SCALING.md shows the mapping block the code makes, at the top
// level and inside an account.
func TestScalingDoc_ShowsTheMapping(t *testing.T) {
	b, err := os.ReadFile("../docs/SCALING.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, indent := range []string{"", "    "} {
		if !strings.Contains(doc, partition.MappingBlock(indent)) {
			t.Errorf("docs/SCALING.md does not show the mapping block indented by %q:\n%s", indent, partition.MappingBlock(indent))
		}
	}
	for _, s := range []string{partition.ParticipantPermission("<token>"), partition.ControlPermission, partition.Refused} {
		if !strings.Contains(doc, "`"+s+"`") {
			t.Errorf("docs/SCALING.md does not name %s", s)
		}
	}
}
