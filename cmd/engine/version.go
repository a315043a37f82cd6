package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/buildinfo"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise the module's build information says which build this is
// (package buildinfo).
var version = ""

// engineVersion is the version the engine reports (its micro service, the
// MCP server, engine version): the module version, or the VCS revision of
// a development build, never a bare "(devel)".
func engineVersion() string { return buildinfo.Read(version).Short() }

func runVersion(_ context.Context, e *env, args []string) int {
	var asJSON bool
	fs := newFlags(e, "version", "[--json]", `Prints the engine version, the Go version, the Unicode version of the NFC
tables (artifact ids of newly assigned characters depend on it) and the
protocol version. The engine version is the module's (a binary built with
go install …@VERSION), else the VCS revision and its time that go build
stamps in the repository ("-dirty" with local changes); go run and go test
stamp neither, and it says so.`)
	fs.BoolVar(&asJSON, "json", false, "print a JSON object")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	bi := buildinfo.Read(version)
	info := struct {
		Engine       string `json:"engine"`
		Revision     string `json:"revision,omitempty"`
		RevisionTime string `json:"revision_time,omitempty"`
		Modified     bool   `json:"modified,omitempty"`
		Go           string `json:"go"`
		Unicode      string `json:"unicode"`
		Protocol     string `json:"protocol"`
	}{bi.Short(), bi.Revision, bi.Time, bi.Modified, runtime.Version(), canon.UnicodeVersion, events.ProtocolVersion}
	if asJSON {
		b, _ := json.Marshal(info)
		fmt.Fprintf(e.stdout, "%s\n", b)
		return exitOK
	}
	fmt.Fprintf(e.stdout, "engine    %s\ngo        %s\nunicode   %s (NFC tables)\nprotocol  %s\n", bi.String(), info.Go, info.Unicode, info.Protocol)
	return exitOK
}
