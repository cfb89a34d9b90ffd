// Package eventually waits, in tests, for a condition that nothing
// signals: a file written by another process, a process gone from the
// process table, a server's counters reaching a value, a goroutine
// returning. It polls the condition instead of sleeping a fixed time, so
// a test takes as long as the thing it waits for and no longer, and a
// loaded machine makes it slower, not flaky.
package eventually

import (
	"testing"
	"time"
)

// Polling starts fast, for conditions that hold within microseconds, and
// backs off to a period that costs a loaded 2-core machine little.
const (
	firstPoll = 100 * time.Microsecond
	maxPoll   = 20 * time.Millisecond
)

// True waits until cond returns true and fails t, saying what it waited
// for, if it has not within the given time.
func True(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(within, cond) {
		t.Fatalf("timed out after %v waiting until %s", within, what)
	}
}

// Within waits until cond returns true or the time is up, and says
// whether cond held; for a caller that reports the details itself.
func Within(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for poll := firstPoll; !cond(); poll = min(2*poll, maxPoll) {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(poll, left))
	}
	return true
}
