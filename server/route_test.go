package server

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// stopCQ is a CQ whose completions arrive while its router sleeps, as a
// stop comes: Wait reports that it waits, then returns only when its ctx
// ends, never for the event.
type stopCQ struct {
	mu      sync.Mutex
	wcs     []fabric.WC
	waiting chan struct{}
}

func (q *stopCQ) Poll(wc []fabric.WC) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := copy(wc, q.wcs)
	q.wcs = q.wcs[n:]
	return n, nil
}
func (q *stopCQ) Arm() error     { return nil }
func (q *stopCQ) Destroy() error { return nil }
func (q *stopCQ) Wait(ctx context.Context) error {
	select {
	case q.waiting <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}

// A stop that wakes a sleeping router does not end it before it has
// drained what is in its CQ: a client's goodbye, acknowledged to the
// client already, is handled, not left for the stop to count as a
// release.
func TestRouterDrainsWhatCameWithTheStop(t *testing.T) {
	cq := &stopCQ{waiting: make(chan struct{}, 1)}
	sub := &subscription{recv: make(chan fabric.WC, 4), send: make(chan fabric.WC, 4)}
	g := &cqGroup{recv: cq, subs: map[uint32]*subscription{7: sub}}
	ctx, cancel := context.WithCancel(context.Background())
	s := &sharedCQs{ctx: ctx, cancel: cancel, stopped: make(chan struct{})}
	s.wg.Add(1)
	go s.route(g, cq, false, 64)
	select {
	case <-cq.waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the router never slept on its empty CQ")
	}
	cq.mu.Lock()
	cq.wcs = []fabric.WC{{WRID: 1, QPN: 7, Opcode: fabric.WCRecv}, {WRID: 2, QPN: 7, Opcode: fabric.WCRecv}}
	cq.mu.Unlock()
	s.stop()
	if got := len(sub.recv); got != 2 {
		t.Fatalf("the stopped router handed over %d of the 2 completions in its CQ", got)
	}
}
