//go:build !unix

package datadir

// LockFile is the data directory's lock file (unix only; see lock_unix.go).
const LockFile = "engine.lock"

// Lock: there is no data directory lock on this platform; the engine
// relies on the operator to run one engine per data directory.
type Lock struct{}

// Acquire takes no lock on this platform.
func Acquire(string) (*Lock, error) { return &Lock{}, nil }

// Release releases nothing.
func (*Lock) Release() error { return nil }
