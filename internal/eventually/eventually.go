// Package eventually is how tests wait for something to happen: they poll
// the condition until it holds, with a deadline generous enough for the
// race detector on a loaded machine, rather than sleep for a guessed time
// and then assert. A test that passes waits no longer than it must; one
// that fails says what never happened.
package eventually

import (
	"testing"
	"time"
)

// Every is how often True polls.
const Every = 10 * time.Millisecond

// True polls ok until it holds, failing tb (with what never happened)
// once within has passed.
func True(tb testing.TB, within time.Duration, what string, ok func() bool) {
	tb.Helper()
	if !Within(within, ok) {
		tb.Fatalf("never within %v: %s", within, what)
	}
}

// Within polls ok until it holds or within has passed, and says whether
// it held: for a test that has more to say than True's message.
func Within(within time.Duration, ok func() bool) bool {
	for deadline := time.Now().Add(within); !ok(); time.Sleep(Every) {
		if time.Now().After(deadline) {
			return ok()
		}
	}
	return true
}
