package service_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
)

func TestQueries_Outcome(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := start(t, t.TempDir())
	defer s.Close()
	nc := dial(t, s)
	alice, _ := client.New(nc, "alice")
	bob, _ := client.New(nc, "bob")
	id, refused := uuid.NewString(), uuid.NewString()

	wait := func(id string, seq uint64, artifactID string) api.OutcomeReport {
		t.Helper()
		o, err := alice.WaitOutcome(ctx, id, seq, artifactID)
		if err != nil {
			t.Fatal(err)
		}
		if o.Deliberation != id || o.Position != seq || o.Projected < seq {
			t.Fatalf("%+v", o)
		}
		return o
	}
	ack, err := alice.Control(ctx, id, client.Control{Op: "open", Charter: &client.Charter{Title: "t", Participants: []string{"alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	if o := wait(id, ack.Sequence, ""); o.Outcome != api.VerdictApplied || o.Op != "open" || !o.Took() || o.Ordinal != 1 {
		t.Errorf("open: %+v", o)
	}
	claim, ack, err := alice.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "p99 halves"}})
	if err != nil {
		t.Fatal(err)
	}
	accepted := ack.Sequence
	if o := wait(id, accepted, claim.ID.String()); o.Outcome != api.VerdictAccepted || o.ArtifactID != claim.ID.String() ||
		o.ArtifactType != "CLAIM" || o.Participant != "alice" || o.Ordinal != 2 {
		t.Errorf("claim: %+v", o)
	}
	_, ack, err = bob.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "me too"}})
	if err != nil {
		t.Fatal(err)
	}
	if o := wait(id, ack.Sequence, ""); o.Outcome != api.VerdictRejected || o.Code != projector.CodeNotInCharter ||
		o.ErrorClass != projector.ClassInvalidSubmission || o.Message == "" || o.Took() || o.Ordinal != 3 {
		t.Errorf("bob: %+v", o)
	}
	// A refused charter: the deliberation never opens, and its open is
	// answered from the rejections of no opened deliberation.
	ack, err = alice.Control(ctx, refused, client.Control{Op: "open", Charter: &client.Charter{Title: "x", Limits: map[string]any{"max_artifactz": 3}}})
	if err != nil {
		t.Fatal(err)
	}
	refusedAt := ack.Sequence
	if o := wait(refused, refusedAt, ""); o.Outcome != api.VerdictRejected || o.Code != projector.CodeControlInvalid ||
		!strings.Contains(o.Message, "max_artifactz") {
		t.Errorf("refused open: %+v", o)
	}

	// Over HTTP, the same answers.
	var o api.OutcomeReport
	if code := get(t, s, "/api/v1/deliberations/"+refused+"/messages/"+strconv.FormatUint(refusedAt, 10), &o); code != 200 ||
		o.Outcome != api.VerdictRejected || o.Code != projector.CodeControlInvalid {
		t.Errorf("HTTP refused open: %d %+v", code, o)
	}
	o = api.OutcomeReport{}
	if code := get(t, s, "/api/v1/deliberations/"+id+"/messages/"+strconv.FormatUint(accepted, 10)+"?artifact_id="+claim.ID.String(), &o); code != 200 ||
		o.Outcome != api.VerdictAccepted || o.ArtifactID != claim.ID.String() {
		t.Errorf("HTTP claim: %d %+v", code, o)
	}
	for _, tt := range []struct {
		path string
		code int
	}{
		{"/api/v1/deliberations/" + id + "/messages/" + strconv.FormatUint(refusedAt, 10), 404}, // another deliberation's
		{"/api/v1/deliberations/" + id + "/messages/999999", 404},
		{"/api/v1/deliberations/" + id + "/messages/x", 400},
		{"/api/v1/deliberations/" + id + "/messages/0", 400},
		{"/api/v1/deliberations/" + id + "/messages/" + strconv.FormatUint(accepted, 10) + "?artifact_id=sha256:00", 400},
		{"/api/v1/deliberations/" + id + "/messages/" + strconv.FormatUint(accepted, 10) + "?artifact_id=sha256:" + strings.Repeat("0", 64), 409},
	} {
		var e struct{ Code string }
		if code := get(t, s, tt.path, &e); code != tt.code || e.Code == "" {
			t.Errorf("%s: %d %+v, want %d", tt.path, code, e, tt.code)
		}
	}

	// Over NATS, errors keep their status and code.
	_, err = alice.ArtifactOutcome(ctx, id, accepted, "sha256:"+strings.Repeat("0", 64))
	var se *client.ServiceError
	if !errors.As(err, &se) || se.Status != "409" || se.Code != "outcome.artifact_mismatch" {
		t.Errorf("mismatch: %v", err)
	}
	if _, err := alice.WaitOutcome(ctx, id, refusedAt, ""); !errors.As(err, &se) || se.Status != "404" {
		t.Errorf("another deliberation's message: %v", err)
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if _, err := alice.WaitOutcome(short, id, 999999, ""); !errors.As(err, &se) || se.Status != "404" {
		t.Errorf("no message there: %v", err)
	}
}
