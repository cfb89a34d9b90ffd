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

// counted is a cq that counts its vain polling (SpinCounter), as the
// sim's and verbs' CQs do.
type counted struct {
	cq
	spun atomic.Int64
}

func (c *counted) Spun() time.Duration     { return time.Duration(c.spun.Load()) }
func (c *counted) AddSpun(d time.Duration) { c.spun.Add(int64(d)) }

// Spin on a SpinCounter counts the time its polls that found nothing
// took (not its yields between them): some of a spin, never more than
// it. A poll that counts itself (a Spinner's stretch) is not counted
// twice.
func TestSpinCounts(t *testing.T) {
	c := &counted{}
	var wc [1]WC
	start := time.Now()
	if n, err := Spin(context.Background(), c, wc[:], 20*time.Millisecond); n != 0 || err != nil {
		t.Fatalf("n %d err %v", n, err)
	}
	if el, spun := time.Since(start), c.Spun(); spun <= 0 || spun > el {
		t.Fatalf("a 20ms spin that found nothing in %v counted %v", el, spun)
	}
	// Polls of 1 ms that count all of themselves: nothing more is added.
	c.spun.Store(0)
	polls := 0
	self := func() (int, error) {
		t0 := time.Now()
		for time.Since(t0) < time.Millisecond {
		}
		c.AddSpun(time.Hour)
		polls++
		return 0, nil
	}
	if n, err := spinCounted(context.Background(), c, 5*time.Millisecond, self); n != 0 || err != nil {
		t.Fatalf("n %d err %v", n, err)
	}
	if got := c.Spun(); got != time.Duration(polls)*time.Hour {
		t.Errorf("%d polls that counted an hour each: %v counted", polls, got)
	}
	c.spun.Store(0)
	go func() {
		for c.polls.Load() < 1000 {
		}
		c.ready.Store(true)
	}()
	start = time.Now()
	if n, err := Spin(context.Background(), c, wc[:], time.Minute); n != 1 || err != nil {
		t.Fatalf("n %d err %v", n, err)
	}
	if el, spun := time.Since(start), c.Spun(); spun <= 0 || spun > el {
		t.Errorf("a spin that found a completion after %d polls in %v counted %v", c.polls.Load(), el, spun)
	}
}

// mr is an MR that is only a name.
