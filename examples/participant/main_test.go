package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/service"
)

// The example runs against a real engine.
func TestRun(t *testing.T) {
	s, err := service.Start(context.Background(), service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, s.NATSURL(), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "status completed, 5 artifacts, 0 open blocking objections, 0 rejections") {
		t.Errorf("output:\n%s", out.String())
	}
}
