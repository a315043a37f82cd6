//go:build !unix

package fdplan

// RaiseFileLimit: no descriptor limit to raise on this platform (0:
// unknown; the engine plans with defaults).
func RaiseFileLimit() uint64 { return 0 }
