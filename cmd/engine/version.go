package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise the module version from the build information is used.
var version = ""

func engineVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

func runVersion(_ context.Context, e *env, args []string) int {
	var asJSON bool
	fs := newFlags(e, "version", "[--json]", "Prints the engine version, the Go version, the Unicode version of the NFC\ntables (artifact ids of newly assigned characters depend on it) and the\nprotocol version.")
	fs.BoolVar(&asJSON, "json", false, "print a JSON object")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	info := struct {
		Engine   string `json:"engine"`
		Go       string `json:"go"`
		Unicode  string `json:"unicode"`
		Protocol string `json:"protocol"`
	}{engineVersion(), runtime.Version(), canon.UnicodeVersion, events.ProtocolVersion}
	if asJSON {
		b, _ := json.Marshal(info)
		fmt.Fprintf(e.stdout, "%s\n", b)
		return exitOK
	}
	fmt.Fprintf(e.stdout, "engine    %s\ngo        %s\nunicode   %s (NFC tables)\nprotocol  %s\n", info.Engine, info.Go, info.Unicode, info.Protocol)
	return exitOK
}
