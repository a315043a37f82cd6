package witness_test

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/parley-engine/parley/witness"
)

// docs/ERRORS.md lists exactly the codes a witness refuses a checkpoint
// with.
func TestErrorsDoc_WitnessCodes(t *testing.T) {
	b, err := os.ReadFile("../docs/ERRORS.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(witness\\.[a-z_]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		documented = append(documented, m[1])
	}
	want := slices.Sorted(slices.Values(witness.Codes))
	if slices.Sort(documented); !slices.Equal(documented, want) {
		t.Fatalf("docs/ERRORS.md lists %v, the code %v", documented, want)
	}
}
