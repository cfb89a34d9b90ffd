package client

import (
	"context"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// Pace keeps a schedule from start: launch i is not released before
// start + i/rate, a late launch goes at once, and a cancelled ctx ends
// the wait.
func TestPace(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	Pace(ctx, start, 3, 100) // due 30 ms after start
	if got := time.Since(start); got < 30*time.Millisecond {
		t.Errorf("launch 3 at 100/s released after %v, before its turn at 30ms", got)
	}
	late := time.Now().Add(-time.Hour)
	t0 := time.Now()
	Pace(ctx, late, 5, 1) // due 5 s after an hour ago
	Pace(ctx, time.Now(), 0, 1)
	Pace(ctx, time.Now(), 9, 0)
	if got := time.Since(t0); got > 5*time.Second {
		t.Errorf("launches already due waited %v", got)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	t0 = time.Now()
	Pace(cctx, time.Now(), 1, 1.0/3600) // due in an hour
	if got := time.Since(t0); got > 5*time.Second {
		t.Errorf("a cancelled wait took %v", got)
	}
}

// Launches stop only once the point has failed (more failures than
// allowed) and the last WallStop attempts were all a resource's refusal;
// a connect or a failure of another kind starts the count again.
func TestWallStop(t *testing.T) {
	refused := result.ClientRecord{Outcome: result.OutcomeRefused}
	enomem := result.ClientRecord{Outcome: result.OutcomeQPCreate, Errno: "ENOMEM"}
	timeout := result.ClientRecord{Outcome: result.OutcomeTimeout}
	ok := result.ClientRecord{Outcome: result.OutcomeOK}
	for _, c := range []struct {
		name      string
		allowance int
		ends      []result.ClientRecord
		stop      bool
	}{
		{"three refusals in a row", 0, []result.ClientRecord{ok, refused, enomem, refused}, true},
		{"a connect between", 0, []result.ClientRecord{refused, refused, ok, refused}, false},
		{"a timeout between", 0, []result.ClientRecord{refused, timeout, refused, refused}, false},
		{"within the allowance", 3, []result.ClientRecord{refused, refused, refused}, false},
		{"past the allowance", 2, []result.ClientRecord{refused, refused, refused}, true},
	} {
		w := &wallStop{limit: 3, allowance: c.allowance}
		for i := range c.ends {
			w.ended(&c.ends[i])
		}
		if w.stopped() != c.stop {
			t.Errorf("%s: stopped %v, want %v", c.name, w.stopped(), c.stop)
		}
	}
	off := &wallStop{}
	for range 10 {
		off.ended(&refused)
	}
	if off.stopped() {
		t.Error("WallStop 0 stopped the launches")
	}
}
