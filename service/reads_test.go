package service_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/closure"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/readmodel"
	"github.com/parley-engine/parley/service"
)

// Closure reads at positions a reader chooses: an answer that can no
// longer change is kept, and any number of readers of it cost one
// verification; every other verification of a reader not signed in is
// paid from the read budget, and past it refused with 429
// limit.read_budget and Retry-After, counted in /metrics and /healthz,
// while a signed-in reader is served. A position past the deliberation's
// is answered as the deliberation's position; an answer that can still
// change is never kept: a later read sees what arrived.
func TestReads_ClosureCacheAndBudget(t *testing.T) {
	// A budget that one verification spends for hours.
	s := startWith(t, service.Config{NoSupervisor: true, ReadBudget: readmodel.ReadBudget{Concurrent: 1, PerSecond: time.Nanosecond, Burst: time.Nanosecond}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _ := client.New(dial(t, s), "alice")
	id, err := c.Open(ctx, client.Charter{Title: "reads"})
	if err != nil {
		t.Fatal(err)
	}
	claim, _, err := c.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "The cache halves p99."}})
	if err != nil {
		t.Fatal(err)
	}
	decision, ack, err := c.Publish(ctx, id, events.Draft{Type: events.TypeDecision,
		Payload:    events.Decision{Outcome: "Adopt it.", Status: events.Final, ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}}})
	if err != nil {
		t.Fatal(err)
	}
	// Something after the decision, so that there are positions to ask at
	// between it and the deliberation's.
	_, after, err := c.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Reads are cheap."}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitPosition(ctx, id, after.Sequence); err != nil {
		t.Fatal(err)
	}
	token := s.Credentials().HTTPToken
	read := func(at uint64, signedIn bool) (int, http.Header, closure.Result, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+s.HTTPAddr()+"/api/v1/deliberations/"+id+"/closure/"+decision.ID.String()+"?at="+strconv.FormatUint(at, 10), nil)
		if signedIn {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		r := do(t, req)
		var res closure.Result
		json.Unmarshal(r.body, &res)
		return r.status, r.header, res, r.json
	}
	// The first read at the decision's own position: verified, paid for,
	// kept.
	code, _, first, _ := read(ack.Sequence, false)
	if code != 200 || !first.OK {
		t.Fatalf("the first read: %d %+v", code, first)
	}
	// At another position: the budget is spent.
	code, h, _, body := read(after.Sequence, false)
	if code != http.StatusTooManyRequests || body["code"] != api.CodeReadBudget || h.Get("Retry-After") == "" {
		t.Fatalf("a read past the budget: %d %v Retry-After %q", code, body, h.Get("Retry-After"))
	}
	if n, err := strconv.Atoi(h.Get("Retry-After")); err != nil || n < 1 {
		t.Errorf("Retry-After %q", h.Get("Retry-After"))
	}
	// The kept answer costs nothing: served to anyone, as computed.
	for range 20 {
		code, _, again, _ := read(ack.Sequence, false)
		if code != 200 || !equalResults(again, first) {
			t.Fatalf("the kept answer: %d %+v, first %+v", code, again, first)
		}
	}
	// A signed-in reader is not budgeted.
	code, _, atAfter, _ := read(after.Sequence, true)
	if code != 200 || !atAfter.OK || atAfter.Position != after.Sequence {
		t.Fatalf("a signed-in read: %d %+v", code, atAfter)
	}
	// Positions ahead of the deliberation's have its answer there, named
	// for the position asked: any number of them cost nothing more, even
	// with the budget spent.
	for i := range uint64(10) {
		code, _, res, _ := read(after.Sequence+1+i, false)
		if code != 200 || res.Position != after.Sequence+1+i || !equalResults(withPosition(res, after.Sequence), atAfter) {
			t.Fatalf("a read ahead at %d: %d %+v, want %+v", after.Sequence+1+i, code, res, atAfter)
		}
	}
	// Listings that may read every deliberation are paid from the same
	// budget: refused, and served to a signed-in reader.
	for _, path := range []string{"/api/v1/deliberations?status=open", "/api/v1/explorer/deliberations?q=cache"} {
		for _, signed := range []bool{false, true} {
			req, _ := http.NewRequest("GET", "http://"+s.HTTPAddr()+path, nil)
			if signed {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			r := do(t, req)
			want := http.StatusTooManyRequests
			if signed {
				want = 200
			}
			if r.status != want || (!signed && (r.json["code"] != api.CodeReadBudget || r.header.Get("Retry-After") == "")) {
				t.Errorf("%s (signed in %v): %d %s", path, signed, r.status, r.body)
			}
		}
	}
	// What arrives in between changes the answer ahead: a blocking
	// objection against the decision's closure.
	ahead := after.Sequence + 100
	if code, _, res, _ := read(ahead, true); code != 200 || len(res.Findings) != 0 {
		t.Fatalf("a read ahead: %d %+v", code, res)
	}
	_, oack, err := c.Publish(ctx, id, events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "Only one workload.", Blocking: true},
		References: []events.Reference{{Target: claim.ID, Relation: events.ObjectsTo}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitPosition(ctx, id, oack.Sequence); err != nil {
		t.Fatal(err)
	}
	if code, _, res, _ := read(ahead, true); code != 200 || len(res.Findings) != 1 || res.Findings[0].Code != closure.CodeChallenged {
		t.Fatalf("a read ahead, after an objection at %d: %d %+v", oack.Sequence, code, res)
	}

	if v := metric(t, s, `parley_reads_refused_total{read="closure"}`); v != 1 {
		t.Errorf("parley_reads_refused_total{read=closure} %v", v)
	}
	if v := metric(t, s, `parley_reads_refused_total{read="list"}`); v != 2 {
		t.Errorf("parley_reads_refused_total{read=list} %v", v)
	}
	if v := metric(t, s, "parley_closure_cache_hits_total"); v != 31 { // 20 at the decision, 11 ahead
		t.Errorf("parley_closure_cache_hits_total %v", v)
	}
	_, hl := healthOf(t, s)
	if !strings.Contains(strings.Join(hl.BoundsHit, ","), api.CodeReadBudget) || !hl.OK {
		t.Errorf("/healthz: ok %v, bounds hit %v", hl.OK, hl.BoundsHit)
	}
}

func equalResults(a, b closure.Result) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func withPosition(r closure.Result, at uint64) closure.Result {
	r.Position = at
	return r
}
