package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/service"
)

// A supervisor whose clock runs ahead of the NATS server's judges an idle
// timeout passed that, by the stream's time, has not: the live fold
// refuses its FAILURE (supervisor.unjustified), the deliberation stays
// open, and the supervisor backs off instead of refusing itself every tick.
func TestSupervisor_ClockAheadIsRefusedAndBacksOff(t *testing.T) {
	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", NoSupervisor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _ := client.New(dial(t, s), "alice") // a participant: the engine's own user publishes only what the engine does
	id, err := c.Open(ctx, client.Charter{Title: "idle", Limits: map[string]any{"idle_timeout": "10m"}})
	if err != nil {
		t.Fatal(err)
	}
	_, ack, err := c.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	s.Runner.WaitFor(ctx, ack.Sequence)
	ahead := time.Now().Add(time.Hour)
	s.Supervisor.Now = func() time.Time { return ahead }
	s.Supervisor.Settle = 0
	// Its FAILURE and the TERMINATION that follows it: both refused.
	if n := s.Supervisor.Step(ctx); n != 2 {
		t.Fatalf("published %d", n)
	}
	v, _ := s.Queries.Get(id)
	if v.Status != api.StatusOpen || v.RejectionsByCode[projector.CodeSupervisorUnjustified] != 2 {
		t.Fatalf("status %s, rejections %v", v.Status, v.RejectionsByCode)
	}
	for i := 0; i < 3; i++ {
		if n := s.Supervisor.Step(ctx); n != 0 {
			t.Fatalf("published %d again within the back-off", n)
		}
	}
	ahead = ahead.Add(projector.ClockSkew)
	if n := s.Supervisor.Step(ctx); n != 2 {
		t.Fatalf("after the back-off, published %d", n)
	}
}
