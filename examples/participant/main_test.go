package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/service"
)

// The example runs against a real engine, as the participant user of its
// credentials file; without it, the engine's server refuses its open at
// once, and says how to connect.
func TestRun(t *testing.T) {
	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	creds, err := client.LocalCredentials(s.DataDir())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(ctx, s.NATSURL(), &out, creds); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "status completed, 5 artifacts, 0 open blocking objections, 0 rejections") {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestRun_WithoutCredentials(t *testing.T) {
	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err = run(ctx, s.NATSURL(), io.Discard)
	if !errors.Is(err, client.ErrDenied) || !strings.Contains(err.Error(), "nats_participant_user") {
		t.Fatalf("without credentials: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the refusal took %s", d)
	}
	if _, err := client.LocalCredentials(t.TempDir()); err == nil || !strings.Contains(err.Error(), "is an engine running with --data") {
		t.Errorf("no credentials file: %v", err)
	}
}
