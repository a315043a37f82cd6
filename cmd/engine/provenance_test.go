package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/gittest"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/substrate"
)

// engine provenance observe and check, as a user would run them: a file
// read and a git commit, admitted at k = 2; the file changes and the same
// annotations are not; every input form; bad input.
func TestRun_Provenance(t *testing.T) {
	root := t.TempDir()
	head := gittest.Changelog(t, root)
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(s), 0o644)
		return p
	}
	code, readID, errOut := run(t, "", "provenance", "observe", "--root", root, "--path", "CHANGELOG.md", "--offset", "3", "--limit", "2", "substrate.code.read")
	readID = strings.TrimSpace(readID)
	if code != 0 || !strings.HasPrefix(readID, "sha256:") {
		t.Fatalf("observe: %d %q %q", code, readID, errOut)
	}
	code, gitJSON, errOut := run(t, "", "provenance", "observe", "--json", "--root", root, "--ref", "main", "--path", "CHANGELOG.md", "--pattern", "2026-05-25", "substrate.git.log")
	var gitAnn provenance.Annotation
	if err := json.Unmarshal([]byte(gitJSON), &gitAnn); code != 0 || err != nil || gitAnn.ObservationID != head || gitAnn.TS == nil || gitAnn.Locator.Ref != "main" {
		t.Fatalf("observe --json: %d %q %q", code, gitJSON, errOut)
	}
	at := time.Now().UTC().Format(time.RFC3339)
	ts := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	set := `{"vocabulary":"1.0","annotations":[
	  {"assertion":"CHANGELOG.md has an entry dated 2026-05-25","substrate_class":"substrate.code.read","observation_id":"` + readID + `","ts":"` + ts + `","locator":{"path":"CHANGELOG.md","offset":3,"limit":2}},
	  {"assertion":"CHANGELOG.md has an entry dated 2026-05-25","substrate_class":"substrate.git.log","observation_id":"` + head + `","ts":"` + ts + `","locator":{"ref":"main","path":"CHANGELOG.md","pattern":"2026-05-25"}}]}`
	setFile := write("set.json", set)
	// The same annotations on an EVIDENCE artifact.
	var ext any
	json.Unmarshal([]byte(set), &ext)
	art := events.MustSeal(events.Draft{Type: events.TypeEvidence, Payload: events.Evidence{Content: "c", ProvenanceClass: events.TraceVerifiedObservation},
		References: []events.Reference{{Target: events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "s"}}).ID, Relation: events.Supports}},
		Extensions: map[string]any{provenance.Extension: ext}})
	artFile := write("evidence.json", string(art.Canonical))
	inline := write("inline.txt", "CHANGELOG.md has an entry dated 2026-05-25. [substrate.code.read; observation-id="+readID+"; ts="+ts+"; path=CHANGELOG.md; offset=3; limit=2]\n")
	structured := write("structured.json", `{"assertion":"x","provenance":{"substrate_class":"substrate.grep","ts":"`+ts+`"}}`)

	type report struct {
		Assertions []provenance.Verdict `json:"assertions"`
		Roots      []string             `json:"roots"`
		Reverif    *substrate.Stats     `json:"reverifications"`
	}
	check := func(args ...string) (int, report, string) {
		t.Helper()
		code, out, errOut := run(t, "", append([]string{"provenance", "check", "--json", "--at", at}, args...)...)
		var r report
		if code != 2 {
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("%v: %q %q", args, out, errOut)
			}
		}
		return code, r, errOut
	}
	for _, f := range []string{setFile, artFile} {
		code, r, _ := check("--root", root, f)
		if code != 0 || len(r.Assertions) != 1 || !r.Assertions[0].Admitted || len(r.Assertions[0].Counted) != 2 || r.Reverif.Verified != 2 {
			t.Fatalf("%s: %d %+v", f, code, r)
		}
	}
	// Without a root nothing is re-verified: admitted at k = 2 on the
	// annotations alone, and not at k = 3.
	if code, r, _ := check(setFile); code != 0 || r.Reverif != nil || len(r.Roots) != 0 {
		t.Fatalf("%d %+v", code, r)
	}
	if code, r, _ := check("--k", "3", setFile); code != 1 || r.Assertions[0].Reasons[0].Code != provenance.CodeNotReverified {
		t.Fatalf("%d %+v", code, r)
	}
	// In-line text: one class, below the floor of 2; admitted at k = 1.
	if code, r, _ := check("--root", root, inline); code != 1 || r.Assertions[0].Reverification[0].Result != provenance.ResultVerified {
		t.Fatalf("%d %+v", code, r)
	}
	if code, _, _ := check("--root", root, "--k", "1", inline); code != 0 {
		t.Fatalf("inline at k=1: %d", code)
	}
	if code, r, _ := check("--k", "1", structured); code != 0 || r.Assertions[0].Counted[0] != provenance.Grep {
		t.Fatalf("%d %+v", code, r)
	}
	// A narrower window, or a later evaluation time, drops them.
	if code, r, _ := check("--window", "30s", setFile); code != 1 || r.Assertions[0].Reasons[0].Code != provenance.CodeOutsideWindow {
		t.Fatalf("%d %+v", code, r)
	}

	// The file changes: the reading is no longer confirmed.
	gittest.Write(t, root, "CHANGELOG.md", "# Changelog\n\n## 2026-05-25\n- first entry, rewritten\n")
	code, r, _ := check("--root", root, setFile)
	if code != 1 || r.Assertions[0].Admitted || r.Reverif.Failed != 1 || r.Assertions[0].Counted[0] != provenance.GitLog {
		t.Fatalf("%d %+v", code, r)
	}
	// The text form names every reason.
	code, out, _ := run(t, "", "provenance", "check", "--at", at, "--root", root, setFile)
	for _, want := range []string{"NOT ADMITTED", "provenance.reverification_failed", "provenance.below_floor", "1 verified, 1 failed"} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("text output lacks %q: %s", want, out)
		}
	}

	// Bad input and arguments.
	for _, c := range [][]string{
		{"provenance", "check", write("bad.json", `{"vocabulary":"1.0","annotations":[{"assertion":"a","substrate_class":"substrate.grep","colour":"red"}]}`)},
		{"provenance", "check", write("noext.json", string(events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "s"}}).Canonical))},
		{"provenance", "check", write("empty.txt", "")},
		{"provenance", "check", write("prose.txt", "no brackets here")},
		{"provenance", "check", "--k", "0", setFile},
		{"provenance", "check", "--at", "noon", setFile},
		{"provenance", "check", "--root", filepath.Join(dir, "missing"), setFile},
		{"provenance", "check", filepath.Join(dir, "missing.json")},
		{"provenance", "check"},
		{"provenance", "observe", "substrate.code.read"},
		{"provenance"},
	} {
		if code, out, errOut := run(t, "", c...); code != 2 || errOut == "" {
			t.Errorf("%v: exit %d %q %q", c[1:], code, out, errOut)
		}
	}
	if code, _, errOut := run(t, "", "provenance", "observe", "--root", root, "--path", "../etc/passwd", "substrate.code.read"); code != 1 || !strings.Contains(errOut, "outside the configured roots") {
		t.Errorf("observe outside the root: %d %q", code, errOut)
	}
}
