package service_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/health"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

func start(t *testing.T, dir string) *service.Service {
	t.Helper()
	s, err := service.Start(context.Background(), service.Config{DataDir: dir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", SnapshotEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func dial(t *testing.T, s *service.Service) *nats.Conn {
	t.Helper()
	// A connect deadline well past the default 2 s: on a loaded machine
	// (the race detector, other suites) the handshake has taken longer.
	nc, err := nats.Connect(s.NATSURL(), s.Participant(), nats.Timeout(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func get(t *testing.T, s *service.Service, path string, v any) int {
	t.Helper()
	resp, err := http.Get("http://" + s.HTTPAddr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			if p, ok := v.(*[]byte); ok {
				*p = b
			} else {
				t.Fatalf("%s: %v: %s", path, err, b)
			}
		}
	}
	return resp.StatusCode
}

func TestService_EndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	s := start(t, dir)
	nc := dial(t, s)
	alice, err := client.New(nc, "alice")
	if err != nil {
		t.Fatal(err)
	}
	bob, _ := client.New(nc, "bob")
	id, err := alice.Open(ctx, client.Charter{Title: "Adopt the cache?", Participants: []string{"alice", "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	claim, _, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The cache halves p99."}})
	if err != nil {
		t.Fatal(err)
	}
	obj, ack, err := bob.Publish(ctx, id, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "One workload.", Blocking: true},
		References: []events.Reference{{Target: claim.ID, Relation: events.ObjectsTo}}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := alice.WaitPosition(ctx, id, ack.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != api.StatusOpen || v.Artifacts != 2 || len(v.OpenBlockingObjections) != 1 || v.OpenBlockingObjections[0] != obj.ID || v.Title != "Adopt the cache?" {
		t.Fatalf("state %+v", v)
	}

	// Bad input is recorded, and the engine keeps serving.
	js, _ := jetstream.New(nc)
	pub := func(subject string, data []byte, opts ...jetstream.PublishOpt) uint64 {
		ack, err := js.Publish(ctx, subject, data, opts...)
		if err != nil {
			t.Fatalf("publish %s: %v", subject, err)
		}
		return ack.Sequence
	}
	pub(wire.ArtifactSubject(id, "alice"), []byte("\xff\xfegarbage"))
	pub(wire.ArtifactSubject(id, "alice"), []byte(`{"payload":"`+strings.Repeat("x", 2<<20)+`"}`))
	pub(wire.ArtifactSubject(id, "mallory"), claim.Canonical)
	pub(wire.ArtifactSubject(id, "bob"), claim.Canonical, jetstream.WithMsgID("a-new-msg-id")) // as after the dedupe window
	unopened := "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	last := pub(wire.ArtifactSubject(unopened, "alice"), claim.Canonical)
	if err := s.Runner.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	var rej api.RejectionList
	if code := get(t, s, "/api/v1/deliberations/"+id+"/rejections", &rej); code != 200 {
		t.Fatalf("rejections: %d", code)
	}
	for _, want := range []string{"json.invalid_utf8", "limit.size", projector.CodeNotInCharter, projector.CodeDuplicate} {
		if rej.ByCode[want] != 1 {
			t.Errorf("rejections by code %v: want one %s", rej.ByCode, want)
		}
	}
	var unrouted api.RejectionList
	get(t, s, "/api/v1/rejections", &unrouted)
	if unrouted.ByCode[projector.CodeNotOpen] != 1 {
		t.Errorf("unrouted %+v", unrouted)
	}
	// A resubmission inside the window is absorbed by the stream.
	ack2, err := bob.PublishArtifact(ctx, id, obj)
	if err != nil || !ack2.Duplicate {
		t.Errorf("resubmission: %v %+v", err, ack2)
	}

	// The HTTP API.
	var view api.View
	if code := get(t, s, "/api/v1/deliberations/"+id, &view); code != 200 || view.Artifacts != 2 || view.Rejections != 4 || view.StateDigest.String() == "" {
		t.Errorf("GET deliberation: %d %+v", code, view)
	}
	var list []api.Summary
	if get(t, s, "/api/v1/deliberations", &list); len(list) != 1 || list[0].ID != id {
		t.Errorf("list %+v", list)
	}
	var body []byte
	if code := get(t, s, "/api/v1/deliberations/"+id+"/artifacts/"+claim.ID.String(), &body); code != 200 || string(body) != string(claim.Canonical) {
		t.Errorf("artifact: %d %s", code, body)
	}
	var rec []byte
	if code := get(t, s, "/api/v1/deliberations/"+id+"/recording", &rec); code != 200 || string(rec) != string(claim.Canonical)+"\n"+string(obj.Canonical)+"\n" {
		t.Errorf("recording: %d %q", code, rec)
	}
	var apiErr map[string]string
	if code := get(t, s, "/api/v1/deliberations/"+id+"/artifacts/sha256:"+strings.Repeat("0", 64), &apiErr); code != 404 || apiErr["code"] != "not_found" {
		t.Errorf("missing artifact: %d %v", code, apiErr)
	}
	if code := get(t, s, "/api/v1/deliberations/"+id+"/artifacts/nope", &apiErr); code != 400 {
		t.Errorf("bad artifact id: %d", code)
	}
	if code := get(t, s, "/api/v1/deliberations/"+unopened, &apiErr); code != 404 {
		t.Errorf("unknown deliberation: %d", code)
	}
	var h health.Health
	if code := get(t, s, "/healthz", &h); code != 200 || !h.OK || h.Position != last {
		t.Errorf("health %d %+v", code, h)
	}
	var metrics []byte
	get(t, s, "/metrics", &metrics)
	for _, want := range []string{`parley_rejections_total{code="limit.size"} 1`, `parley_deliberations{status="open"} 1`, "parley_projector_position", "parley_accepted_artifacts_total 2"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// The NATS micro service answers the same reads.
	msg, err := nc.Request(wire.MicroPrefix+".rejections", []byte(`{"id":"`+id+`"}`), 5*time.Second)
	if err != nil || !strings.Contains(string(msg.Data), `"limit.size":1`) {
		t.Errorf("micro rejections: %v %s", err, msg.Data)
	}
	msg, err = nc.Request("$SRV.INFO.parley", nil, 5*time.Second)
	if err != nil || !strings.Contains(string(msg.Data), "parley.api.deliberation") {
		t.Errorf("micro info: %v", err)
	}

	// Restart: the projection comes back from its snapshot and the stream,
	// with the same digest.
	before := view.StateDigest
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := start(t, dir)
	defer s2.Close()
	if err := s2.Runner.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	var again api.View
	get(t, s2, "/api/v1/deliberations/"+id, &again)
	if again.StateDigest != before || again.Artifacts != 2 {
		t.Errorf("after restart: %+v", again)
	}
	_ = wire.StreamName
}
