package fdplan

import (
	"strings"
	"testing"
)

func TestPlan(t *testing.T) {
	for _, c := range []struct {
		limit    uint64
		httpMax  int
		embedded bool
		want     Descriptors
		err      string
	}{
		{limit: 0, embedded: true, want: Descriptors{Limit: DefaultFileLimit, HTTP: 2048, NATS: maxNATSClients, Files: 4096}},
		{limit: 1024, embedded: true, want: Descriptors{Limit: 1024, HTTP: 256, NATS: 640, Files: 128}},
		{limit: 1024, embedded: false, want: Descriptors{Limit: 1024, HTTP: 256, Files: 128}},
		{limit: 1024, httpMax: 100, embedded: true, want: Descriptors{Limit: 1024, HTTP: 100, NATS: 796, Files: 128}},
		{limit: 1024, httpMax: 900, embedded: true, err: "cannot hold 900 HTTP connections"},
	} {
		got, err := Plan(c.limit, c.httpMax, c.embedded)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.HasPrefix(err.Error(), "service: ") {
				t.Errorf("Plan(%d, %d, %v): %v, want %q", c.limit, c.httpMax, c.embedded, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Plan(%d, %d, %v) = %+v, %v, want %+v", c.limit, c.httpMax, c.embedded, got, err, c.want)
		}
	}
}
