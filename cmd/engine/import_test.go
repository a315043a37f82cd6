package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// engine import on the embedded default: an import publishes on the
// importer's subject, which a client without credentials may not publish
// on, so the import is refused (and says why) and leaves nothing; with
// the operator user of the engine's credentials file (--data, or
// ./parley-data's by default) it goes through.
func TestImport_OperatorCredentials(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	data := filepath.Join(dir, "parley-data")
	s, err := service.Start(ctx, service.Config{DataDir: data, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	alice, _ := client.New(nc, "alice")
	id, _ := alice.Open(ctx, client.Charter{Title: "recorded"})
	claim, _, _ := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "ship it"}})
	alice.Publish(ctx, id, events.Draft{Type: events.TypeDecision, Payload: events.Decision{Outcome: "ship", Status: events.Final,
		ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}}})
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	// The end, and the checkpoint that follows it.
	alice.Watch(wctx, id, func(v api.View) bool { return v.Status != api.StatusCompleted || v.Log.CheckpointDue })
	rec := filepath.Join(dir, "rec.jsonl")
	// Reading is a participant's right: export needs no credentials.
	t.Chdir(t.TempDir())
	if code, _, errs := run(t, "", "export", "--nats", s.NATSURL(), "--data", s.DataDir(), "--deliberation", id, "--out", rec); code != 0 {
		t.Fatalf("export: %d %s", code, errs)
	}
	if b, _ := os.ReadFile(rec); !strings.Contains(string(b), ".art._supervisor") {
		t.Fatal("the recording holds no supervisor message")
	}
	other := "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a01"
	code, _, errs := run(t, "", "import", "--nats", s.NATSURL(), "--as", other, rec)
	if code != 1 || !strings.Contains(errs, "Permissions Violation") || !strings.Contains(errs, "--data") {
		t.Fatalf("import without credentials: %d %s", code, errs)
	}
	if n := messagesOf(t, s, other); n != 0 {
		t.Fatalf("a refused import left %d messages", n)
	}
	// --data: the address and the operator user come from the file.
	if code, out, errs := run(t, "", "import", "--data", data, "--as", other, rec); code != 0 || !strings.Contains(out, `"ok":true`) {
		t.Fatalf("import --data: %d %s %s", code, out, errs)
	}
	// By default, ./parley-data's.
	t.Chdir(dir)
	third := "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a02"
	if code, out, errs := run(t, "", "import", "--as", third, rec); code != 0 || !strings.Contains(out, `"ok":true`) {
		t.Fatalf("import with ./parley-data: %d %s %s", code, out, errs)
	}
	for _, d := range []string{other, third} {
		if n := messagesOf(t, s, d); n != messagesOf(t, s, id)+1 { // and the import's end
			t.Errorf("%s holds %d messages, the recording %d", d, n, messagesOf(t, s, id))
		}
	}
	// engine watch reads an imported deliberation as the original: its
	// messages by the ones they restore, with the same ordinals.
	watch := func(d string) string {
		t.Helper()
		code, out, errs := run(t, "", "watch", "--nats", s.NATSURL(), "--data", s.DataDir(), d)
		if code != 0 {
			t.Fatalf("watch %s: %d %s", d, code, errs)
		}
		return strings.ReplaceAll(out, d, "ID")
	}
	if orig, imp := watch(id), watch(other); orig != imp || !strings.Contains(imp, "#1 ") || strings.Contains(imp, "_import") {
		t.Errorf("watch of the import:\n%s\nof the original:\n%s", imp, orig)
	}
	// A --user given wins over the file, and a wrong one says whose it was.
	if code, _, errs := run(t, "", "import", "--nats", s.NATSURL(), "--user", "operator", "--password", "wrong", "--as", third, rec); code != exitUsage ||
		!strings.Contains(errs, "--user operator") {
		t.Errorf("a wrong password: %d %s", code, errs)
	}
}

func messagesOf(t *testing.T, s *service.Service, id string) int {
	t.Helper()
	info, err := s.Stream.Info(context.Background(), jetstream.WithSubjectFilter(wire.DeliberationFilter(id)))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range info.State.Subjects {
		n += int(c)
	}
	return n
}
