package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// lists is an engine for the listing tests, without the supervisor (its
// emissions would only add messages).
type lists struct {
	t  *testing.T
	s  *service.Service
	nc *nats.Conn
	js jetstream.JetStream
}

func startLists(t *testing.T) *lists {
	t.Helper()
	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", NoSupervisor: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	nc := dial(t, s)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &lists{t: t, s: s, nc: nc, js: js}
}

// publish publishes messages asynchronously and waits until the
// projection has applied them; it returns their positions.
func (l *lists) publish(msgs ...*nats.Msg) []uint64 {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	futs := make([]jetstream.PubAckFuture, len(msgs))
	for i, m := range msgs {
		f, err := l.js.PublishMsgAsync(m)
		if err != nil {
			l.t.Fatal(err)
		}
		futs[i] = f
	}
	seqs := make([]uint64, len(msgs))
	for i, f := range futs {
		select {
		case ack := <-f.Ok():
			seqs[i] = ack.Sequence
		case err := <-f.Err():
			l.t.Fatal(err)
		case <-ctx.Done():
			l.t.Fatal(ctx.Err())
		}
	}
	if len(seqs) > 0 {
		if err := l.s.Runner.WaitFor(ctx, slices.Max(seqs)); err != nil {
			l.t.Fatal(err)
		}
	}
	return seqs
}

func ctlMsg(id, body string) *nats.Msg {
	return &nats.Msg{Subject: wire.ControlSubject(id), Data: []byte(body)}
}

// open opens n deliberations and returns their ids, oldest first.
func (l *lists) open(n int) []string {
	l.t.Helper()
	ids := make([]string, n)
	msgs := make([]*nats.Msg, n)
	for i := range ids {
		ids[i] = uuid.NewString() // random: spread over the shards
		msgs[i] = ctlMsg(ids[i], `{"op":"open","charter":{"title":"d`+strconv.Itoa(i)+`"}}`)
	}
	l.publish(msgs...)
	return ids
}

// get asks for path and decodes the answer into v; it returns the status
// and the headers.
func (l *lists) get(path string, v any) (int, http.Header) {
	l.t.Helper()
	resp, err := http.Get("http://" + l.s.HTTPAddr() + path)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		l.t.Fatal(err)
	}
	if v != nil {
		if p, ok := v.(*[]byte); ok {
			*p = b
		} else if err := json.Unmarshal(b, v); err != nil {
			l.t.Fatalf("%s: %v: %.300s", path, err, b)
		}
	}
	return resp.StatusCode, resp.Header
}

// walk pages through an HTTP listing following the Link headers, checking
// that they agree with X-Next-Cursor and that every page but the last is
// full; between pages it calls between (may be nil).
func walk[T any](l *lists, path string, limit int, between func(page int)) []T {
	l.t.Helper()
	var all []T
	for page := 0; ; page++ {
		var items []T
		code, h := l.get(path, &items)
		if code != 200 {
			l.t.Fatalf("%s: %d", path, code)
		}
		all = append(all, items...)
		next := h.Get(wire.NextCursorHeader)
		link := h.Get("Link")
		if next == "" {
			if link != "" {
				l.t.Fatalf("%s: a Link %q and no cursor", path, link)
			}
			return all
		}
		if len(items) != limit {
			l.t.Fatalf("%s: page %d has %d items and a next page", path, page, len(items))
		}
		u, err := url.Parse(strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`))
		if err != nil || !strings.HasSuffix(link, `>; rel="next"`) || u.Query().Get("cursor") != next {
			l.t.Fatalf("Link %q, next cursor %q", link, next)
		}
		path = u.String()
		if between != nil {
			between(page)
		}
		if page > 10000 {
			l.t.Fatal("no end")
		}
	}
}

func TestPages_Deliberations(t *testing.T) {
	l := startLists(t)
	ids := l.open(250)
	// Some change status: suspended, cancelled.
	var ctl []*nats.Msg
	want := map[api.Status]map[string]bool{api.StatusOpen: {}, api.StatusSuspended: {}, api.StatusCancelled: {}}
	for i, id := range ids {
		switch i % 5 {
		case 1:
			ctl = append(ctl, ctlMsg(id, `{"op":"suspend"}`))
			want[api.StatusSuspended][id] = true
		case 2:
			ctl = append(ctl, ctlMsg(id, `{"op":"cancel","reason":"r"}`))
			want[api.StatusCancelled][id] = true
		default:
			want[api.StatusOpen][id] = true
		}
	}
	l.publish(ctl...)

	all := walk[api.Summary](l, "/api/v1/deliberations?limit=7", 7, nil)
	if len(all) != len(ids) {
		t.Fatalf("%d deliberations listed, want %d", len(all), len(ids))
	}
	seen := map[string]int{}
	for i, s := range all {
		seen[s.ID]++
		if i > 0 && s.OpenedAt >= all[i-1].OpenedAt {
			t.Fatalf("not newest opened first at %d: %d after %d", i, s.OpenedAt, all[i-1].OpenedAt)
		}
		if !want[s.Status][s.ID] {
			t.Errorf("%s listed %s", s.ID, s.Status)
		}
	}
	for i, id := range ids {
		if seen[id] != 1 {
			t.Errorf("%s listed %d times", id, seen[id])
		}
		// Opened in this order: the list is the reverse.
		if all[len(all)-1-i].ID != id {
			t.Fatalf("position %d of the list is %s, want %s", len(all)-1-i, all[len(all)-1-i].ID, id)
		}
	}
	// The default page is 100.
	var page []api.Summary
	if code, h := l.get("/api/v1/deliberations", &page); code != 200 || len(page) != wire.DefaultPageLimit || h.Get(wire.NextCursorHeader) == "" {
		t.Errorf("default page: %d, %d items, next %q", code, len(page), h.Get(wire.NextCursorHeader))
	}
	if code, h := l.get("/api/v1/deliberations?limit=1000", &page); code != 200 || len(page) != len(ids) || h.Get(wire.NextCursorHeader) != "" {
		t.Errorf("limit 1000: %d, %d items, next %q", code, len(page), h.Get(wire.NextCursorHeader))
	}

	// The status filter, over pages too.
	for _, tc := range []struct {
		query string
		want  []api.Status
	}{
		{"status=open", []api.Status{api.StatusOpen}},
		{"status=cancelled", []api.Status{api.StatusCancelled}},
		{"status=suspended,cancelled", []api.Status{api.StatusSuspended, api.StatusCancelled}},
		{"status=completed", nil},
	} {
		got := walk[api.Summary](l, "/api/v1/deliberations?limit=9&"+tc.query, 9, nil)
		n := 0
		for _, st := range tc.want {
			n += len(want[st])
		}
		if len(got) != n {
			t.Errorf("%s: %d listed, want %d", tc.query, len(got), n)
		}
		for _, s := range got {
			if !slices.Contains(tc.want, s.Status) {
				t.Errorf("%s: %s is %s", tc.query, s.ID, s.Status)
			}
		}
	}
}

func TestPages_DeliberationsStableUnderIngest(t *testing.T) {
	l := startLists(t)
	ids := l.open(120)
	before := map[string]bool{}
	for _, id := range ids {
		before[id] = true
	}
	// Between pages, new deliberations open and old ones are touched
	// (their position moves past everything listed so far).
	touch := 0
	all := walk[api.Summary](l, "/api/v1/deliberations?limit=11", 11, func(page int) {
		msgs := []*nats.Msg{}
		l.open(3 + page)
		for range 5 {
			msgs = append(msgs, ctlMsg(ids[touch%len(ids)], `{"op":"round","round":`+strconv.Itoa(1+touch/len(ids))+`}`))
			touch += 7
		}
		l.publish(msgs...)
	})
	seen := map[string]int{}
	for _, s := range all {
		seen[s.ID]++
		if seen[s.ID] > 1 {
			t.Errorf("%s listed twice", s.ID)
		}
		if !before[s.ID] {
			t.Errorf("%s was opened after the first page and listed on a later one", s.ID)
		}
	}
	for id := range before {
		if seen[id] != 1 {
			t.Errorf("%s, there at the first page, listed %d times", id, seen[id])
		}
	}
}

func TestPages_BadRequests(t *testing.T) {
	l := startLists(t)
	ids := l.open(3)
	var arts []api.ArtifactEntry
	// Cursors of other listings and deliberations.
	alice := l.artifacts(ids[0], 3)
	l.artifacts(ids[1], 3)
	_, h := l.get("/api/v1/deliberations/"+ids[0]+"/artifacts?limit=1", &arts)
	artCursor := h.Get(wire.NextCursorHeader)
	_, h = l.get("/api/v1/deliberations?limit=1", nil)
	delCursor := h.Get(wire.NextCursorHeader)
	if artCursor == "" || delCursor == "" || len(alice) != 4 {
		t.Fatalf("cursors %q %q", artCursor, delCursor)
	}
	for _, tc := range []struct {
		path, code string
	}{
		{"/api/v1/deliberations?cursor=!!!", "cursor.invalid"},
		{"/api/v1/deliberations?cursor=AAAA", "cursor.invalid"},
		{"/api/v1/deliberations?cursor=" + delCursor[:len(delCursor)-1], "cursor.invalid"},
		{"/api/v1/deliberations?cursor=" + delCursor + "A", "cursor.invalid"},
		{"/api/v1/deliberations?cursor=" + strings.Repeat("A", 40), "cursor.invalid"},
		{"/api/v1/deliberations?cursor=" + artCursor, "cursor.invalid"},
		{"/api/v1/deliberations/" + ids[1] + "/artifacts?cursor=" + artCursor, "cursor.invalid"},
		{"/api/v1/deliberations/" + ids[1] + "/recording?cursor=" + artCursor, "cursor.invalid"},
		{"/api/v1/deliberations/" + ids[0] + "/rejections?cursor=" + artCursor, "cursor.invalid"},
		{"/api/v1/rejections?cursor=" + delCursor, "cursor.invalid"},
		{"/api/v1/deliberations?limit=0", "limit.invalid"},
		{"/api/v1/deliberations?limit=-1", "limit.invalid"},
		{"/api/v1/deliberations?limit=1001", "limit.invalid"},
		{"/api/v1/deliberations?limit=ten", "limit.invalid"},
		{"/api/v1/deliberations/" + ids[0] + "/artifacts?limit=1001", "limit.invalid"},
		{"/api/v1/deliberations/" + ids[0] + "/rejections?limit=0", "limit.invalid"},
		{"/api/v1/deliberations/" + ids[0] + "/recording?limit=1001", "limit.invalid"},
		{"/api/v1/rejections?limit=5000", "limit.invalid"},
		{"/api/v1/deliberations?status=closed", "status.invalid"},
		{"/api/v1/deliberations?status=open,", "status.invalid"},
	} {
		var e struct{ Code, Error string }
		if code, _ := l.get(tc.path, &e); code != 400 || e.Code != tc.code {
			t.Errorf("%s: %d %+v, want 400 %s", tc.path, code, e, tc.code)
		}
	}
	// The good cursors still work, and an unknown deliberation is 404.
	if code, _ := l.get("/api/v1/deliberations/"+ids[0]+"/artifacts?limit=1&cursor="+artCursor, &arts); code != 200 || len(arts) != 1 || arts[0].ArtifactID != alice[1].ArtifactID {
		t.Errorf("second page: %d %+v", code, arts)
	}
	for _, p := range []string{"/artifacts", "/rejections", "/recording"} {
		if code, _ := l.get("/api/v1/deliberations/"+uuid.NewString()+p, nil); code != 404 {
			t.Errorf("%s of an unknown deliberation: %d", p, code)
		}
	}
}

// artifacts publishes n claims to deliberation id, each odd one followed by
// an objection to it. It returns the artifacts in stream order of the DAG.
func (l *lists) artifacts(id string, n int) []api.ArtifactEntry {
	l.t.Helper()
	var msgs []*nats.Msg
	var arts []*events.Artifact
	pub := func(a *events.Artifact) {
		msgs = append(msgs, &nats.Msg{Subject: wire.ArtifactSubject(id, "alice"), Data: a.Canonical})
		arts = append(arts, a)
	}
	for i := range n {
		c := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprintf("%s claim %d", id, i)}})
		pub(c)
		if i%2 == 1 {
			pub(events.MustSeal(events.Draft{Type: events.TypeObjection, Payload: events.Objection{Statement: "o" + strconv.Itoa(i)},
				References: []events.Reference{{Target: c.ID, Relation: events.ObjectsTo}}}))
		}
	}
	// Async publishes may be stored in any order: publish one by one.
	var seqs []uint64
	for _, m := range msgs {
		seqs = append(seqs, l.publish(m)...)
	}
	out := make([]api.ArtifactEntry, len(arts))
	for i, a := range arts {
		// The open is the deliberation's first message: the artifacts'
		// messages follow it, whatever else the stream holds.
		out[i] = api.ArtifactEntry{ArtifactID: a.ID, Position: seqs[i], Ordinal: uint64(i + 2), Participant: "alice", Type: string(a.Type)}
	}
	return out
}

func TestPages_ArtifactsAndRecording(t *testing.T) {
	l := startLists(t)
	id := l.open(1)[0]
	want := l.artifacts(id, 40) // 60 artifacts
	got := walk[api.ArtifactEntry](l, "/api/v1/deliberations/"+id+"/artifacts?limit=8", 8, nil)
	if !slices.Equal(got, want) {
		t.Fatalf("artifacts:\n got %v\nwant %v", got, want)
	}
	// The whole recording, and in pages.
	var full []byte
	if code, h := l.get("/api/v1/deliberations/"+id+"/recording", &full); code != 200 || h.Get(wire.NextCursorHeader) != "" {
		t.Fatalf("recording: %d %v", code, h)
	}
	lines := strings.Split(strings.TrimSuffix(string(full), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("recording has %d lines, want %d", len(lines), len(want))
	}
	for i, line := range lines {
		a, err := events.Validate([]byte(line))
		if err != nil || a.ID != want[i].ArtifactID {
			t.Fatalf("recording line %d: %v %s, want %s", i, err, line, want[i].ArtifactID)
		}
	}
	var paged []byte
	path := "/api/v1/deliberations/" + id + "/recording?limit=7"
	for n := 0; ; n++ {
		var b []byte
		code, h := l.get(path, &b)
		if code != 200 {
			t.Fatalf("%s: %d", path, code)
		}
		paged = append(paged, b...)
		next := h.Get(wire.NextCursorHeader)
		if next == "" {
			break
		}
		if c := strings.Count(string(b), "\n"); c != 7 {
			t.Fatalf("recording page %d: %d lines", n, c)
		}
		path = "/api/v1/deliberations/" + id + "/recording?limit=7&cursor=" + next
	}
	if string(paged) != string(full) {
		t.Errorf("the recording's pages are not the recording")
	}
	// An artifacts cursor goes on in the recording, and back.
	_, h := l.get("/api/v1/deliberations/"+id+"/artifacts?limit=50", nil)
	var rest []byte
	l.get("/api/v1/deliberations/"+id+"/recording?cursor="+h.Get(wire.NextCursorHeader), &rest)
	if string(rest) != strings.Join(lines[50:], "\n")+"\n" {
		t.Errorf("recording after an artifacts cursor: %q", rest)
	}
	// The client's iterator, over micro.
	c, err := client.New(l.nc, "reader")
	if err != nil {
		t.Fatal(err)
	}
	var it []api.ArtifactEntry
	for a, err := range c.Artifacts(context.Background(), id, client.ListOptions{PageSize: 9}) {
		if err != nil {
			t.Fatal(err)
		}
		it = append(it, a)
	}
	if !slices.Equal(it, want) {
		t.Errorf("client artifacts: %d, want %d", len(it), len(want))
	}
}

func TestPages_Rejections(t *testing.T) {
	l := startLists(t)
	id := l.open(1)[0]
	var msgs []*nats.Msg
	for i := range 33 {
		data := "garbage " + strconv.Itoa(i)
		if i%3 == 0 {
			data = ""
		}
		msgs = append(msgs, &nats.Msg{Subject: wire.ArtifactSubject(id, "alice"), Data: []byte(data)})
	}
	seqs := l.publish(msgs...)
	slices.Sort(seqs)
	var all []api.Rejection
	path := "/api/v1/deliberations/" + id + "/rejections?limit=5"
	for n := 0; ; n++ {
		var page api.RejectionList
		code, h := l.get(path, &page)
		sum := 0
		for _, n := range page.ByCode {
			sum += n
		}
		if code != 200 || page.Deliberation != id || page.Total != 33 || page.Kept != 33 || page.ByCode["json.empty"] != 11 || sum != 33 {
			t.Fatalf("%s: %d %+v", path, code, page)
		}
		if page.NextCursor != h.Get(wire.NextCursorHeader) {
			t.Fatalf("next_cursor %q, header %q", page.NextCursor, h.Get(wire.NextCursorHeader))
		}
		all = append(all, page.Rejections...)
		if page.NextCursor == "" {
			break
		}
		if len(page.Rejections) != 5 {
			t.Fatalf("page %d: %d rejections", n, len(page.Rejections))
		}
		path = "/api/v1/deliberations/" + id + "/rejections?limit=5&cursor=" + page.NextCursor
	}
	var got []uint64
	for _, r := range all {
		got = append(got, r.Position)
	}
	if !slices.Equal(got, seqs) {
		t.Errorf("rejections at %v, want %v", got, seqs)
	}

	// The unrouted: messages of deliberations never opened, over every
	// shard.
	msgs = msgs[:0]
	for i := range 45 {
		msgs = append(msgs, &nats.Msg{Subject: wire.ArtifactSubject(uuid.NewString(), "alice"), Data: []byte("x" + strconv.Itoa(i))})
	}
	useqs := l.publish(msgs...)
	slices.Sort(useqs)
	var ugot []uint64
	path = "/api/v1/rejections?limit=6"
	for {
		var page api.RejectionList
		code, h := l.get(path, &page)
		if code != 200 || page.Total != 45 || page.Kept != 45 || page.ByCode[projector.CodeNotOpen] != 45 || page.NextCursor != h.Get(wire.NextCursorHeader) {
			t.Fatalf("%s: %d %+v", path, code, page)
		}
		for _, r := range page.Rejections {
			ugot = append(ugot, r.Position)
		}
		if page.NextCursor == "" {
			break
		}
		path = "/api/v1/rejections?limit=6&cursor=" + page.NextCursor
	}
	if !slices.Equal(ugot, useqs) {
		t.Errorf("unrouted at %v, want %v", ugot, useqs)
	}
	// The empty list is an empty array.
	var empty map[string]any
	other := l.open(1)[0]
	if l.get("/api/v1/deliberations/"+other+"/rejections", &empty); fmt.Sprint(empty["rejections"]) != "[]" {
		t.Errorf("no rejections: %v", empty)
	}
}

// microPage asks a micro listing for a page.
func microPage(t *testing.T, nc *nats.Conn, endpoint string, req map[string]any, v any) (next string, errCode string) {
	t.Helper()
	b, _ := json.Marshal(req)
	msg, err := nc.Request(wire.MicroPrefix+"."+endpoint, b, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st := msg.Header.Get("Nats-Service-Error-Code"); st != "" {
		var e struct{ Code string }
		json.Unmarshal(msg.Data, &e)
		return "", st + " " + e.Code
	}
	if err := json.Unmarshal(msg.Data, v); err != nil {
		t.Fatalf("%s: %v: %.200s", endpoint, err, msg.Data)
	}
	return msg.Header.Get(wire.NextCursorHeader), ""
}

func TestPages_Micro(t *testing.T) {
	l := startLists(t)
	ids := l.open(60)
	slices.Reverse(ids) // newest first
	var got []string
	req := map[string]any{"limit": 7}
	for {
		var page []api.Summary
		next, e := microPage(t, l.nc, "deliberations", req, &page)
		if e != "" {
			t.Fatal(e)
		}
		for _, s := range page {
			got = append(got, s.ID)
		}
		if next == "" {
			break
		}
		req["cursor"] = next
	}
	if !slices.Equal(got, ids) {
		t.Errorf("micro list: %d, want %d, in order", len(got), len(ids))
	}
	var page []api.Summary
	if next, e := microPage(t, l.nc, "deliberations", map[string]any{}, &page); e != "" || len(page) != 60 || next != "" {
		t.Errorf("micro list, no paging asked: %s %d %q", e, len(page), next)
	}
	l.publish(ctlMsg(ids[3], `{"op":"cancel"}`))
	if _, e := microPage(t, l.nc, "deliberations", map[string]any{"status": "cancelled"}, &page); e != "" || len(page) != 1 || page[0].ID != ids[3] {
		t.Errorf("micro status filter: %s %+v", e, page)
	}
	for _, tc := range []struct {
		endpoint string
		req      map[string]any
		want     string
	}{
		{"deliberations", map[string]any{"cursor": "nope"}, "400 cursor.invalid"},
		{"deliberations", map[string]any{"limit": 1001}, "400 limit.invalid"},
		{"deliberations", map[string]any{"limit": -3}, "400 limit.invalid"},
		{"deliberations", map[string]any{"status": "shut"}, "400 status.invalid"},
		{"artifacts", map[string]any{"id": ids[0], "cursor": "AAAAAAAAAA"}, "400 cursor.invalid"},
		{"artifacts", map[string]any{"id": uuid.NewString()}, "404 not_found"},
		{"rejections", map[string]any{"id": ids[0], "limit": 2000}, "400 limit.invalid"},
		{"unrouted", map[string]any{"cursor": "x"}, "400 cursor.invalid"},
	} {
		var v any
		if _, e := microPage(t, l.nc, tc.endpoint, tc.req, &v); e != tc.want {
			t.Errorf("%s %v: %q, want %q", tc.endpoint, tc.req, e, tc.want)
		}
	}
	// Artifacts, rejections and unrouted pages, as over HTTP.
	want := l.artifacts(ids[0], 10)
	var arts []api.ArtifactEntry
	req = map[string]any{"id": ids[0], "limit": 4}
	for {
		var page []api.ArtifactEntry
		next, e := microPage(t, l.nc, "artifacts", req, &page)
		if e != "" {
			t.Fatal(e)
		}
		arts = append(arts, page...)
		if next == "" {
			break
		}
		req["cursor"] = next
	}
	if !slices.Equal(arts, want) {
		t.Errorf("micro artifacts %v, want %v", arts, want)
	}
	l.publish(&nats.Msg{Subject: wire.ArtifactSubject(ids[0], "alice"), Data: []byte("x")}, &nats.Msg{Subject: wire.ArtifactSubject(ids[0], "alice"), Data: []byte("y")})
	var rej api.RejectionList
	if next, e := microPage(t, l.nc, "rejections", map[string]any{"id": ids[0], "limit": 1}, &rej); e != "" || len(rej.Rejections) != 1 || rej.Total != 2 || next == "" || rej.NextCursor != next {
		t.Errorf("micro rejections: %s %+v %q", e, rej, next)
	}
	if next, e := microPage(t, l.nc, "rejections", map[string]any{"id": ids[0], "cursor": rej.NextCursor}, &rej); e != "" || len(rej.Rejections) != 1 || next != "" {
		t.Errorf("micro rejections, second page: %s %+v %q", e, rej, next)
	}
	l.publish(&nats.Msg{Subject: wire.ArtifactSubject(uuid.NewString(), "alice"), Data: []byte("x")})
	if next, e := microPage(t, l.nc, "unrouted", map[string]any{}, &rej); e != "" || len(rej.Rejections) != 1 || rej.Total != 1 || next != "" {
		t.Errorf("micro unrouted: %s %+v", e, rej)
	}
}

func TestPages_ClientDeliberations(t *testing.T) {
	l := startLists(t)
	ids := l.open(45)
	slices.Reverse(ids)
	c, err := client.New(l.nc, "reader")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var got []string
	for s, err := range c.Deliberations(ctx, client.ListOptions{PageSize: 10}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, s.ID)
	}
	if !slices.Equal(got, ids) {
		t.Errorf("client list %d, want %d", len(got), len(ids))
	}
	// Breaking out stops it; an error ends it.
	n := 0
	for range c.Deliberations(ctx, client.ListOptions{PageSize: 3}) {
		n++
		if n == 4 {
			break
		}
	}
	var errs []error
	for _, err := range c.Deliberations(ctx, client.ListOptions{Status: []api.Status{"nope"}}) {
		errs = append(errs, err)
	}
	var se *client.ServiceError
	if len(errs) != 1 || !errors.As(errs[0], &se) || se.Code != "status.invalid" {
		t.Errorf("errors %v", errs)
	}
	l.publish(ctlMsg(ids[0], `{"op":"suspend"}`), ctlMsg(ids[1], `{"op":"cancel"}`))
	got = got[:0]
	for s, err := range c.Deliberations(ctx, client.ListOptions{Status: []api.Status{api.StatusSuspended, api.StatusCancelled}}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, s.ID)
	}
	if !slices.Equal(got, ids[:2]) {
		t.Errorf("client status filter: %v", got)
	}
	// Rejections page by page.
	var msgs []*nats.Msg
	for i := range 12 {
		msgs = append(msgs, &nats.Msg{Subject: wire.ArtifactSubject(ids[2], "alice"), Data: []byte("bad " + strconv.Itoa(i))})
	}
	seqs := l.publish(msgs...)
	slices.Sort(seqs)
	var pos []uint64
	for r, err := range c.Rejections(ctx, ids[2], client.ListOptions{PageSize: 5}) {
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, r.Position)
	}
	if !slices.Equal(pos, seqs) {
		t.Errorf("client rejections %v, want %v", pos, seqs)
	}
}

// TestPages_Concurrent reads pages while deliberations open and fill,
// under the race detector in CI.
func TestPages_Concurrent(t *testing.T) {
	l := startLists(t)
	ids := l.open(50)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			l.open(5)
			l.publish(&nats.Msg{Subject: wire.ArtifactSubject(ids[i%len(ids)], "alice"), Data: []byte("bad")})
		}
	}()
	for range 5 {
		all := walk[api.Summary](l, "/api/v1/deliberations?limit=13", 13, nil)
		n := 0
		seen := map[string]bool{}
		for _, s := range all {
			if seen[s.ID] {
				t.Errorf("%s twice", s.ID)
			}
			seen[s.ID] = true
		}
		for _, id := range ids {
			if seen[id] {
				n++
			}
		}
		if n != len(ids) {
			t.Errorf("%d of the first %d listed", n, len(ids))
		}
	}
	close(stop)
	wg.Wait()
}
