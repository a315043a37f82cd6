package relay

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/service"
)

// engineSpec says which engine a relay command runs against: the one at
// URL, connected to with Participant (and Operator, when given, for what a
// participant's connection may not publish), or, when URL is empty, an
// embedded one it starts in Dir/engine with Roots as its provenance
// re-verification roots.
type engineSpec struct {
	URL         string
	Participant []nats.Option
	Operator    []nats.Option
	Dir         string
	Roots       []string
	// Partitioned starts the embedded engine with the record
	// partitioned (service.Config.Partitioned).
	Partitioned bool
}

// engine is the engine a relay command runs against: the single door
// through which Run, RunFleet and Replay get one, embedded or running
// elsewhere.
type engine struct {
	// URL is the engine's NATS URL.
	URL string
	// Participant are the options of the relay's own connection: the
	// embedded engine's participant user, the given credentials for
	// another.
	Participant []nats.Option
	// Operator, when not nil, connects as the engine's operator user: what
	// republishing a recording's supervisor and principal messages needs.
	// The embedded engine's is known; another engine's only when given.
	Operator []nats.Option
	// svc is the embedded engine (nil for one at a URL).
	svc *service.Service
}

// startEngine returns the engine spec names: the one at spec.URL, or an
// embedded one it starts. Close ends an embedded one.
func startEngine(ctx context.Context, spec engineSpec) (*engine, error) {
	if spec.URL != "" {
		return &engine{URL: spec.URL, Participant: spec.Participant, Operator: spec.Operator}, nil
	}
	if spec.Dir == "" {
		spec.Dir = filepath.Join("relay-runs", time.Now().UTC().Format("20060102T150405Z"))
	}
	s, err := service.Start(ctx, service.Config{DataDir: filepath.Join(spec.Dir, "engine"), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0",
		ProvenanceRoots: spec.Roots, Partitioned: spec.Partitioned})
	if err != nil {
		return nil, err
	}
	return &engine{URL: s.NATSURL(), Participant: []nats.Option{s.Participant()}, Operator: operatorOptions(s), svc: s}, nil
}

// Embedded reports whether the engine is one this process started.
func (e *engine) Embedded() bool { return e.svc != nil }

// Credentials are the embedded engine's credentials (nil for an engine at
// a URL): where its principal signs in.
func (e *engine) Credentials() *service.Credentials {
	if e.svc == nil {
		return nil
	}
	c := e.svc.Credentials()
	return &c
}

// connect opens a connection to the engine with opts (the connection's
// credentials among them) and the relay's own extra options.
func (e *engine) connect(what string, opts []nats.Option, extra ...nats.Option) (*nats.Conn, error) {
	nc, err := nats.Connect(e.URL, append(slices.Clone(extra), opts...)...)
	if err != nil {
		hint := ""
		if errors.Is(err, nats.ErrNoServers) {
			hint = " (is engine serve running? --nats names the address it prints on its \"nats\" line; without --nats the relay runs its own engine)"
		}
		return nil, fmt.Errorf("relay: %sconnect to the engine at %s: %w%s", what, e.URL, err, hint)
	}
	return nc, nil
}

// Close ends an embedded engine, after wait (to be looked at); an engine
// at a URL is left as it is.
func (e *engine) Close(wait time.Duration) {
	if e.svc == nil {
		return
	}
	if wait > 0 {
		time.Sleep(wait)
	}
	e.svc.Close()
}

// operatorOptions connect to an engine running in this process as the
// operator user it generated: what republishing a recording's supervisor
// and principal messages needs.
func operatorOptions(s *service.Service) []nats.Option {
	c := s.Credentials()
	if c.NATSUser == "" {
		return nil
	}
	return []nats.Option{nats.Name("parley-relay-operator"), nats.UserInfo(c.NATSUser, c.NATSPassword)}
}
