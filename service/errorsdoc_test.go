package service_test

import (
	"os"
	"strings"
	"testing"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/internal/httplimit"
	"github.com/parley-engine/parley/metrics"
	"github.com/parley-engine/parley/web"
)

// The codes of the HTTP API's bounds and read-your-writes are listed in
// docs/ERRORS.md.
func TestErrorsDoc_Bounds(t *testing.T) {
	b, err := os.ReadFile("../docs/ERRORS.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{httplimit.CodeConnections, web.CodeLiveFeeds, api.CodeReadBudget, api.CodeBehind, metrics.CodeInFlightBytes, metrics.CodeKeptBytes, metrics.CodeMemoryLimit, metrics.CodeConsumers} {
		if !strings.Contains(string(b), "| `"+code+"` |") {
			t.Errorf("docs/ERRORS.md does not list %s", code)
		}
	}
}
