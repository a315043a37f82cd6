package main

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/parley-engine/parley/metrics"
)

func TestParseMemoryLimit(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{"536870912", 512 << 20, ""},
		{"512MiB", 512 << 20, ""},
		{"1GiB", 1 << 30, ""},
		{"64KiB", 64 << 10, ""},
		{"2TiB", 2 << 40, ""},
		{"4096B", 4096, ""},
		{"0", 0, "above 0"},
		{"0MiB", 0, "above 0"},
		{"", 0, "not a size"},
		{"MiB", 0, "not a size"},
		{"512MB", 0, "not a size"},
		{"-1", 0, "not a size"},
		{"+5", 0, "not a size"},
		{"1.5GiB", 0, "not a size"},
		{"off", 0, "not a size"},
		{"9000000TiB", 0, "too large"},
		{"99999999999999999999", 0, "not a size"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseMemoryLimit(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseMemoryLimit(%q) = %d, %v; want an error saying %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parseMemoryLimit(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

// --memory-limit sets the runtime's soft memory limit while serve runs
// (/healthz lists it among the bounds, /metrics gives it), and serve
// gives the previous one back when it returns.
func TestServe_MemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		// Runs after serve's own cleanup has stopped it.
		if got := debug.SetMemoryLimit(-1); got != before {
			t.Errorf("after serve the memory limit is %d, was %d", got, before)
			debug.SetMemoryLimit(before)
		}
	})
	const limit = 3 << 30
	out := serve(t, "--data", t.TempDir(), "--memory-limit", "3GiB")
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Fatalf("memory limit %d while serve runs, want %d", got, limit)
	}
	m := regexp.MustCompile(`http  (http://127\.0\.0\.1:\d+)/api/v1/deliberations`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no HTTP address in %q", out)
	}
	resp, err := http.Get(m[1] + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Bounds []metrics.Bound `json:"bounds"`
	}
	err = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(h.Bounds, func(b metrics.Bound) bool { return b.Name == metrics.CodeMemoryLimit })
	if i < 0 || h.Bounds[i].Limit != limit || h.Bounds[i].InUse <= 0 {
		t.Fatalf("/healthz bounds: %+v", h.Bounds)
	}
	resp, err = http.Get(m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "\nparley_memory_limit_bytes 3.221225472e+09\n") || !strings.Contains(string(body), "\nparley_memory_limit_hits_total 0\n") {
		t.Fatalf("/metrics has no memory limit:\n%s", body)
	}
	if before != math.MaxInt64 && before == limit {
		t.Fatalf("the limit was already %d before serve: the test proves nothing", before)
	}
}

func TestServe_MemoryLimitRefused(t *testing.T) {
	var out, errb strings.Builder
	code := Run(t.Context(), []string{"serve", "--memory-limit", "lots"}, strings.NewReader(""), &out, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), "memory-limit") || !strings.Contains(errb.String(), "not a size") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}
