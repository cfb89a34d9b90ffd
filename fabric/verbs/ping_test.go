//go:build verbs && cgo

package verbs

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/payload"
)

// pingPair is a client whose QP sends and receives on one CQ (as a load
// generator's group does), its send buffer at 0 and receive buffers at
// size and 2·size of one MR, and a peer that echoes in Go.
type pingPair struct {
	a, b *ep
	cq   fabric.CQ
	loop *fabric.PingLoop
}

func newPingPair(t *testing.T, dev fabric.Device, pd fabric.PD, size int) *pingPair {
	t.Helper()
	a, b := pair(t, dev, pd)
	shared, err := dev.CreateCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(fabric.QPInitAttr{SendCQ: shared, RecvCQ: shared, MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		shared.Destroy()
		t.Fatal(err)
	}
	a.qp.Destroy()
	a.qp = qp
	t.Cleanup(func() {
		qp.Destroy()
		a.qp = nil
		shared.Destroy()
	})
	if err := connect(a, b); err != nil {
		t.Fatal(err)
	}
	l := &fabric.PingLoop{QP: a.qp, CQ: shared, MR: a.smr, SendOff: 0, RecvOff: [2]int{size, 2 * size}, Size: size,
		SendWRID: 7, RecvWRID: [2]uint64{10, 11}, End: time.Now().Add(time.Minute)}
	// Receive 0 as the connect leaves it (wrID 0), receive 1 as the loop
	// posts it.
	if err := a.qp.PostRecv(0, a.smr, size, size); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostRecv(11, a.smr, 2*size, size); err != nil {
		t.Fatal(err)
	}
	return &pingPair{a: a, b: b, cq: shared, loop: l}
}

// echo runs the peer until ctx ends: each message is checked in Go
// (payload.Check), handed to alter (which may change it) and echoed.
// It returns the sequence numbers it saw, and the first thing wrong.
func (p *pingPair) echo(ctx context.Context, size int, alter func(seq uint64, b []byte)) (seen func() ([]uint64, error)) {
	var (
		mu    sync.Mutex
		seqs  []uint64
		first error
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
	}
	b := p.b
	for k := range 2 {
		if err := b.qp.PostRecv(uint64(k), b.rmr, k*size, size); err != nil {
			fail(err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			wc, err := fabric.Await(ctx, b.rcq)
			if err != nil {
				if ctx.Err() == nil {
					fail(err)
				}
				return
			}
			k := int(wc.WRID)
			msg := b.rmr.Buf()[k*size:][:size]
			if wc.Status != fabric.WCSuccess || wc.ByteLen != size {
				fail(fmt.Errorf("peer: %+v", wc))
				return
			}
			seq, err := payload.Check(msg)
			if err != nil {
				fail(fmt.Errorf("peer: message after %v: %w", seqs, err))
				return
			}
			mu.Lock()
			seqs = append(seqs, seq)
			mu.Unlock()
			out := b.smr.Buf()[:size]
			copy(out, msg)
			if alter != nil {
				alter(seq, out)
			}
			if err := b.qp.PostRecv(uint64(k), b.rmr, k*size, size); err != nil {
				fail(err)
				return
			}
			if err := b.qp.PostSend(99, b.smr, 0, size); err != nil {
				fail(err)
				return
			}
			if wc, err := fabric.Await(ctx, b.scq); err != nil || wc.Status != fabric.WCSuccess {
				if ctx.Err() == nil {
					fail(fmt.Errorf("peer's echo: %+v %v", wc, err))
				}
				return
			}
		}
	}()
	return func() ([]uint64, error) {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return seqs, first
	}
}

// TestPingSpin: the client's loop in C sends messages that payload.Check
// passes, numbered 1, 2, 3, … (its tail included), each as its echo
// arrived, timed from its post to its echo; it stops posting at End and
// returns PingDone once the last echo is in, with the receive buffers
// posted again throughout (wrID 0 taken as buffer 0), and the vain part
// of its polling counted.
func TestPingSpin(t *testing.T) {
	dev := openDev(t, -1)
	pd := allocPD(t, dev)
	for _, size := range []int{payload.HeaderLen, 1021, 1024} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			p := newPingPair(t, dev, pd, size)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			seen := p.echo(ctx, size, nil)
			l := p.loop
			t0 := time.Now()
			l.End = t0.Add(300 * time.Millisecond)
			s0 := p.cq.(fabric.SpinCounter).Spun()
			var lats, counted, posts int64
			calls := 0
			for stop := fabric.PingSlice; stop != fabric.PingDone; calls++ {
				var err error
				stop, err = l.QP.(fabric.Pinger).PingSpin(l, 10*time.Second, 2*time.Millisecond)
				if err != nil || (stop != fabric.PingSlice && stop != fabric.PingDone) {
					t.Fatalf("call %d: %v, %v (wc %+v)", calls, stop, err, l.WC)
				}
				for _, d := range l.Lat {
					if d <= 0 || d > time.Since(t0) {
						t.Fatalf("a latency of %v", d)
					}
				}
				lats += int64(len(l.Lat))
				counted += l.Counted
				posts += l.Posts
				if time.Since(t0) > time.Minute {
					t.Fatal("no PingDone in a minute")
				}
			}
			end := time.Now()
			cancel()
			seqs, err := seen()
			if err != nil {
				t.Fatal(err)
			}
			if l.Seq != 0 || len(seqs) == 0 || posts != int64(len(seqs)) || lats != posts || counted > lats || counted < lats-1 {
				t.Fatalf("seq %d after PingDone; the peer saw %d messages, the loop posted %d, timed %d, counted %d",
					l.Seq, len(seqs), posts, lats, counted)
			}
			for i, s := range seqs {
				if s != uint64(i+1) {
					t.Fatalf("message %d was number %d", i, s)
				}
			}
			if l.Last < uint64(len(seqs)) || l.Last > uint64(len(seqs))+1 {
				t.Errorf("last sequence number %d after %d messages", l.Last, len(seqs))
			}
			if l.Next != 0 {
				// Written when the window was open: payload.Fill's bytes.
				want := make([]byte, size)
				payload.Fill(want, l.Next, size)
				if !bytes.Equal(p.a.smr.Buf()[:size], want) {
					t.Errorf("message %d as written in C differs from payload.Fill's", l.Next)
				}
			}
			if spun := p.cq.(fabric.SpinCounter).Spun() - s0; spun <= 0 || spun > end.Sub(t0) {
				t.Errorf("%v counted as spun in %v", spun, end.Sub(t0))
			}
			// Both receives are posted again: two more messages land.
			var wcs [2]fabric.WC
			for k := range 2 {
				if err := p.b.qp.PostSend(uint64(200+k), p.b.smr, 0, size); err != nil {
					t.Fatal(err)
				}
				w, err := fabric.Await(context.Background(), p.cq)
				for err == nil && w.Opcode != fabric.WCRecv {
					w, err = fabric.Await(context.Background(), p.cq)
				}
				if err != nil || w.Status != fabric.WCSuccess || w.WRID != l.RecvWRID[0] && w.WRID != l.RecvWRID[1] {
					t.Fatalf("receive %d after the loop: %+v %v", k, w, err)
				}
				wcs[k] = w
			}
			if wcs[0].WRID == wcs[1].WRID {
				t.Errorf("both landed in receive %d", wcs[0].WRID)
			}
			t.Logf("%d bytes: %d messages in %d calls", size, len(seqs), calls)
		})
	}
}

// TestPingSpinStops: the loop hands back what it does not handle, with
// its state as the caller's loop would have it: an echo that fails its
// check (after the next message went out), an echo of another message
// (the completion, the message still outstanding), and nothing at all
// (idle).
func TestPingSpinStops(t *testing.T) {
	dev := openDev(t, -1)
	pd := allocPD(t, dev)
	const size = 1024
	run := func(t *testing.T, alter func(seq uint64, b []byte), want fabric.PingStop) *fabric.PingLoop {
		t.Helper()
		p := newPingPair(t, dev, pd, size)
		ctx, cancel := context.WithCancel(context.Background())
		seen := p.echo(ctx, size, alter)
		defer func() {
			cancel()
			seen()
		}()
		l := p.loop
		for calls := 0; calls < 1000; calls++ {
			stop, err := l.QP.(fabric.Pinger).PingSpin(l, 200*time.Millisecond, 2*time.Millisecond)
			if err != nil {
				t.Fatalf("%v, %v", stop, err)
			}
			if stop == want {
				return l
			}
			if stop != fabric.PingSlice {
				t.Fatalf("stopped with %v, want %v (wc %+v)", stop, want, l.WC)
			}
		}
		t.Fatalf("no %v in 1000 calls", want)
		return nil
	}
	t.Run("bad echo", func(t *testing.T) {
		l := run(t, func(seq uint64, b []byte) {
			if seq == 5 {
				b[size-1] ^= 1
			}
		}, fabric.PingBadEcho)
		recv := l.MR.Buf()[l.RecvOff[l.Bad]:][:size]
		if seq, err := payload.Check(recv); err == nil || payload.Seq(recv) != 5 {
			t.Fatalf("receive %d holds message %d, which checks (%v)", l.Bad, seq, err)
		}
		if !(l.Seq == 6 && !l.Echoed || l.Seq == 5 && l.Echoed) || l.Last < 5 {
			t.Errorf("after the bad echo of 5: outstanding %d (echoed %v), last %d", l.Seq, l.Echoed, l.Last)
		}
	})
	t.Run("another message", func(t *testing.T) {
		l := run(t, func(seq uint64, b []byte) {
			if seq == 3 {
				payload.Fill(b, 2, size)
			}
		}, fabric.PingWC)
		if l.WC.Opcode != fabric.WCRecv || l.WC.Status != fabric.WCSuccess || l.Seq != 3 || l.Echoed {
			t.Errorf("handed back %+v with message %d outstanding (echoed %v)", l.WC, l.Seq, l.Echoed)
		}
	})
	t.Run("idle", func(t *testing.T) {
		l := run(t, func(seq uint64, b []byte) {
			if seq == 4 {
				clear(b) // the echo that follows is not 4's
			}
		}, fabric.PingWC)
		// Message 4 stays unanswered: the loop waits idle, then says so.
		t0 := time.Now()
		stop, err := l.QP.(fabric.Pinger).PingSpin(l, 50*time.Millisecond, time.Second)
		if d := time.Since(t0); stop != fabric.PingIdle || err != nil || d < 50*time.Millisecond {
			t.Errorf("unanswered: %v, %v after %v", stop, err, d)
		}
		if l.Seq != 4 {
			t.Errorf("outstanding %d, want 4", l.Seq)
		}
	})
}
