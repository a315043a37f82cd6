//go:build unix

package fdplan

import "syscall"

// RaiseFileLimit raises the soft limit on open descriptors to the hard
// limit, where the system allows, and returns the limit then in force
// (0: unknown). The Go runtime does the same at start on most systems;
// doing it here says what the engine plans its descriptors with.
func RaiseFileLimit() uint64 {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
		return 0
	}
	if lim.Cur < lim.Max {
		want := lim
		want.Cur = want.Max
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) == nil {
			lim = want
		}
	}
	return uint64(lim.Cur)
}
