//go:build !unix

package service

// LockFile is the data directory's lock file (unix only; see lock_unix.go).
const LockFile = "engine.lock"

// dataLock: there is no data directory lock on this platform; the engine
// relies on the operator to run one engine per data directory.
type dataLock struct{}

func lockDataDir(string) (*dataLock, error) { return &dataLock{}, nil }

func (*dataLock) release() error { return nil }
