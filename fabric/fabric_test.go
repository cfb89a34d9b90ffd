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
type mr struct{ MR }

// An EchoLoop's buffers: the first Depth in the receive MR and posted,
// the next Depth in the send MR and free; a send completion frees only a
// buffer being sent; wrIDs beyond the loop's name its last buffer.
func TestEchoLoopBuffers(t *testing.T) {
	rm, sm := &mr{}, &mr{}
	l := NewEchoLoop(nil, nil, rm, 100, sm, 7, 64, 2)
	want := []struct {
		mr  MR
		off int
	}{{rm, 100}, {rm, 164}, {sm, 7}, {sm, 71}}
	for b, w := range want {
		if m, off := l.Buf(b); m != w.mr || off != w.off {
			t.Errorf("buffer %d at %v+%d, want %v+%d", b, m, off, w.mr, w.off)
		}
	}
	if got := []BufState{BufPosted, BufPosted, BufFree, BufFree}; len(l.Bufs) != 4 || l.Bufs[0] != got[0] || l.Bufs[1] != got[1] || l.Bufs[2] != got[2] || l.Bufs[3] != got[3] {
		t.Fatalf("new loop's buffers %v, want %v", l.Bufs, got)
	}
	if l.Index(1) != 1 || l.Index(3) != 3 || l.Index(99) != 3 {
		t.Errorf("wrIDs 1, 3, 99 name buffers %d, %d, %d", l.Index(1), l.Index(3), l.Index(99))
	}
	if f := l.Free(); f != 2 {
		t.Errorf("first free buffer %d, want 2", f)
	}
	l.Bufs[2], l.Bufs[3], l.Inflight = BufSending, BufSending, 2
	if f := l.Free(); f != -1 {
		t.Errorf("free buffer %d with all sending", f)
	}
	l.Sent(1) // buffer 0 is posted, not sending: nothing changes
	l.Sent(0) // no buffer
	l.Sent(9)
	if l.Inflight != 2 || l.Bufs[0] != BufPosted {
		t.Fatalf("stray send completions changed the loop: %d in flight, %v", l.Inflight, l.Bufs)
	}
	l.Sent(4) // buffer 3
	if l.Inflight != 1 || l.Bufs[3] != BufFree || l.Free() != 3 {
		t.Errorf("after buffer 3's send: %d in flight, %v", l.Inflight, l.Bufs)
	}
}
