package service_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// A read with a min_position the projection has not reached answers 503
// projection.behind (HTTP with Retry-After, micro with the status header
// and the JSON code); one it has reached answers as without; a malformed
// one is a 400.
func TestQueries_MinPosition(t *testing.T) {
	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0",
		MinPositionWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc := dial(t, s)
	c, _ := client.New(nc, "alice")
	ctx := context.Background()
	id, err := c.Open(ctx, client.Charter{Title: "ryw"})
	if err != nil {
		t.Fatal(err)
	}
	_, ack, err := c.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "s"}})
	if err != nil {
		t.Fatal(err)
	}
	// The client's own read carries its last publish: it sees the claim.
	v, err := c.State(ctx, id)
	if err != nil || v.Counts[events.TypeClaim] != 1 {
		t.Fatalf("state after publish: %v %+v", err, v.Counts)
	}
	seq := strconv.FormatUint(ack.Sequence, 10)
	ahead := strconv.FormatUint(ack.Sequence+1000, 10)
	for _, path := range []string{"/api/v1/deliberations/" + id, "/api/v1/deliberations/" + id + "/artifacts", "/api/v1/deliberations", "/api/v1/rejections"} {
		if code := get(t, s, path+"?min_position="+seq, nil); code != 200 {
			t.Errorf("%s at a reached position: %d", path, code)
		}
		resp, err := http.Get("http://" + s.HTTPAddr() + path + "?min_position=" + ahead)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Code      string `json:"code"`
			Projected uint64 `json:"projected"`
		}
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != 503 || body.Code != api.CodeBehind || resp.Header.Get("Retry-After") == "" || body.Projected < ack.Sequence {
			t.Errorf("%s ahead: %d %+v Retry-After %q, want 503 %s", path, resp.StatusCode, body, resp.Header.Get("Retry-After"), api.CodeBehind)
		}
	}
	var bad struct{ Code string }
	if code := get(t, s, "/api/v1/deliberations/"+id+"?min_position=x", &bad); code != 400 || bad.Code != "bad_request" {
		t.Errorf("min_position=x: %d %q", code, bad.Code)
	}

	for _, ep := range []string{"deliberation", "artifacts", "deliberations", "closure", "provenance"} {
		msg, err := nc.Request(wire.MicroPrefix+"."+ep, []byte(`{"id":"`+id+`","min_position":`+ahead+`}`), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Code string }
		json.Unmarshal(msg.Data, &body)
		if msg.Header.Get("Nats-Service-Error-Code") != "503" || body.Code != api.CodeBehind {
			t.Errorf("micro %s ahead: %q %s", ep, msg.Header.Get("Nats-Service-Error-Code"), msg.Data)
		}
		msg, err = nc.Request(wire.MicroPrefix+"."+ep, []byte(`{"id":"`+id+`","min_position":`+seq+`}`), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if code := msg.Header.Get("Nats-Service-Error-Code"); code == "503" {
			t.Errorf("micro %s at a reached position: %s", ep, msg.Data)
		}
	}
}

// A read that waits does not hold up the endpoint's others: while one
// waits for the deliberation's next message (for up to a minute), a read
// of the position reached answers, and the waiting one answers once the
// message is in.
func TestQueries_WaitingReadHoldsUpNoOther(t *testing.T) {
	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0",
		MinPositionWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc := dial(t, s)
	c, _ := client.New(nc, "alice")
	ctx := context.Background()
	id, err := c.Open(ctx, client.Charter{Title: "ryw"})
	if err != nil {
		t.Fatal(err)
	}
	_, ack, err := c.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "s"}})
	if err != nil {
		t.Fatal(err)
	}
	next := strconv.FormatUint(ack.Sequence+1, 10)
	slow := make(chan *nats.Msg, 1)
	go func() {
		m, _ := nc.Request(wire.MicroPrefix+".deliberation", []byte(`{"id":"`+id+`","min_position":`+next+`}`), 2*time.Minute)
		slow <- m
	}()
	eventually.True(t, 10*time.Second, "the read waits for its min_position", func() bool { return s.Queries.Waiting() == 1 })
	m, err := nc.Request(wire.MicroPrefix+".deliberation", []byte(`{"id":"`+id+`"}`), 5*time.Second)
	if err != nil || m.Header.Get("Nats-Service-Error-Code") != "" {
		t.Fatalf("read beside a waiting one: %v", err)
	}
	select {
	case <-slow:
		t.Fatal("the waiting read was answered before its position")
	default:
	}
	if _, _, err = c.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "t"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-slow:
		if m == nil || m.Header.Get("Nats-Service-Error-Code") != "" {
			t.Fatalf("the waiting read: %v", m)
		}
		if !strings.Contains(string(m.Data), `"position":`+next) {
			t.Errorf("the waiting read answered %s, want the state at position %s", m.Data, next)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting read was not answered once its position was reached")
	}
}
