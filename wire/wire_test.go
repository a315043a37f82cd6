package wire_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/parley-engine/parley/wire"
)

// deps lists the packages pkg links, by go list.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// wire depends on the standard library only, and a participant built on
// package client (or archive, for export and import) links neither the
// engine nor the NATS server, nor the engine's metrics and pages; the
// client reads the API's types from api, and links no fold (projector).
func TestLayering_ParticipantsLinkNoServer(t *testing.T) {
	if got := deps(t, "github.com/parley-engine/parley/wire"); len(got) != 1 {
		t.Fatalf("wire links %v", got)
	}
	for _, pkg := range []string{"github.com/parley-engine/parley/client", "github.com/parley-engine/parley/archive"} {
		for _, d := range deps(t, pkg) {
			for _, banned := range []string{"github.com/nats-io/nats-server", "github.com/parley-engine/parley/service",
				"github.com/parley-engine/parley/embedded", "github.com/prometheus/", "github.com/parley-engine/parley/mcpserver"} {
				if strings.HasPrefix(d, banned) {
					t.Errorf("%s links %s", pkg, d)
				}
			}
			if pkg == "github.com/parley-engine/parley/client" && d == "github.com/parley-engine/parley/projector" {
				t.Errorf("client links the fold, %s", d)
			}
		}
	}
}

func TestParse(t *testing.T) {
	const d = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	for _, tc := range []struct{ subject, delib, kind, participant string }{
		{wire.ArtifactSubject(d, "alice"), d, "art", "alice"},
		{wire.ControlSubject(d), d, "ctl", ""},
		{wire.BindingSubject(d), "", "", ""},
		{"parley." + d + ".art.a.b", "", "", ""},
		{"parley." + d + ".art.", "", "", ""},
		{"other." + d + ".ctl", "", "", ""},
		{"parley", "", "", ""},
	} {
		delib, kind, p := wire.Parse(tc.subject)
		if delib != tc.delib || kind != tc.kind || p != tc.participant {
			t.Errorf("Parse(%q) = %q %q %q", tc.subject, delib, kind, p)
		}
		if got := wire.DeliberationOf(tc.subject); got != tc.delib {
			t.Errorf("DeliberationOf(%q) = %q", tc.subject, got)
		}
	}
	for tok, ok := range map[string]bool{"alice": true, "a-b_c9": true, "_supervisor": false, "-x": false, "": false, strings.Repeat("a", 65): false, "a.b": false} {
		if wire.ValidToken(tok) != ok {
			t.Errorf("ValidToken(%q) != %v", tok, ok)
		}
	}
}
