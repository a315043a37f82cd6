package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/health"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// engine is an `engine serve` process on a data directory of its own, so
// that its RSS is the engine's alone.
type engine struct {
	cmd      *exec.Cmd
	dir      string
	natsURL  string
	httpAddr string
	token    string // the HTTP token it drew (credentials.json)
	// user and password are the embedded default's participant user
	// (credentials.json): what the honest relays and the setups connect
	// with, and the attacker too when it is an insider.
	user, password string
	// insider: the attacker holds the participant's password (it read
	// the data directory); otherwise it connects without credentials.
	insider bool
	stderr  *os.File
}

// participant connects as the participant user.
func (e *engine) participant(opts ...nats.Option) (*nats.Conn, error) {
	return nats.Connect(e.natsURL, append(opts, nats.UserInfo(e.user, e.password))...)
}

// attacker connects as the attacker: the participant when it is an
// insider, a client without credentials otherwise.
func (e *engine) attacker(opts ...nats.Option) (*nats.Conn, error) {
	if e.insider {
		return e.participant(opts...)
	}
	return nats.Connect(e.natsURL, opts...)
}

// recorded returns how many messages the engine has refused so far, of
// every code (the sum of parley_rejections_total): what an attacker made
// the record keep, the honest relays refusing nothing.
func (e *engine) recorded() int64 { return e.metricSum("parley_rejections_total") }

// buildEngine builds cmd/engine into dir and returns the binary's path.
func buildEngine(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	bin := filepath.Join(dir, "engine")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/engine")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/engine: %v\n%s", err, b)
	}
	return bin, nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startEngine starts `engine serve` with a fresh data directory under dir,
// its open-descriptor limit set to fds (soft and hard, through prlimit; 0:
// the soak's own), and waits until /healthz answers 200.
func startEngine(ctx context.Context, bin, dir string, fds int, extra ...string) (*engine, error) {
	data, err := os.MkdirTemp(dir, "data-")
	if err != nil {
		return nil, err
	}
	natsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := append([]string{"serve", "--data", data, "--listen", natsAddr, "--http", httpAddr, "--log-level", "warn"}, extra...)
	name := bin
	if fds > 0 {
		p, err := exec.LookPath("prlimit")
		if err != nil {
			return nil, errors.New("-engine-fds needs prlimit (util-linux)")
		}
		name, args = p, append([]string{"--nofile=" + strconv.Itoa(fds) + ":" + strconv.Itoa(fds), "--", bin}, args...)
	}
	logf, err := os.Create(filepath.Join(data, "..", filepath.Base(data)+".log"))
	if err != nil {
		return nil, err
	}
	e := &engine{dir: data, natsURL: "nats://" + natsAddr, httpAddr: httpAddr, stderr: logf}
	// prlimit execs the engine: the process is the engine's.
	e.cmd = exec.Command(name, args...)
	e.cmd.Stdout, e.cmd.Stderr = logf, logf
	if err := e.cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(time.Minute)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := hc.Get("http://" + httpAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			e.stop()
			return nil, fmt.Errorf("the engine did not become healthy (log: %s): %v", logf.Name(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var creds service.Credentials
	b, err := os.ReadFile(filepath.Join(data, service.CredentialsFile))
	if err == nil {
		err = json.Unmarshal(b, &creds)
	}
	if err != nil {
		e.stop()
		return nil, fmt.Errorf("credentials: %w", err)
	}
	e.token, e.user, e.password = creds.HTTPToken, creds.NATSParticipantUser, creds.NATSParticipantPassword
	return e, nil
}

func (e *engine) stop() {
	e.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { e.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		e.cmd.Process.Kill()
		<-done
	}
	e.stderr.Close()
}

// memory returns the engine's resident set and its peak, in bytes.
func (e *engine) memory() (rss, peak int64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(e.cmd.Process.Pid) + "/status")
	if err != nil {
		return 0, 0
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return rss, peak
}

// descriptors returns how many descriptors the engine holds open.
func (e *engine) descriptors() int {
	ents, _ := os.ReadDir("/proc/" + strconv.Itoa(e.cmd.Process.Pid) + "/fd")
	return len(ents)
}

// freshNATS says whether a new NATS client connects and reads the stream.
func (e *engine) freshNATS() string {
	nc, err := nats.Connect(e.natsURL, nats.Timeout(5*time.Second))
	if err != nil {
		return "no: " + err.Error()
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.Stream(ctx, wire.StreamName); err != nil {
		return "no: stream info: " + err.Error()
	}
	return "yes"
}

// freshHTTP says what a new HTTP client gets for /healthz: "200", or the
// refusal's status, code and Retry-After ("no: …" when it gets no answer).
func (e *engine) freshHTTP() string {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + e.httpAddr + "/healthz")
	if err != nil {
		return "no: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		var ae struct{ Code string }
		json.Unmarshal(b, &ae)
		return fmt.Sprintf("%d %s, Retry-After %s", resp.StatusCode, ae.Code, resp.Header.Get("Retry-After"))
	}
	var h health.Health
	json.Unmarshal(b, &h)
	s := "200"
	if len(h.BoundsHit) > 0 {
		s += " (bounds hit: " + strings.Join(h.BoundsHit, ", ") + ")"
	}
	return s
}

// heap returns the engine's Go heap in use (go_memstats_heap_inuse_bytes
// of its /metrics), in bytes; 0 when it cannot say.
func (e *engine) heap() int64 { return e.metric("go_memstats_heap_inuse_bytes") }

// metrics calls fn with each line of the engine's /metrics until fn
// returns false (nothing when it cannot be read).
func (e *engine) metrics(fn func(line string) bool) {
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + e.httpAddr + "/metrics")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && fn(sc.Text()) {
	}
}

// metricSum returns the sum of every series of the metric name (labelled
// or not) of the engine's /metrics; 0 when it cannot say.
func (e *engine) metricSum(name string) int64 {
	var sum float64
	e.metrics(func(line string) bool {
		rest, ok := strings.CutPrefix(line, name)
		if ok && (rest == "" || rest[0] == ' ' || rest[0] == '{') {
			if i := strings.LastIndexByte(line, ' '); i > 0 {
				f, _ := strconv.ParseFloat(line[i+1:], 64)
				sum += f
			}
		}
		return true
	})
	return int64(sum)
}

// metric returns the value of an unlabelled series of the engine's
// /metrics; 0 when it cannot say.
func (e *engine) metric(name string) int64 {
	var v float64
	e.metrics(func(line string) bool {
		s, ok := strings.CutPrefix(line, name+" ")
		if ok {
			v, _ = strconv.ParseFloat(s, 64)
		}
		return !ok
	})
	return int64(v)
}
