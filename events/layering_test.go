package events_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The pure cores import no NATS package, nor anything that does IO on the
// network (STYLE.md, layering): canon <- events.
func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/parley-engine/parley/canon", "github.com/parley-engine/parley/events").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list gave %d packages", len(deps))
	}
	for _, d := range deps {
		for _, banned := range []string{"nats-io", "net/http", "github.com/parley-engine/parley/projector", "github.com/parley-engine/parley/closure"} {
			if strings.Contains(d, banned) {
				t.Errorf("canon/events depend on %s", d)
			}
		}
	}
	out, err = exec.Command("go", "list", "-deps", "github.com/parley-engine/parley/canon").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "parley/events") {
		t.Error("canon imports events")
	}
}
