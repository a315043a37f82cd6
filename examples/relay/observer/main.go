// Command observer is an exec participant of the relay examples that
// grounds its EVIDENCE in substrates a relying party can observe (seed
// 003): it reads the p99 line of a measurement file under its root and
// answers with EVIDENCE supporting the first CLAIM it is shown, annotated
// with the file read (substrate.code.read) and a grep for the line
// (substrate.grep), both observed now. An engine with a provenance root
// over the same directory re-verifies them.
//
// Usage: observer ROOT FILE (the command line of an exec participant).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/substrate"
)

type turn struct {
	Context []struct {
		Artifact struct {
			ID   string `json:"artifact_id"`
			Type string `json:"artifact_type"`
		} `json:"artifact"`
	} `json:"context"`
}

func main() {
	if len(os.Args) != 3 {
		fail("usage: observer ROOT FILE")
	}
	root, file := os.Args[1], os.Args[2]
	var t turn
	if err := json.NewDecoder(os.Stdin).Decode(&t); err != nil {
		fail("the turn is not JSON: %v", err)
	}
	claim := ""
	for _, c := range t.Context {
		if c.Artifact.Type == "CLAIM" {
			claim = c.Artifact.ID
			break
		}
	}
	if claim == "" {
		fail("no CLAIM to support")
	}
	// The line to report, and where it is.
	f, err := os.Open(filepath.Join(root, file))
	if err != nil {
		fail("%v", err)
	}
	line, n := "", 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
		if strings.HasPrefix(sc.Text(), "p99 ") {
			line = sc.Text()
			break
		}
	}
	f.Close()
	if line == "" {
		fail("%s has no p99 line", file)
	}
	rv, err := substrate.NewReverifier(root)
	if err != nil {
		fail("%v", err)
	}
	defer rv.Close()
	now := time.Now().UTC().Truncate(time.Second)
	assertion := fmt.Sprintf("%s reports %s on the mixed workload", file, line)
	var anns []provenance.Annotation
	for _, o := range []struct {
		class string
		loc   provenance.Locator
	}{
		{provenance.CodeRead, provenance.Locator{Path: file, Offset: n, Limit: 1}},
		{provenance.Grep, provenance.Locator{Path: file, Pattern: "^p99 "}},
	} {
		id, err := rv.Observe(o.class, o.loc)
		if err != nil {
			fail("observe %s: %v", o.class, err)
		}
		anns = append(anns, provenance.Annotation{Assertion: assertion, Class: o.class, ObservationID: id, TS: &now, Locator: &o.loc})
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{
		"artifact_type": "EVIDENCE",
		"payload":       map[string]any{"content": assertion + ".", "provenance_class": "TRACE_VERIFIED_OBSERVATION"},
		"references":    []map[string]string{{"artifact_id": claim, "relation": "supports"}},
		"provenance":    provenance.Set{Vocabulary: provenance.Vocabulary, Annotations: anns},
	})
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "observer: "+format+"\n", a...)
	os.Exit(1)
}
