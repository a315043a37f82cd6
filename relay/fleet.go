package relay

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
)

// RunFleet runs k deliberations of cfg at once against one engine (the
// embedded one in Dir/engine, or opts.NATS), each in Dir/run-N, and returns
// their summaries in order.
func RunFleet(ctx context.Context, cfg *Config, k int, opts Options) ([]*Summary, error) {
	if k < 1 {
		return nil, fmt.Errorf("relay: --parallel must be at least 1")
	}
	if opts.Dir == "" {
		opts.Dir = "relay-runs/fleet"
	}
	eng, err := startEngine(ctx, engineSpec{URL: opts.NATS, Participant: opts.NATSOptions, Operator: opts.seedNATS, Dir: opts.Dir, Roots: cfg.Roots(), Partitioned: opts.Partitioned})
	if err != nil {
		return nil, err
	}
	defer eng.Close(0)
	// Every run reaches the one engine by its address.
	opts.NATS, opts.NATSOptions, opts.seedNATS = eng.URL, eng.Participant, eng.Operator
	out := make([]*Summary, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for i := 0; i < k; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			o := opts
			o.Dir = filepath.Join(opts.Dir, fmt.Sprintf("run-%03d", i+1))
			o.Progress = nil
			out[i], errs[i] = Run(ctx, cfg, o)
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return out, fmt.Errorf("relay: run %d: %w", i+1, err)
		}
	}
	return out, nil
}
