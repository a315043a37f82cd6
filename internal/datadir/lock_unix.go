//go:build unix

package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// LockFile is the file in the data directory that an engine holds locked
// (flock) while it runs: a second engine on the same directory would open
// the same store and overwrite the same snapshots.
const LockFile = "engine.lock"

// Lock is a held lock on a data directory.
type Lock struct{ f *os.File }

// Acquire takes the data directory's lock, or says who holds it. The
// file names its holder (pid, host, start time) for the next one to read.
func Acquire(dir string) (*Lock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("service: data directory %s is not writable: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process"
			if b, rerr := os.ReadFile(path); rerr == nil && len(strings.TrimSpace(string(b))) > 0 {
				holder = strings.TrimSpace(string(b))
			}
			return nil, fmt.Errorf("service: data directory %s is in use by another engine: %s is held by %s; stop that engine, or give this one another --data", dir, path, holder)
		}
		return nil, fmt.Errorf("service: lock %s: %w", path, err)
	}
	host, _ := os.Hostname()
	holder := fmt.Sprintf("pid %d on %s, since %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(holder), 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("service: data directory %s is not writable: %w", dir, err)
	}
	return &Lock{f: f}, nil
}

// Release unlocks (closing the file drops the flock). The file stays: a
// lock file removed while another process opens it would let two hold
// locks on two different files.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
