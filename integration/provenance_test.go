package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/gittest"
	"github.com/parley-engine/parley/provenance"
	"github.com/parley-engine/parley/readmodel"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/substrate"
	"github.com/parley-engine/parley/wire"
)

// The done-when of substrate provenance, against a live engine that
// re-verifies against a root: EVIDENCE annotated with a file read and a
// git commit is re-verified and admitted at k = 2 and the final decision
// resting on it completes the deliberation; the same evidence after the
// file changed is not admitted, and the engine refuses to verify the final
// decision that rests on it (a supervisor FAILURE, the closure API, the
// offline closure and audit with the same root).
func TestProvenance_Live(t *testing.T) {
	root := t.TempDir()
	head := gittest.Changelog(t, root)
	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0",
		ProvenanceRoots: []string{root}, ProvenanceCacheTTL: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice, _ := client.New(nc, "alice")

	// The emitter's side: observe the substrates and annotate.
	obs, err := substrate.NewReverifier(root)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	read := provenance.Locator{Path: "CHANGELOG.md", Offset: 3, Limit: 2}
	readID, err := obs.Observe(provenance.CodeRead, read)
	if err != nil {
		t.Fatal(err)
	}
	gitLoc := provenance.Locator{Ref: "main", Path: "CHANGELOG.md", Pattern: "## 2026-05-25"}
	now := time.Now().UTC()
	const as = "CHANGELOG.md has an entry dated 2026-05-25"
	set := provenance.Set{Vocabulary: "1.0", Annotations: []provenance.Annotation{
		{Assertion: as, Class: provenance.CodeRead, ObservationID: readID, TS: &now, Locator: &read},
		{Assertion: as, Class: provenance.GitLog, ObservationID: head, TS: &now, Locator: &gitLoc}}}
	charter := client.Charter{Title: "release notes", Policy: map[string]any{"provenance": map[string]any{"k": 2, "window": "10m"}}}
	run := func(title string) (id string, ev, dec *events.Artifact) {
		t.Helper()
		charter.Title = title
		id, err := alice.Open(ctx, charter)
		if err != nil {
			t.Fatal(err)
		}
		c, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "the release is documented"}})
		if err != nil {
			t.Fatal(err)
		}
		ev, _, err = alice.Publish(ctx, id, events.Draft{Type: events.TypeEvidence,
			Payload:    events.Evidence{Content: as, ProvenanceClass: events.TraceVerifiedObservation},
			References: []events.Reference{{Target: c.ID, Relation: events.Supports}}, Extensions: map[string]any{provenance.Extension: set}})
		if err != nil {
			t.Fatal(err)
		}
		dec, _, err = alice.Publish(ctx, id, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "ship", Status: events.Final},
			References: []events.Reference{{Target: c.ID, Relation: events.Decides}}})
		if err != nil {
			t.Fatal(err)
		}
		return id, ev, dec
	}

	// Re-verified and admitted: the deliberation completes.
	id1, ev1, _ := run("admitted")
	v := waitState(t, alice, id1, func(v api.View) bool { return v.Status.Terminal() })
	if v.Status != api.StatusCompleted || len(v.InadmissibleEvidence) != 0 {
		t.Fatalf("%+v", v)
	}
	var rep readmodel.ProvenanceReport
	if code := getJSON(t, "http://"+s.HTTPAddr()+"/api/v1/deliberations/"+id1+"/provenance", &rep); code != 200 || len(rep.Evidence) != 1 ||
		!rep.Evidence[0].Admissible || rep.Evidence[0].ArtifactID != ev1.ID || rep.Policy == nil || rep.Policy.K != 2 ||
		len(rep.Evidence[0].Assertions[0].Reverification) != 2 || rep.Evidence[0].Assertions[0].Reverification[0].Result != provenance.ResultVerified {
		t.Fatalf("%d %+v", code, rep)
	}

	// The file changes: the same evidence, in another deliberation, is not
	// admitted and its final decision does not verify.
	gittest.Write(t, root, "CHANGELOG.md", "# Changelog\n\n## 2026-05-25\n- first entry, rewritten\n")
	id2, ev2, dec2 := run("file changed")
	v = waitState(t, alice, id2, func(v api.View) bool { return v.Counts[events.TypeFailure] == 1 })
	if v.Status != api.StatusOpen || len(v.InadmissibleEvidence) != 1 || v.InadmissibleEvidence[0] != ev2.ID {
		t.Fatalf("%+v", v)
	}
	res, err := alice.Closure(ctx, id2, dec2.ID.String(), 0)
	if err != nil || res.OK || len(res.Findings) != 1 || res.Findings[0].Code != closure.CodeInadmissible || res.Findings[0].ArtifactID != ev2.ID.String() ||
		!strings.Contains(res.Findings[0].Message, provenance.CodeBelowFloor) {
		t.Fatalf("%v %+v", err, res)
	}
	list, _ := s.Queries.ArtifactList(id2)
	found := false
	for _, a := range list {
		if a.Type == string(events.TypeFailure) {
			failure := fetch(t, s, id2, a.ArtifactID)
			if f, ok := failure.Payload.(*events.Failure); !ok || f.Code != closure.CodeInadmissible || a.Participant != wire.SupervisorToken {
				t.Fatalf("%s", failure.Canonical)
			}
			found = true
		}
	}
	if !found {
		t.Fatal("no FAILURE")
	}
	var rep2 readmodel.ProvenanceReport
	getJSON(t, "http://"+s.HTTPAddr()+"/api/v1/deliberations/"+id2+"/provenance", &rep2)
	if rep2.Inadmissible != 1 || rep2.Evidence[0].Admissible || rep2.Reverifications == nil || rep2.Reverifications.Failed < 1 {
		t.Fatalf("%+v", rep2)
	}
	resp, err := http.Get("http://" + s.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `parley_provenance_reverifications_total{result="failed"} 1`) ||
		!strings.Contains(string(metrics), `parley_provenance_reverifications_total{result="verified"} 3`) {
		t.Errorf("metrics:\n%s", grepLines(string(metrics), "parley_provenance"))
	}

	// Offline, with the same root: engine closure and engine audit agree
	// with the live engine.
	recFile := filepath.Join(t.TempDir(), "rec.jsonl")
	if out, err := exec.Command(engineBin, "export", "--root", root, "--nats", s.NATSURL(), "--data", s.DataDir(), "--deliberation", id2, "--out", recFile).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	out, err := exec.Command(engineBin, "closure", "--root", root, "--decision", dec2.ID.String(), recFile).Output()
	var off closure.Result
	json.Unmarshal(out, &off)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || off.Findings[0].Code != closure.CodeInadmissible {
		t.Errorf("offline closure: %v %s", err, out)
	}
	out, err = exec.Command(engineBin, "audit", "--json", "--root", root, recFile).Output()
	var aud struct {
		OK           bool     `json:"ok"`
		Inadmissible []string `json:"inadmissible_evidence"`
	}
	json.Unmarshal(out, &aud)
	if err != nil || !aud.OK || len(aud.Inadmissible) != 1 || aud.Inadmissible[0] != ev2.ID.String() {
		t.Errorf("audit: %v %s", err, out)
	}
	// Without the root, the auditor judges by the discipline alone: the
	// fabricated-looking reading counts at k = 2, and the supervisor's
	// FAILURE reads as one the rules did not call for (and the fold, which
	// refuses it, no longer gives the trailer's state_digest). The report
	// says so.
	out, err = exec.Command(engineBin, "audit", "--json", recFile).Output()
	var aud2 struct {
		OK       bool `json:"ok"`
		Findings []struct {
			Code string `json:"code"`
		} `json:"findings"`
	}
	json.Unmarshal(out, &aud2)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || aud2.OK || len(aud2.Findings) == 0 || aud2.Findings[0].Code != "audit.unjustified_emission" {
		t.Errorf("audit without the root: %v %s", err, out)
	}
	_ = os.Remove(recFile)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
