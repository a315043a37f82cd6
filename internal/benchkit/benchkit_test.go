package benchkit

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

func TestMedianQuantile(t *testing.T) {
	d := []time.Duration{5, 1, 4, 2, 3}
	if m := Median(d); m != 3 {
		t.Errorf("median %d", m)
	}
	if d[0] != 5 {
		t.Error("Median sorted its argument")
	}
	if m := Median([]float64{2, 1}); m != 2 {
		t.Errorf("median of two %v", m)
	}
	for q, want := range map[float64]time.Duration{0: 1, 0.5: 3, 0.99: 5, 1: 5} {
		if got := Quantile(d, q); got != want {
			t.Errorf("Quantile(%v) = %d, want %d", q, got, want)
		}
	}
	if Quantile(nil, 0.5) != 0 {
		t.Error("Quantile of nothing")
	}
}

func TestStartServer(t *testing.T) {
	for _, listen := range []bool{false, true} {
		cfg := embedded.Config{Dir: t.TempDir(), DontListen: !listen}
		if listen {
			cfg.Host, cfg.Port = "127.0.0.1", -1
		}
		s := StartServer(t.Context(), cfg, 16)
		if s.Stream.CachedInfo().Config.Name != wire.StreamName {
			t.Errorf("stream %q", s.Stream.CachedInfo().Config.Name)
		}
		if _, err := s.JS.Publish(t.Context(), wire.ControlSubject("0190d3a0-0000-7000-8000-000000000000"), []byte(`{}`)); err != nil {
			t.Error(err)
		}
		nc := s.InProcess()
		nc.Close()
		s.Stop()
	}
}

func TestStartEngine(t *testing.T) {
	dir := TempDir("benchkit-test-")
	defer os.RemoveAll(dir)
	s := StartEngine(t.Context(), service.Config{DataDir: filepath.Join(dir, "engine"), NoSupervisor: true})
	defer s.Close()
	nc := Connect(s.NATSURL(), s.Participant())
	defer nc.Close()
	js := JetStream(nc, 0)
	if _, err := js.Publish(t.Context(), wire.ControlSubject("0190d3a0-0000-7000-8000-000000000000"), []byte(`{"op":"open","charter":{"title":"t"}}`)); err != nil {
		t.Fatal(err)
	}
	WaitApplied(t.Context(), s)
	if _, err := s.Queries.Get("0190d3a0-0000-7000-8000-000000000000"); err != nil {
		t.Error(err)
	}
}
