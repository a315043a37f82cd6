package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/service"
)

// A relay whose decider asks the principal, run in a real terminal (tmux)
// against an engine it did not start: it prints a ready-to-open address
// (the engine's credentials file, --data, gives the token); opening it
// signs a browser in on the deliberation's /bind page, with its forms;
// the option chosen there is named from 1, as the page numbers it. Piped,
// the same run names the credentials file and prints no token.
func TestRun_BindAddress(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv("PARLEY_REQUIRE_TMUX") != "" {
			t.Fatal("tmux is required and not installed")
		}
		t.Skip("SKIPPED: no tmux (apt-get install tmux); the relay's terminal output is not tested")
	}
	bin := filepath.Join(t.TempDir(), "relay")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dataDir := t.TempDir()
	s, err := service.Start(ctx, service.Config{DataDir: dataDir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, err := nats.Connect(s.NATSURL(), s.Participant())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	announced, _ := nc.SubscribeSync("parley.*.binding")
	nc.Flush()
	next := func() binding.Announcement {
		t.Helper()
		m, err := announced.NextMsg(60 * time.Second)
		if err != nil {
			t.Fatal("no binding moment announced:", err)
		}
		var a binding.Announcement
		json.Unmarshal(m.Data, &a)
		return a
	}
	config, _ := filepath.Abs("../../examples/relay/principal.json")
	host := s.HTTPAddr()

	name := "parley-relay-bind"
	cmd := bin + " run --nats " + s.NATSURL() + " --data " + dataDir + " --dir " + t.TempDir() + " " + config + "; sleep 60"
	if out, err := exec.Command(tmux, "new-session", "-d", "-s", name, "-x", "400", "-y", "50", cmd).CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command(tmux, "kill-session", "-t", name).Run() })
	screen := func() string {
		out, _ := exec.Command(tmux, "capture-pane", "-p", "-J", "-t", name).Output()
		return string(out)
	}
	waitFor := func(re *regexp.Regexp) []string {
		t.Helper()
		var out string
		var m []string
		if !eventually.Within(60*time.Second, func() bool { out = screen(); m = re.FindStringSubmatch(out); return m != nil }) {
			t.Fatalf("the terminal never showed %s:\n%s", re, out)
		}
		return m
	}
	a := next()
	m := waitFor(regexp.MustCompile(`answer at (http://` + regexp.QuoteMeta(host) + `/bind/` + a.Deliberation + `\?token=[0-9a-f]+) `))
	// The address, opened as a browser opens it: signed in, on the
	// deliberation's page, the token gone from the address.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	page.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.Request.URL.String() != "http://"+host+"/bind/"+a.Deliberation || !strings.Contains(page.String(), `id="decline"`) ||
		strings.Contains(page.String(), `id="sign-in"`) {
		t.Fatalf("opening %s: landed on %s (%s):\n%s", m[1], resp.Request.URL, resp.Status, page.String())
	}
	// Choose the first option on that page.
	req, _ := http.NewRequest(http.MethodPost, "http://"+host+"/bind/"+a.Deliberation+"/"+a.EnvelopeDigest,
		strings.NewReader(url.Values{"resolution": {"option"}, "option_idx": {"0"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://"+host)
	if resp, err = browser.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("choosing on the page: %s", resp.Status)
	}
	waitFor(regexp.MustCompile(`resolved by principal: option: option 1: Share dates only`))

	// Piped: the page and the credentials file, no token.
	var out, errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"run", "--nats", s.NATSURL(), "--data", dataDir, "--dir", t.TempDir(), "--quiet", config}, &out, &errb)
	}()
	a = next()
	decline := `{"binding_moment_resolution":{"envelope_digest":"` + a.EnvelopeDigest + `","resolution":"declined"}}`
	req, _ = http.NewRequest(http.MethodPost, "http://"+host+"/api/v1/deliberations/"+a.Deliberation+"/bindings/"+a.EnvelopeDigest, strings.NewReader(decline))
	req.Header.Set("Authorization", "Bearer "+s.Credentials().HTTPToken)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	<-done
	want := "answer at http://" + host + "/bind/" + a.Deliberation + " (sign in first: open the sign_in_url of " + filepath.Join(dataDir, service.CredentialsFile)
	if !strings.Contains(errb.String(), want) || strings.Contains(errb.String()+out.String(), s.Credentials().HTTPToken) {
		t.Fatalf("piped, want %q and no token:\n%s", want, errb.String())
	}

	// Stopped (Ctrl-C) while it waits: it says so, not that the
	// principal_timeout passed.
	var notices lockedBuffer
	stopped, stop := context.WithCancel(ctx)
	go func() {
		done <- Run(stopped, []string{"run", "--nats", s.NATSURL(), "--data", dataDir, "--dir", t.TempDir(), "--quiet", config}, io.Discard, &notices)
	}()
	next()
	if !eventually.Within(30*time.Second, func() bool { return strings.Contains(notices.String(), "answer at ") }) {
		t.Fatalf("no /bind address:\n%s", notices.String())
	}
	stop()
	if code := <-done; code != 2 || !strings.Contains(notices.String(), "relay: stopped while waiting for principal's resolution") ||
		strings.Contains(notices.String(), "principal_timeout") {
		t.Fatalf("stopped: exit %d\n%s", code, notices.String())
	}
}

// lockedBuffer is a buffer written by one goroutine and read by another.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
