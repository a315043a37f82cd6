package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain is also the attacker process (child.go) when started as one.
func TestMain(m *testing.M) {
	if os.Getenv(attackerEnv) != "" {
		runAttacker()
		return
	}
	os.Exit(m.Run())
}

// The soak's short mode, as a test: every class against an engine process
// of its own with 1,024 descriptors. For each, the honest relays completed
// their deliberations with a verified closure, a fresh NATS client and a
// fresh HTTP client connected while the attack went on, the engine held
// fewer descriptors than its limit, and the class's own check held (the
// live feeds' fair share, no metric series from hostile names). The
// classes that write run twice: without credentials, where the record must
// keep nothing of what they send, and as the participant; so do those
// that use what only credentials give (consumers of the stream). Latency
// and memory are measured, not asserted: docs/PERFORMANCE.md has them.
func TestSoak_Short(t *testing.T) {
	o := shortOptions(options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, err := run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, a := range attacks {
		want++
		if asBoth(a) {
			want++ // and as the participant
		}
	}
	if len(res) != want {
		t.Fatalf("%d runs of %d", len(res), want)
	}
	for _, r := range res {
		t.Logf("%s: sent %d B, recorded %d, RSS %+d B, p99 %v -> %v, fresh NATS %s, fresh HTTP %s; %s", r.name(), r.BytesSent, r.Recorded, r.RSSGrowth, r.BaselineP99, r.AttackP99, r.FreshNATS, r.FreshHTTP, r.Note)
		switch {
		case r.Class == "opens" && r.Attacker == "participant":
			// The bound is everyone's: once the attacker has filled it,
			// honest opens are refused for it, and for nothing else.
			for _, e := range r.Errors {
				if !strings.Contains(e, honestRefusal) {
					t.Errorf("opens: an honest relay failed for another reason than %s: %s", honestRefusal, e)
				}
			}
			if r.Verified != r.Completed {
				t.Errorf("opens: %d completed, %d verified", r.Completed, r.Verified)
			}
		case r.Completed < r.Relays || r.Verified != r.Completed || r.Completed != r.Deliberations || len(r.Errors) > 0:
			t.Errorf("%s: %d of %d deliberations completed, %d verified (relays %d): %v", r.name(), r.Completed, r.Deliberations, r.Verified, r.Relays, r.Errors)
		}
		// An HTTP client is answered: served, or refused for the
		// connection budget with Retry-After (connections that have
		// waited less than EvictAfter are not given up).
		if r.FreshNATS != "yes" || !(strings.HasPrefix(r.FreshHTTP, "200") || strings.HasPrefix(r.FreshHTTP, "503 limit.http_connections, Retry-After 1")) {
			t.Errorf("%s: a fresh NATS client: %s; a fresh HTTP client: %s", r.name(), r.FreshNATS, r.FreshHTTP)
		}
		if r.Descriptors == 0 || r.Descriptors >= o.fds {
			t.Errorf("%s: the engine held %d descriptors (limit %d)", r.name(), r.Descriptors, o.fds)
		}
		if r.Check != "" {
			t.Errorf("%s: %s", r.name(), r.Check)
		}
	}
}
