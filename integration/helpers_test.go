// Package integration holds parley's end-to-end tests: real NATS servers,
// the engine as a separate process, kills and restarts.
package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/internal/jstest"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/termination"
	"github.com/parley-engine/parley/wire"
)

var engineBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "parley-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	engineBin = filepath.Join(dir, "engine")
	if out, err := exec.Command("go", "build", "-o", engineBin, "../cmd/engine").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build engine: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int { return jstest.FreePort(t) }

// engineProc is the engine running as a separate process.
type engineProc struct {
	t         testing.TB
	cmd       *exec.Cmd
	dataDir   string
	natsPort  int
	httpPort  int
	extraArgs []string
}

func (e *engineProc) start() {
	e.t.Helper()
	args := append([]string{"serve", "--data", e.dataDir,
		"--listen", "127.0.0.1:" + strconv.Itoa(e.natsPort), "--http", "127.0.0.1:" + strconv.Itoa(e.httpPort),
		"--snapshot-every", "100ms", "--log-level", "warn"}, e.extraArgs...)
	e.cmd = exec.Command(engineBin, args...)
	logf, err := os.OpenFile(filepath.Join(e.dataDir, "..", "engine.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		e.t.Fatal(err)
	}
	e.cmd.Stdout, e.cmd.Stderr = logf, logf
	if err := e.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get(e.url("/healthz")); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatal("engine did not become healthy")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *engineProc) kill() {
	e.cmd.Process.Signal(syscall.SIGKILL)
	e.cmd.Wait()
}

func (e *engineProc) stop() {
	e.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { e.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		e.t.Error("engine did not stop on SIGTERM")
		e.kill()
	}
}

func (e *engineProc) url(path string) string {
	return "http://127.0.0.1:" + strconv.Itoa(e.httpPort) + path
}

func (e *engineProc) natsURL() string { return "nats://127.0.0.1:" + strconv.Itoa(e.natsPort) }

// participant is the option that connects as the participant user of the
// engine's credentials file (on the embedded default a client without
// credentials may only read). Its password is kept across restarts.
func (e *engineProc) participant() nats.Option {
	e.t.Helper()
	o, err := client.LocalCredentials(e.dataDir)
	if err != nil {
		e.t.Fatal(err)
	}
	return o
}

func getJSON(t testing.TB, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v: %.200s", url, err, b)
	}
	return resp.StatusCode
}

// getPages reads every page of an HTTP listing (a JSON array a page),
// following the next page's cursor.
func getPages[T any](t testing.TB, u string) []T {
	t.Helper()
	var all []T
	for cursor := ""; ; {
		v := u
		if cursor != "" {
			v += "&cursor=" + cursor
		}
		resp, err := http.Get(v)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var page []T
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatalf("%s: %v: %.200s", v, err, b)
		}
		all = append(all, page...)
		if cursor = resp.Header.Get(wire.NextCursorHeader); cursor == "" {
			return all
		}
	}
}

// replay folds the whole stream into a fresh projection, as an auditor
// would, independently of the engine.
// retryEach runs fn with a 5 s deadline at a time until it succeeds or ctx
// ends (then the last error).
func retryEach(ctx context.Context, fn func(context.Context) error) error {
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := fn(actx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func replay(t testing.TB, nc *nats.Conn) *projector.Projection {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	js, _ := jetstream.New(nc)
	// Each request with a deadline of its own, tried again until ctx
	// ends: a cluster electing a leader (a node just restarted) drops the
	// requests it gets meanwhile, and one request waiting for the whole of
	// ctx would miss the leader elected a moment later.
	var (
		info *jetstream.StreamInfo
		rd   *ledger.Reader
	)
	err := retryEach(ctx, func(actx context.Context) error {
		s, err := js.Stream(actx, wire.StreamName)
		if err == nil {
			info, err = s.Info(actx)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	p := projector.New(projector.Options{Rules: termination.Rules{}})
	if info.State.LastSeq == 0 {
		return p
	}
	// As a participant reads: an ordered push consumer (no pulls).
	if err := retryEach(ctx, func(actx context.Context) (err error) {
		rd, err = ledger.Read(actx, nc, "", 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rd.Stop()
	for p.Position() < info.State.LastSeq {
		m, err := rd.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		meta, _ := m.Metadata()
		// As the engine folds it: with its time, its signature headers
		// (a checkpoint names its key there) and an importer's headers;
		// the log's leaves commit to all of them.
		p.Apply(projector.Msg{Seq: meta.Sequence.Stream, Subject: m.Subject, Data: m.Data, Time: meta.Timestamp,
			Signature: projector.SignatureOf(m.Subject, m.Header), Import: projector.ImportOf(m.Subject, m.Header.Get)})
	}
	return p
}

// readStream reads the stream's messages up to position last as a
// participant reads it: an ordered push consumer (participants neither
// pull nor make direct gets: docs/SECURITY.md).
func readStream(t testing.TB, nc *nats.Conn, last uint64) map[uint64]*nats.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rd, err := ledger.Read(ctx, nc, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Stop()
	out := map[uint64]*nats.Msg{}
	for hi := uint64(0); hi < last; {
		m, err := rd.Next(ctx)
		if err != nil {
			t.Fatalf("read the stream: %v", err)
		}
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		out[md.Sequence.Stream] = m
		hi = md.Sequence.Stream
	}
	return out
}
