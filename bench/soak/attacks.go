package main

import (
	"context"
	"sync/atomic"

	"github.com/parley-engine/parley/health"
)

// An attack is one class of hostile client, run against the engine beside
// the honest relays. A class registers itself (register, from its file's
// init) and is run by its name (-classes); further classes are files of
// their own.
type attack interface {
	// name is the class's name in -classes and in the report.
	name() string
	// setup prepares the engine before anything is measured (a large
	// deliberation to read, say); what it sends is not counted.
	setup(ctx context.Context, e *engine, sz sizes) error
	// run attacks until ctx ends, adding every byte it sends to sent, and
	// returns a line on what it saw.
	run(ctx context.Context, e *engine, sz sizes, sent *atomic.Int64) (note string, err error)
}

// A checked attack also says, after its run, what went wrong with what
// the engine must hold against it (empty: nothing); the short test fails
// on it.
type checked interface {
	check() string
}

// A writer attack publishes to the stream: it runs once as a client
// without credentials (which the embedded default lets only read, so
// nothing it sends may be recorded) and once as an insider holding the
// participant's password (-attackers).
type writer interface {
	writes()
}

func writes(a attack) bool {
	_, ok := a.(writer)
	return ok
}

// A credentialed attack uses what the embedded default gives only to
// participants (not to publish: a consumer of the stream, say): it too
// runs once without credentials and once as an insider, and its check
// says what each may get.
type credentialed interface {
	credentialed()
}

// asBoth reports whether the class runs as both attackers.
func asBoth(a attack) bool {
	_, ok := a.(credentialed)
	return ok || writes(a)
}

var attacks []attack

func register(a attack) { attacks = append(attacks, a) }

// sizes are the attacks' sizes (-short makes them small).
type sizes struct {
	// Sockets: slow-body sockets held open at once.
	Sockets int
	// Feeds: live feeds asked for per loopback address, over addresses
	// of one /24 and of several.
	Feeds int
	// DAG: artifacts of the deliberation whose closure is read.
	DAG int
	// Readers: concurrent closure readers.
	Readers int
	// LabelRate: hostile messages a second of the label flood.
	LabelRate int
	// Consumers: the engine's bound on the stream's consumers not its own
	// (engine serve --max-consumers; 0: its default, which is also
	// health.DefaultMaxConsumers).
	Consumers int
}

// consumerBound is the engine's bound on consumers the soak runs with.
func (sz sizes) consumerBound() int {
	if sz.Consumers > 0 {
		return sz.Consumers
	}
	return health.DefaultMaxConsumers
}
