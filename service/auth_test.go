package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/httpapi"
	"github.com/parley-engine/parley/internal/jstest"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

func startWith(t *testing.T, cfg service.Config) *service.Service {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.HTTP == "" {
		cfg.HTTP = "127.0.0.1:0"
	}
	s, err := service.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// askPrincipal opens a deliberation in which judge asks the principal;
// it returns the deliberation and the envelope's digest.
func askPrincipal(t *testing.T, nc *nats.Conn) (string, string) {
	t.Helper()
	return askPrincipalOf(t, nc, "")
}

// askPrincipalOf is askPrincipal in a deliberation whose charter names
// principal ("" : the default).
func askPrincipalOf(t *testing.T, nc *nats.Conn, principal string) (string, string) {
	t.Helper()
	var envs struct {
		Vectors []struct{ Input json.RawMessage }
	}
	b, _ := os.ReadFile("../binding/testdata/envelopes.json")
	json.Unmarshal(b, &envs)
	env, err := binding.ParseEnvelope(envs.Vectors[0].Input)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	judge, _ := client.New(nc, "judge")
	id, err := judge.Open(ctx, client.Charter{Title: "share?", Principal: principal})
	if err != nil {
		t.Fatal(err)
	}
	claim, _, _ := judge.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Share the dates only."}})
	_, ack, err := judge.Publish(ctx, id, events.Draft{Type: events.TypeDecision,
		Payload:    events.Decision{Outcome: "Ask the principal.", Status: events.Provisional, ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}},
		Extensions: map[string]any{binding.ExtEnvelope: envs.Vectors[0].Input}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := judge.WaitPosition(ctx, id, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	return id, env.Digest.String()
}

type httpResult struct {
	status int
	header http.Header
	body   []byte
	json   map[string]any
}

func do(t *testing.T, req *http.Request) httpResult {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 20 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := httpResult{status: resp.StatusCode, header: resp.Header}
	r.body, _ = io.ReadAll(resp.Body)
	json.Unmarshal(r.body, &r.json)
	return r
}

func resolution(digest string) string {
	return `{"binding_moment_resolution":{"envelope_digest":"` + digest + `","resolution":"declined"}}`
}

// stillOpen checks that nothing was published in deliberation id since
// position last and that its binding moment is open.
func stillOpen(t *testing.T, s *service.Service, id string, last uint64) {
	t.Helper()
	// A refused resolution is refused before any publish; the pause
	// gives one made behind the answer's back the time to land.
	time.Sleep(100 * time.Millisecond)
	info, err := s.Stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.LastSeq != last {
		t.Errorf("the stream moved from %d to %d", last, info.State.LastSeq)
	}
	moments, _ := s.Queries.Bindings(context.Background(), id)
	if len(moments) != 1 || moments[0].Status != "open" {
		t.Errorf("moments %+v", moments)
	}
}

func lastSeq(t *testing.T, s *service.Service) uint64 {
	t.Helper()
	info, err := s.Stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

// Attack: anyone who reaches the HTTP port resolves a binding moment as
// the principal. Without the engine's token the API answers 401 and
// publishes nothing; a wrong token, another scheme, or the token in the
// address of a POST fare no better; ?as= cannot choose another
// participant; the right token resolves, as the participant it stands for.
func TestHTTPAuth_Resolve(t *testing.T) {
	s := startWith(t, service.Config{})
	nc := dial(t, s)
	id, digest := askPrincipal(t, nc)
	url := "http://" + s.HTTPAddr() + "/api/v1/deliberations/" + id + "/bindings/" + digest
	post := func(target, auth string) httpResult {
		req, _ := http.NewRequest(http.MethodPost, target, strings.NewReader(resolution(digest)))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		return do(t, req)
	}
	token := s.Credentials().HTTPToken
	last := lastSeq(t, s)
	for _, c := range []struct{ name, target, auth string }{
		{"no token", url, ""},
		{"wrong token", url, "Bearer " + strings.Repeat("0", len(token))},
		{"a prefix of the token", url, "Bearer " + token[:len(token)-1]},
		{"basic", url, "Basic " + token},
		{"token in a POST's address", url + "?token=" + token, ""},
	} {
		r := post(c.target, c.auth)
		if r.status != http.StatusUnauthorized || r.json["code"] != "unauthorized" || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: %d %s", c.name, r.status, r.body)
		}
	}
	stillOpen(t, s, id, last)
	if r := post(url+"?as=mallory", "Bearer "+token); r.status != http.StatusForbidden || r.json["code"] != "forbidden" {
		t.Errorf("?as=mallory: %d %s", r.status, r.body)
	}
	stillOpen(t, s, id, last)
	// Reads on loopback need no token.
	if r := do(t, mustRequest(http.MethodGet, "http://"+s.HTTPAddr()+"/api/v1/deliberations/"+id+"/bindings")); r.status != http.StatusOK {
		t.Errorf("read: %d %s", r.status, r.body)
	}
	r := post(url+"?as="+wire.PrincipalToken, "Bearer "+token)
	if r.status != http.StatusCreated || r.json["participant"] != wire.PrincipalToken || r.json["artifact_type"] != "CLAIM" {
		t.Fatalf("with the token: %d %s", r.status, r.body)
	}
	m, err := s.Stream.GetLastMsgForSubject(context.Background(), wire.ArtifactSubject(id, wire.PrincipalToken))
	if err != nil || m.Sequence != uint64(r.json["position"].(float64)) {
		t.Errorf("the resolution is not on the record as principal: %v", err)
	}
}

func mustRequest(method, url string) *http.Request {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		panic(err)
	}
	return req
}

// Tokens given to the engine stand for their participants: a resolution
// is published as the one its token names, in a deliberation whose
// charter names it the principal (the token of another participant is
// refused there, with nothing published), and participants without
// credentials may not publish as any of them over NATS.
func TestHTTPAuth_TokensStandForParticipants(t *testing.T) {
	ops := strings.Repeat("a", 24)
	carol := strings.Repeat("c", 24)
	s := startWith(t, service.Config{HTTPTokens: []httpapi.Token{{Secret: ops, Participant: wire.PrincipalToken}, {Secret: carol, Participant: "carol"}}})
	if c := s.Credentials(); c.HTTPToken != "" || c.HTTPParticipant != "" {
		t.Errorf("a given token was written to the credentials file: %+v", c)
	}
	nc := dial(t, s)
	id, digest := askPrincipalOf(t, nc, "carol")
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.HTTPAddr()+"/api/v1/deliberations/"+id+"/bindings/"+digest+"?as=principal", strings.NewReader(resolution(digest)))
	req.Header.Set("Authorization", "Bearer "+carol)
	if r := do(t, req); r.status != http.StatusForbidden {
		t.Errorf("carol's token as principal: %d %s", r.status, r.body)
	}
	req, _ = http.NewRequest(http.MethodPost, "http://"+s.HTTPAddr()+"/api/v1/deliberations/"+id+"/bindings/"+digest, strings.NewReader(resolution(digest)))
	req.Header.Set("Authorization", "Bearer "+ops)
	if r := do(t, req); r.status != http.StatusForbidden || r.json["code"] != projector.CodeBindingNotPrincipal {
		t.Errorf("the principal token's resolution where carol is the principal: %d %s", r.status, r.body)
	}
	req, _ = http.NewRequest(http.MethodPost, "http://"+s.HTTPAddr()+"/api/v1/deliberations/"+id+"/bindings/"+digest, strings.NewReader(resolution(digest)))
	req.Header.Set("Authorization", "Bearer "+carol)
	if r := do(t, req); r.status != http.StatusCreated || r.json["participant"] != "carol" {
		t.Fatalf("carol's token: %d %s", r.status, r.body)
	}
	o := connectOutsider(t, s.NATSURL(), s.Participant())
	subject := wire.ArtifactSubject(id, "carol")
	short, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := o.js.Publish(short, subject, []byte(`{}`)); err == nil || !o.violated(subject) {
		t.Errorf("a participant published as carol: %v", err)
	}
}

// The browser's way in: GET ?token= sets an HttpOnly, SameSite=Strict
// cookie of this engine's port and sends the browser to the same address
// without the token; a wrong token gets the refusal page. A POST with the
// cookie resolves only from the engine's own pages: another origin (even
// another port of the same host, which the cookie does not tell apart), a
// forged Origin or none at all is refused, and nothing is published.
func TestHTTPAuth_BrowserCookieAndCrossSite(t *testing.T) {
	s := startWith(t, service.Config{})
	nc := dial(t, s)
	id, digest := askPrincipal(t, nc)
	base := "http://" + s.HTTPAddr()
	token := s.Credentials().HTTPToken
	r := do(t, mustRequest(http.MethodGet, base+"/bind/"+id+"?token="+token+"&x=1"))
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/bind/"+id+"?x=1" {
		t.Fatalf("sign-in: %d %v", r.status, r.header)
	}
	var cookie *http.Cookie
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		cookie = c
	}
	_, port, _ := net.SplitHostPort(s.HTTPAddr())
	if cookie == nil || cookie.Name != "parley_token_"+port || cookie.Value != token || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" {
		t.Fatalf("cookie %+v", cookie)
	}
	if r := do(t, mustRequest(http.MethodGet, base+"//evil.example/x?token="+token)); r.status != http.StatusSeeOther || r.header.Get("Location") != "/evil.example/x" {
		t.Errorf("sign-in redirect off the server: %d %v", r.status, r.header.Get("Location"))
	}
	if r := do(t, mustRequest(http.MethodGet, base+"/bind/"+id+"?token=wrong")); r.status != http.StatusUnauthorized ||
		!strings.Contains(string(r.body), `data-code="unauthorized"`) || len(r.header.Values("Set-Cookie")) != 0 {
		t.Errorf("a wrong token: %d %s", r.status, r.body)
	}

	form := url.Values{"resolution": {"declined"}}.Encode()
	post := func(header map[string]string, withCookie bool) httpResult {
		req, _ := http.NewRequest(http.MethodPost, base+"/bind/"+id+"/"+digest, strings.NewReader(form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		if withCookie {
			req.AddCookie(cookie)
		}
		return do(t, req)
	}
	last := lastSeq(t, s)
	if r := post(map[string]string{"Origin": base}, false); r.status != http.StatusUnauthorized || !strings.Contains(string(r.body), "Not signed in") {
		t.Errorf("without the cookie: %d %s", r.status, r.body)
	}
	other := "http://127.0.0.1:" + strconv.Itoa(freePort(t))
	for _, h := range []map[string]string{
		{"Origin": "http://evil.example"},
		{"Origin": other},
		{"Origin": "null"},
		{"Referer": other + "/page"},
		{},
	} {
		if r := post(h, true); r.status != http.StatusForbidden || !strings.Contains(string(r.body), "cross-site request refused") {
			t.Errorf("%v: %d %s", h, r.status, r.body)
		}
	}
	stillOpen(t, s, id, last)
	if r := post(map[string]string{"Origin": base}, true); r.status != http.StatusOK || !bytes.Contains(r.body, []byte(`data-artifact-type="CLAIM"`)) {
		t.Fatalf("from the engine's page: %d %s", r.status, r.body)
	}
	// The index lists what waits for the principal: nothing now.
	req := mustRequest(http.MethodGet, base+"/bind")
	req.AddCookie(cookie)
	if r := do(t, req); r.status != http.StatusOK || !bytes.Contains(r.body, []byte(`id="none"`)) {
		t.Errorf("index: %d %s", r.status, r.body)
	}
	id2, _ := askPrincipal(t, nc)
	if r := do(t, req); r.status != http.StatusOK || !bytes.Contains(r.body, []byte(`href="/bind/`+id2+`"`)) || bytes.Contains(r.body, []byte(id+`"`)) {
		t.Errorf("index: %d %s", r.status, r.body)
	}
}

// Reads: open on loopback (under a loopback name only: a page of another
// site whose name resolves to 127.0.0.1 reads nothing), and behind the
// token beyond loopback unless made public; /healthz and /metrics stay
// open.
func TestHTTPAuth_Reads(t *testing.T) {
	s := startWith(t, service.Config{})
	base := "http://" + s.HTTPAddr()
	if r := do(t, mustRequest(http.MethodGet, base+"/api/v1/deliberations")); r.status != http.StatusOK {
		t.Errorf("loopback read: %d", r.status)
	}
	req := mustRequest(http.MethodGet, base+"/api/v1/deliberations")
	req.Host = "rebound.example:8080"
	if r := do(t, req); r.status != http.StatusForbidden || r.json["code"] != "forbidden" {
		t.Errorf("another host name: %d %s", r.status, r.body)
	}
	req.Header.Set("Authorization", "Bearer "+s.Credentials().HTTPToken)
	if r := do(t, req); r.status != http.StatusOK {
		t.Errorf("another host name with the token: %d %s", r.status, r.body)
	}

	wide := startWith(t, service.Config{HTTP: "0.0.0.0:0"})
	_, port, _ := net.SplitHostPort(wide.HTTPAddr())
	base = "http://127.0.0.1:" + port
	if got := wide.Credentials().HTTPURL; got != base {
		t.Errorf("HTTP URL %s", got)
	}
	for _, path := range []string{"/api/v1/deliberations", "/api/v1/rejections", "/bind"} {
		if r := do(t, mustRequest(http.MethodGet, base+path)); r.status != http.StatusUnauthorized {
			t.Errorf("%s beyond loopback without the token: %d", path, r.status)
		}
		req := mustRequest(http.MethodGet, base+path)
		req.Header.Set("Authorization", "Bearer "+wide.Credentials().HTTPToken)
		if r := do(t, req); r.status != http.StatusOK {
			t.Errorf("%s with the token: %d %s", path, r.status, r.body)
		}
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		if r := do(t, mustRequest(http.MethodGet, base+path)); r.status != http.StatusOK {
			t.Errorf("%s: %d", path, r.status)
		}
	}
	public := startWith(t, service.Config{HTTP: "0.0.0.0:0", HTTPPublicReads: true})
	_, port, _ = net.SplitHostPort(public.HTTPAddr())
	if r := do(t, mustRequest(http.MethodGet, "http://127.0.0.1:"+port+"/api/v1/deliberations")); r.status != http.StatusOK {
		t.Errorf("public reads: %d", r.status)
	}
	req, _ = http.NewRequest(http.MethodPost, "http://127.0.0.1:"+port+"/api/v1/deliberations/x/bindings/y", strings.NewReader("{}"))
	if r := do(t, req); r.status != http.StatusUnauthorized {
		t.Errorf("public reads, a write: %d", r.status)
	}
}

func freePort(t *testing.T) int { return jstest.FreePort(t) }
