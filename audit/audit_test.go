package audit_test

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/audit"
	"github.com/parley-engine/parley/recording"
)

// The state digest the live engine reported for the recorded deliberation
// (relay run --json, when testdata/twelve-round.stream.jsonl was exported
// from it): an audit on any machine, in any later version, must read the
// same.
const liveDigest = "sha256:04ff0ac8646d4f6628586b7c1ddbabc286bd8dc65139c7673a3816906e5c3dc1"

func auditFile(t *testing.T, path string) *audit.Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := recording.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Run(r)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestAudit_RecordedTwelveRound(t *testing.T) {
	rep := auditFile(t, "testdata/twelve-round.stream.jsonl")
	if !rep.OK || rep.StateDigest != liveDigest || rep.Status != "completed" || rep.Messages != 51 || rep.Artifacts != 38 ||
		rep.Supervisor != 1 || len(rep.Decisions) != 1 || !rep.Decisions[0].OK {
		t.Fatalf("%s", rep.Text())
	}
	log := auditFile(t, "testdata/twelve-round.log.jsonl")
	if !log.OK || log.Artifacts != 38 || len(log.Decisions) != 1 || log.Decisions[0].ID != rep.Decisions[0].ID || len(log.NotChecked) == 0 {
		t.Fatalf("%s", log.Text())
	}
}

// FuzzAudit: any input gives an error or a report, never a panic, and the
// same report twice.
func FuzzAudit(f *testing.F) {
	for _, p := range []string{"testdata/twelve-round.stream.jsonl", "testdata/twelve-round.log.jsonl"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		lines := strings.SplitAfter(string(b), "\n")
		f.Add([]byte(strings.Join(lines[:min(6, len(lines))], "")))
		f.Add(b)
	}
	f.Add([]byte(`{"parley_recording":"stream","version":1,"deliberation":"x"}` + "\n" + `{"position":1,"subject":"parley.x.ctl","data":"e30="}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		run := func() string {
			r, err := recording.NewReader(bytes.NewReader(b))
			if err != nil {
				return "error: " + err.Error()
			}
			rep, err := audit.Run(r)
			if err != nil {
				return "error: " + err.Error()
			}
			if rep.OK && len(rep.Findings) > 0 {
				t.Fatalf("ok with findings: %s", rep.Text())
			}
			return rep.Text()
		}
		done := make(chan [2]string, 1)
		go func() { done <- [2]string{run(), run()} }()
		select {
		case r := <-done:
			if r[0] != r[1] {
				t.Fatalf("two audits differ:\n%s\n---\n%s", r[0], r[1])
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the audit of %d bytes did not end in 10 s", len(b))
		}
	})
}
