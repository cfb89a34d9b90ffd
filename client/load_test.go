package client

import (
	"context"
	"testing"
	"time"
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
