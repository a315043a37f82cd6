package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/readmodel"
	"github.com/parley-engine/parley/web"
)

// The live feed against what a hostile or careless client sends:
// cursors at the ends of their range or past them, negative, not
// numbers, unknown deliberations; more feeds than the engine serves at
// once; reads with a min_position far in the future, in a flood. Every
// one gets a classified answer or a feed that behaves, the feed limit
// holds and frees, and the engine's goroutines come back down.
func TestLiveFeedAbuse(t *testing.T) {
	s := start(t, "127.0.0.1:0")
	base := "http://" + s.HTTPAddr()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c, _ := client.New(nc, "alice")
	id, err := c.Open(ctx, client.Charter{Title: "abuse"})
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i := range 3 {
		_, ack, err := c.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprint("claim ", i)}})
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	if _, err := c.WaitPosition(ctx, id, last); err != nil {
		t.Fatal(err)
	}
	feed := base + "/api/v1/deliberations/" + id + "/events"
	get := func(url string, h http.Header) (*http.Response, map[string]any) {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(rctx, "GET", url, nil)
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		defer resp.Body.Close()
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		return resp, body
	}
	for _, cse := range []struct {
		url, lastID string
		status      int
		code        string
	}{
		{feed, "-1.0.0", 400, "bad_request"},
		{feed, "0.-1.0", 400, "bad_request"},
		{feed, "0.0.-1", 400, "bad_request"},
		{feed, "18446744073709551616.0.0", 400, "bad_request"}, // past uint64
		{feed, "1.2", 400, "bad_request"},
		{feed, "1.2.3.4", 400, "bad_request"},
		{feed, "0x10.0.0", 400, "bad_request"},
		{feed, strings.Repeat("9", 4000) + ".0.0", 400, "bad_request"},
		{feed + "?after=-1", "", 400, "bad_request"},
		{feed + "?after=1e3", "", 400, "bad_request"},
		{feed + "?after=" + strings.Repeat("9", 4000), "", 400, "bad_request"},
		{base + "/api/v1/deliberations/00000000-0000-4000-8000-000000000000/events", "", 404, "not_found"},
		{base + "/api/v1/deliberations/%3Cscript%3E/events", "", 404, "not_found"},
	} {
		h := http.Header{}
		if cse.lastID != "" {
			h.Set("Last-Event-ID", cse.lastID)
		}
		resp, body := get(cse.url, h)
		if resp.StatusCode != cse.status || body["code"] != cse.code || body["error"] == "" {
			t.Errorf("%s Last-Event-ID %.40q: %d %v, want %d %s", cse.url[len(base):min(len(cse.url), len(base)+80)], cse.lastID, resp.StatusCode, body, cse.status, cse.code)
		}
	}
	// min_position holds for the explorer's endpoints as for the API's:
	// not a number is refused, a position far ahead answers behind.
	for _, u := range []string{feed, base + "/api/v1/explorer/deliberations"} {
		for q, want := range map[string]string{"-5": "400 bad_request", "abc": "400 bad_request", strconv.FormatUint(1<<62, 10): "503 " + api.CodeBehind} {
			resp, body := get(u+"?min_position="+q, nil)
			if got := fmt.Sprint(resp.StatusCode, " ", body["code"]); got != want {
				t.Errorf("%s?min_position=%s: %s, want %s", u[len(base):], q, got, want)
			}
		}
	}
	if evs := readEvents(t, feed+"?min_position="+strconv.FormatUint(last, 10), nil, func(e sseEvent) bool { return e.Name == "ready" }); !strings.Contains(all(evs, "artifacts"), "claim 2") {
		t.Errorf("the feed at a min_position reached: %v", evs)
	}

	// Cursors at the ends of the range are feeds. Past the last
	// position, only ready, whatever the counts say (artifacts are
	// admitted in stream order: none can be admitted at a position
	// already passed); counts at their largest send what is after P.
	ready := func(e sseEvent) bool { return e.Name == "ready" }
	if evs := readEvents(t, feed, http.Header{"Last-Event-ID": {"18446744073709551615.9223372036854775807.9223372036854775807"}}, ready); count(evs, "artifacts") != 0 || count(evs, "ready") != 1 {
		t.Errorf("Last-Event-ID at the largest: %v", evs)
	}
	if evs := readEvents(t, feed, http.Header{"Last-Event-ID": {"18446744073709551615.0.0"}}, ready); count(evs, "artifacts") != 0 || count(evs, "ready") != 1 {
		t.Errorf("Last-Event-ID past the end, none sent: %v", evs)
	}
	evs := readEvents(t, feed, http.Header{"Last-Event-ID": {"0.9223372036854775807.9223372036854775807"}}, ready)
	if !strings.Contains(all(evs, "artifacts"), "claim 2") || count(evs, "rejections") != 0 {
		t.Errorf("huge counts from position 0: %v", evs)
	}
	if evs := readEvents(t, feed+"?after=18446744073709551615", nil, ready); count(evs, "artifacts") != 0 {
		t.Errorf("?after= the largest position: %v", evs)
	}

	// Live feeds are shared fairly: at most MaxStreamsPerClient to one
	// client network not signed in (an IPv4 /24: every address of
	// 127.0.0.0/24 is one network), ReservedSignedIn of MaxStreams kept
	// for signed-in readers; each refusal is 503 limit.live_feeds with
	// Retry-After, and a feed gone gives its place back.
	before := runtime.NumGoroutine()
	var conns []*http.Response
	var transports []*http.Transport
	defer func() {
		for _, tr := range transports {
			tr.CloseIdleConnections()
		}
	}()
	from := func(host string) *http.Client {
		tr := &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: web.MaxStreams + 8,
			DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(host)}}).DialContext}
		transports = append(transports, tr)
		return &http.Client{Transport: tr}
	}
	token := s.Credentials().HTTPToken
	open := func(hc *http.Client, signedIn bool) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", feed, nil)
		if signedIn {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	served := func(resp *http.Response, what string) {
		t.Helper()
		if resp.StatusCode != 200 {
			t.Fatalf("%s refused: %d", what, resp.StatusCode)
		}
		conns = append(conns, resp)
	}
	refused := func(resp *http.Response, what, want string) {
		t.Helper()
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		msg, _ := body["error"].(string)
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || body["code"] != web.CodeLiveFeeds || !strings.Contains(msg, want) {
			t.Errorf("%s: %d %v Retry-After %q, want 503 %s (%s)", what, resp.StatusCode, body, resp.Header.Get("Retry-After"), web.CodeLiveFeeds, want)
		}
	}
	// Eight addresses of one /24 (as one client holds them) get
	// MaxStreamsPerClient feeds between them, not eight times that.
	var local []*http.Client
	for i := range 8 {
		local = append(local, from(fmt.Sprintf("127.0.0.%d", 2+i)))
	}
	for i := range web.MaxStreamsPerClient {
		served(open(local[i%len(local)], false), fmt.Sprintf("feed %d of 127.0.0.0/24", i+1))
	}
	for _, hc := range local {
		refused(open(hc, false), fmt.Sprintf("feed %d of 127.0.0.0/24", web.MaxStreamsPerClient+1), "from 127.0.0.0/24")
	}
	// Other networks fill what is not reserved, and then one more
	// network is refused for it, while a signed-in reader is served.
	anonymous := web.MaxStreams - web.ReservedSignedIn
	for n := 1; len(conns) < anonymous; n++ {
		hc := from(fmt.Sprintf("127.0.%d.1", n))
		for range min(web.MaxStreamsPerClient, anonymous-len(conns)) {
			served(open(hc, false), fmt.Sprintf("feed %d", len(conns)+1))
		}
	}
	other := from("127.0.200.1")
	refused(open(other, false), "an anonymous feed past the anonymous room", "kept for signed-in readers")
	// Signed-in readers take the reserved room, whatever their network,
	// up to MaxStreams in all.
	for len(conns) < web.MaxStreams {
		served(open(local[0], true), fmt.Sprintf("signed-in feed %d", len(conns)+1-anonymous))
	}
	refused(open(other, true), fmt.Sprintf("feed %d", web.MaxStreams+1), "too many live feeds open (")
	conns[len(conns)-1].Body.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp := open(other, true)
		if resp.StatusCode == 200 {
			conns[len(conns)-1] = resp
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("a feed gone does not free its place: %d", resp.StatusCode)
		}
	}
	if st := s.Explorer().FeedStats(); st.Open != web.MaxStreams || st.SignedIn != web.ReservedSignedIn || st.Refused[web.FeedsNetwork] != 8 || st.Refused[web.FeedsAnonymous] != 1 || st.Refused[web.FeedsFull] < 1 {
		t.Errorf("feed stats: %+v", st)
	}
	for _, r := range conns {
		r.Body.Close()
	}
	for _, tr := range transports {
		tr.CloseIdleConnections()
	}
	settle := func(what string, limit int) {
		t.Helper()
		var n int
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if n = runtime.NumGoroutine(); n <= limit {
				return
			}
		}
		t.Errorf("after %s: %d goroutines, %d before", what, n, limit)
	}
	settle("the feeds closed", before+20)

	// A flood of reads waiting for a position far in the future: each is
	// answered 503 projection.behind with Retry-After after the wait, and
	// the goroutines come back down.
	before = runtime.NumGoroutine()
	hc := from("127.0.0.1")
	far := strconv.FormatUint(1<<62, 10)
	const flood = 300
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]int{}
	start := time.Now()
	for i := range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u := base + "/api/v1/deliberations/" + id + "?min_position=" + far
			if i%3 == 1 {
				u = base + "/api/v1/deliberations?min_position=" + far
			} else if i%3 == 2 {
				u = base + "/api/v1/deliberations/00000000-0000-4000-8000-000000000000/artifacts?min_position=" + far
			}
			req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
			resp, err := hc.Do(req)
			if err != nil {
				mu.Lock()
				answers[err.Error()]++
				mu.Unlock()
				return
			}
			var body map[string]any
			json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			mu.Lock()
			answers[fmt.Sprintf("%d %v retry-after=%v", resp.StatusCode, body["code"], resp.Header.Get("Retry-After") != "")]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	took := time.Since(start)
	if answers["503 "+api.CodeBehind+" retry-after=true"] != flood {
		t.Errorf("the flood's answers: %v", answers)
	}
	// each waits readmodel.DefaultMinPositionWait, all at once
	if took > 20*readmodel.DefaultMinPositionWait {
		t.Errorf("%d reads waiting for %s took %v", flood, far, took)
	}
	for _, tr := range transports {
		tr.CloseIdleConnections()
	}
	settle("the flood", before+20)
	t.Logf("%d feeds at once, then %d reads waiting for min_position %s answered in %v: %v", web.MaxStreams, flood, far, took, answers)
}
