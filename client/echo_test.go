package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/fabric/sim"
	"github.com/rdmaprobe/rdmaprobe/hist"
	"github.com/rdmaprobe/rdmaprobe/payload"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// TestEchoOrder: a client posts its next message as soon as an echo
// arrives, before it verifies the echo; a verified echo counts its
// message and gives its receive buffer back, and an echo that does not
// verify fails the client (verify), is not counted, and leaves the
// message posted ahead of the check counted lost. Two receives stay
// posted per message slot, so the peer can echo again before the client
// has taken the previous echo.
func TestEchoOrder(t *testing.T) {
	const size = 256
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// setup connects client QP a to peer QP b on a simulated device and
	// returns the client's flow (depth 1, window open) with its two
	// receives posted, and the peer's moves.
	setup := func(t *testing.T) (f *flow, peerTake func() uint64, peerEcho func(uint64, bool), client func()) {
		dev, err := sim.New(sim.Options{}).Open(ctx, fabric.DeviceConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dev.Close() })
		pd, err := dev.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		port := dev.Port()
		type end struct {
			cq fabric.CQ
			qp fabric.QP
		}
		mk := func() end {
			cq, err := dev.CreateCQ(16)
			if err != nil {
				t.Fatal(err)
			}
			qp, err := pd.CreateQP(fabric.QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1})
			if err != nil {
				t.Fatal(err)
			}
			if err := qp.ToInit(fabric.InitAttr{Port: port.Port, Access: fabric.AccessLocalWrite}); err != nil {
				t.Fatal(err)
			}
			return end{cq, qp}
		}
		a, b := mk(), mk()
		t.Cleanup(func() { a.qp.Destroy(); b.qp.Destroy() })
		for _, p := range [][2]end{{a, b}, {b, a}} {
			if err := p[0].qp.ToRTR(fabric.RTRAttr{PathMTU: port.ActiveMTU, DestQPN: p[1].qp.QPN(), RQPSN: 1, MaxDestRdAtomic: 1,
				MinRNRTimer: 12, DLID: port.LID, DGID: port.GID, GIDIndex: port.GIDIndex, HopLimit: 64, Port: port.Port}); err != nil {
				t.Fatal(err)
			}
			if err := p[0].qp.ToRTS(fabric.RTSAttr{SQPSN: 1, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}); err != nil {
				t.Fatal(err)
			}
		}
		bufs := newBufs(pd, size, 1, 0)
		bp, err := bufs.get()
		if err != nil {
			t.Fatal(err)
		}
		peer, err := pd.RegMR(4*size, fabric.AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		c := &Conn{qp: a.qp, buf: bp, msg: size, group: &cqGroup{cq: a.cq}}
		e := &engine{cfg: TrafficConfig{Op: result.OpSend, Depth: 1, Timeout: time.Minute}, size: size}
		e.start = time.Now()
		e.endOff.Store(int64(time.Hour))
		f = &flow{e: e, c: c, lat: hist.Latency(), slots: make([]slot, 1)}
		e.flows = []*flow{f}
		e.active.Store(1)
		for r := 0; r < 2; r++ {
			if err := a.qp.PostRecv(wrid(kindRecv, r), bp.mr, bp.recvOff(r), size); err != nil {
				t.Fatal(err)
			}
		}
		// peerTake receives the client's next message at b and returns its seq.
		peerTake = func() uint64 {
			t.Helper()
			if err := b.qp.PostRecv(0, peer, 0, size); err != nil {
				t.Fatal(err)
			}
			for {
				wc, err := fabric.Await(ctx, b.cq)
				if err != nil || wc.Status != fabric.WCSuccess {
					t.Fatalf("peer: %+v %v", wc, err)
				}
				if wc.Opcode == fabric.WCRecv {
					seq, err := payload.Check(peer.Buf()[:size])
					if err != nil {
						t.Fatalf("peer got a bad message: %v", err)
					}
					return seq
				}
			}
		}
		// peerEcho sends message seq back (one byte flipped if bad).
		peerEcho = func(seq uint64, bad bool) {
			t.Helper()
			m := peer.Buf()[size : 2*size]
			payload.Fill(m, seq, size)
			if bad {
				m[size/2] ^= 0x40
			}
			if err := b.qp.PostSend(9, peer, size, size); err != nil {
				t.Fatal(err)
			}
		}
		// client hands the client's completions to the flow until it has
		// handled an echo, and its message's send if that came after it.
		client = func() {
			t.Helper()
			echoed := false
			for {
				s := f.slots[0]
				if echoed && (f.finished || !(s.busy && s.echoed && !s.sent)) {
					return
				}
				wc, err := fabric.Await(ctx, a.cq)
				if err != nil {
					t.Fatal(err)
				}
				f.take(wc)
				echoed = echoed || wc.Opcode == fabric.WCRecv
			}
		}
		return f, peerTake, peerEcho, client
	}

	t.Run("good", func(t *testing.T) {
		f, peerTake, peerEcho, client := setup(t)
		f.mu.Lock()
		f.fillLocked(time.Now())
		f.mu.Unlock()
		if f.failClass != "" {
			t.Fatalf("first post: %s", f.failText)
		}
		if seq := peerTake(); seq != 1 {
			t.Fatalf("first message %d, want 1", seq)
		}
		peerEcho(1, false)
		client()
		if f.failClass != "" || f.count != 1 || f.lat.Count() != 1 {
			t.Fatalf("after a good echo: fail %q (%s), count %d, %d latencies", f.failClass, f.failText, f.count, f.lat.Count())
		}
		if seq := peerTake(); seq != 2 {
			t.Fatalf("second message %d, want 2", seq)
		}
		// Two echoes before the client takes either: both find a
		// receive; the first counts, the second is a stray.
		peerEcho(2, false)
		peerEcho(2, false)
		for recvs := 0; recvs < 2; {
			wc, err := fabric.Await(ctx, f.c.group.cq)
			if err != nil {
				t.Fatal(err)
			}
			if wc.Status != fabric.WCSuccess {
				t.Fatalf("client completion %+v", wc)
			}
			f.take(wc)
			if wc.Opcode == fabric.WCRecv {
				if recvs++; recvs == 1 && (f.failClass != "" || f.count != 2) {
					t.Fatalf("after the second echo: fail %q (%s), count %d", f.failClass, f.failText, f.count)
				}
			}
		}
		if f.failClass != result.TrafficVerify || f.count != 2 || !f.finished {
			t.Fatalf("after a stray echo: fail %q (%s), count %d, finished %v", f.failClass, f.failText, f.count, f.finished)
		}
	})
	t.Run("corrupt", func(t *testing.T) {
		f, peerTake, peerEcho, client := setup(t)
		f.mu.Lock()
		f.fillLocked(time.Now())
		f.mu.Unlock()
		seq := peerTake()
		// The send completes before the echo comes, so the next message
		// is ready to go as the echo lands.
		for !f.slots[0].sent {
			wc, err := fabric.Await(ctx, f.c.group.cq)
			if err != nil {
				t.Fatal(err)
			}
			f.take(wc)
		}
		peerEcho(seq, true)
		client()
		if f.failClass != result.TrafficVerify || f.count != 0 || f.lat.Count() != 0 || f.lost != 1 || !f.finished {
			t.Fatalf("after a corrupt echo: fail %q (%s), count %d, %d latencies, lost %d, finished %v",
				f.failClass, f.failText, f.count, f.lat.Count(), f.lost, f.finished)
		}
		if got := peerTake(); got != seq+1 {
			t.Fatalf("message posted ahead of the check is %d, want %d", got, seq+1)
		}
	})

	// pinging hands a flow whose first message is out to a provider
	// that plays script.
	pinging := func(t *testing.T, script func(l *fabric.PingLoop) (fabric.PingStop, error)) *flow {
		t.Helper()
		f, _, _, _ := setup(t)
		f.e.ping = true
		f.mu.Lock()
		f.fillLocked(time.Now())
		f.pinger = scriptPinger(script)
		f.pl = &fabric.PingLoop{Size: size}
		f.c.group.pinging.Store(f)
		f.mu.Unlock()
		return f
	}
	wcs := make([]fabric.WC, 4)
	t.Run("ping", func(t *testing.T) {
		t1 := time.Now()
		f := pinging(t, func(l *fabric.PingLoop) (fabric.PingStop, error) {
			if l.Seq != 1 || l.Sent || l.Echoed || l.Last != 1 {
				t.Errorf("handed %+v", l)
			}
			l.Seq, l.Posted, l.Sent, l.Next, l.Last = 3, t1, true, 4, 4
			l.Lat, l.Counted, l.Posts = []time.Duration{10 * time.Microsecond, 20 * time.Microsecond}, 2, 2
			return fabric.PingSlice, nil
		})
		n, idle, err := f.ping(ctx, wcs, time.Millisecond)
		s := f.slots[0]
		if n != 0 || idle || err != nil || f.count != 2 || f.lat.Count() != 2 || f.answered != 2 || f.busy != 1 || f.seq != 4 ||
			!s.busy || s.seq != 3 || !s.sent || s.echoed || s.next != 4 || !s.posted.Equal(t1) || !s.due.Equal(t1) {
			t.Fatalf("after a slice: %d %v %v, count %d, %d latencies, answered %d, busy %d, seq %d, slot %+v",
				n, idle, err, f.count, f.lat.Count(), f.answered, f.busy, f.seq, s)
		}
		if f.lat.Max() < int64(19*time.Microsecond) {
			t.Errorf("latencies not recorded as taken: max %v", f.lat.Max())
		}
	})
	t.Run("ping-wc", func(t *testing.T) {
		want := fabric.WC{WRID: 77, Status: fabric.WCRetryExcErr, QPN: 5}
		f := pinging(t, func(l *fabric.PingLoop) (fabric.PingStop, error) {
			l.WC = want
			return fabric.PingWC, nil
		})
		if n, idle, err := f.ping(ctx, wcs, time.Millisecond); n != 1 || idle || err != nil || wcs[0] != want {
			t.Fatalf("a completion left over: %d %v %v %+v", n, idle, err, wcs[0])
		}
		f = pinging(t, func(l *fabric.PingLoop) (fabric.PingStop, error) { return fabric.PingIdle, nil })
		if n, idle, err := f.ping(ctx, wcs, time.Millisecond); n != 0 || !idle || err != nil || f.busy != 1 {
			t.Fatalf("idle: %d %v %v, busy %d", n, idle, err, f.busy)
		}
	})
	t.Run("ping-bad-echo", func(t *testing.T) {
		var f *flow
		f = pinging(t, func(l *fabric.PingLoop) (fabric.PingStop, error) {
			// Message 1's echo landed in receive 1, a byte off; 2 went out.
			m := f.c.recvBuf(1)
			payload.Fill(m, 1, size)
			m[size-1] ^= 1
			l.Seq, l.Sent, l.Last, l.Bad = 2, false, 2, 1
			return fabric.PingBadEcho, nil
		})
		f.ping(ctx, wcs, time.Millisecond)
		if f.failClass != result.TrafficVerify || f.lost != 1 || !f.finished || f.count != 0 || f.c.group.pinging.Load() != nil {
			t.Fatalf("a bad echo: fail %q (%s), lost %d, finished %v, count %d", f.failClass, f.failText, f.lost, f.finished, f.count)
		}
	})
	t.Run("ping-post", func(t *testing.T) {
		f := pinging(t, func(l *fabric.PingLoop) (fabric.PingStop, error) {
			l.Seq = 0
			return fabric.PingPost, errTest
		})
		f.ping(ctx, wcs, time.Millisecond)
		if f.failClass != result.TrafficPost || f.failText != errTest.Error() || !f.finished {
			t.Fatalf("a failed post: fail %q (%s)", f.failClass, f.failText)
		}
	})
	t.Run("ping-after-failure", func(t *testing.T) {
		var f *flow
		f = pinging(t, func(l *fabric.PingLoop) (fabric.PingStop, error) {
			// The ticker fails the client while the provider's loop runs.
			f.mu.Lock()
			f.failLocked(result.TrafficTimeout, errTest)
			f.mu.Unlock()
			l.Lat, l.Counted, l.Posts = []time.Duration{time.Microsecond}, 1, 1
			return fabric.PingSlice, nil
		})
		f.ping(ctx, wcs, time.Millisecond)
		if f.failClass != result.TrafficTimeout || f.lost != 1 || f.count != 0 || f.lat.Count() != 0 || f.c.group.pinging.Load() != nil {
			t.Fatalf("after the failure: fail %q, lost %d, count %d, %d latencies", f.failClass, f.lost, f.count, f.lat.Count())
		}
		// The router's next turn polls the CQ itself.
		if n, idle, err := f.ping(ctx, wcs, time.Millisecond); n != 0 || idle || err != nil {
			t.Fatalf("a finished flow pinged: %d %v %v", n, idle, err)
		}
	})
	t.Run("ping-done", func(t *testing.T) {
		var f *flow
		f = pinging(t, func(l *fabric.PingLoop) (fabric.PingStop, error) {
			f.e.endOff.Store(int64(time.Since(f.e.start)))
			l.Seq, l.Counted, l.Lat = 0, 1, []time.Duration{time.Microsecond}
			return fabric.PingDone, nil
		})
		f.ping(ctx, wcs, time.Millisecond)
		if f.failClass != "" || !f.finished || f.busy != 0 || f.count != 1 || f.c.group.pinging.Load() != nil {
			t.Fatalf("done: fail %q (%s), finished %v, busy %d, count %d", f.failClass, f.failText, f.finished, f.busy, f.count)
		}
	})
}

// scriptPinger is a provider's loop (fabric.Pinger) that a test plays.
type scriptPinger func(l *fabric.PingLoop) (fabric.PingStop, error)

func (s scriptPinger) PingSpin(l *fabric.PingLoop, idle, slice time.Duration) (fabric.PingStop, error) {
	return s(l)
}

var errTest = errors.New("test failure")
