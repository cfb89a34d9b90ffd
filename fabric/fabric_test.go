package fabric

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// cq is a CQ whose completions appear when ready is set.
type cq struct {
	ready atomic.Bool
	polls atomic.Int64
	armed atomic.Bool
}

func (c *cq) Poll(wc []WC) (int, error) {
	c.polls.Add(1)
	if c.ready.CompareAndSwap(true, false) {
		wc[0] = WC{QPN: 7}
		return 1, nil
	}
	return 0, nil
}
func (c *cq) Arm() error                     { c.armed.Store(true); return nil }
func (c *cq) Wait(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
func (c *cq) Destroy() error                 { return nil }

// Spin takes a completion that comes while it polls, without arming.
func TestSpinTakesACompletionThatComes(t *testing.T) {
	c := &cq{}
	go func() {
		for c.polls.Load() < 10 {
		}
		c.ready.Store(true)
	}()
	var wc [4]WC
	n, err := Spin(context.Background(), c, wc[:], time.Minute)
	if n != 1 || err != nil || wc[0].QPN != 7 || c.armed.Load() {
		t.Fatalf("n %d err %v wc %+v armed %v", n, err, wc[0], c.armed.Load())
	}
}

// With nothing coming, Spin gives up after its budget, or at once when
// ctx has ended; AwaitBusy then arms the CQ and waits.
func TestSpinGivesUp(t *testing.T) {
	c := &cq{}
	var wc [1]WC
	start := time.Now()
	if n, err := Spin(context.Background(), c, wc[:], 20*time.Millisecond); n != 0 || err != nil {
		t.Fatalf("n %d err %v", n, err)
	}
	if el := time.Since(start); el < 20*time.Millisecond || c.polls.Load() < 2 {
		t.Errorf("gave up after %v and %d polls", el, c.polls.Load())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if n, _ := Spin(ctx, c, wc[:], time.Hour); n != 0 {
		t.Errorf("n %d after ctx ended", n)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := AwaitBusy(ctx, c, time.Millisecond); err == nil || !c.armed.Load() {
		t.Errorf("AwaitBusy: err %v, armed %v", err, c.armed.Load())
	}
}
