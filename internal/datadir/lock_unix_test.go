//go:build unix

package datadir

import (
	"strings"
	"testing"
)

// A second lock on a held directory is refused, naming the holder; once
// released, the directory may be locked again.
func TestAcquire(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(dir); err == nil || !strings.Contains(err.Error(), "is in use by another engine") || !strings.Contains(err.Error(), "pid ") {
		t.Fatalf("second lock: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l, err = Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	var none *Lock
	if err := none.Release(); err != nil {
		t.Fatal(err)
	}
}
