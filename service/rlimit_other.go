//go:build !unix

package service

// raiseFileLimit: no descriptor limit to raise on this platform (0:
// unknown; the engine plans with defaults).
func raiseFileLimit() uint64 { return 0 }
