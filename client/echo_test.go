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
		bufs := newBufs(pd, size, 1)
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
		e.end = e.start.Add(time.Hour)
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
				f.take(wc, nil)
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
			f.take(wc, nil)
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
			f.take(wc, nil)
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

	// answer plays the provider's part of fabric.Answer: the echo found,
	// it posts what the flow armed, as the router's poll would.
	answer := func(t *testing.T, f *flow) *fabric.Answer {
		t.Helper()
		a := f.c.group.answer.Load()
		if a == nil {
			t.Fatal("nothing armed once the send completed")
		}
		if err := a.QP.PostSend(a.WRID, a.MR, a.Off, a.Len); err != nil {
			t.Fatal(err)
		}
		a.Index, a.At = 0, time.Now()
		f.c.group.answer.CompareAndSwap(a, nil)
		return a
	}
	// sent takes the client's completions until its message's send completed.
	sent := func(t *testing.T, f *flow) {
		t.Helper()
		for !f.slots[0].sent {
			wc, err := fabric.Await(ctx, f.c.group.cq)
			if err != nil {
				t.Fatal(err)
			}
			f.take(wc, nil)
		}
	}
	echo := func(t *testing.T, f *flow) fabric.WC {
		t.Helper()
		for {
			wc, err := fabric.Await(ctx, f.c.group.cq)
			if err != nil {
				t.Fatal(err)
			}
			if wc.Opcode == fabric.WCRecv {
				return wc
			}
			f.take(wc, nil)
		}
	}
	// armed starts an answering flow whose first message's send
	// completed (so its next is armed), and has the peer echo it.
	armed := func(t *testing.T, bad bool) (f *flow, peerTake func() uint64, peerEcho func(uint64, bool), seq uint64) {
		t.Helper()
		f, peerTake, peerEcho, _ = setup(t)
		f.e.answer = true
		f.mu.Lock()
		f.fillLocked(time.Now())
		f.mu.Unlock()
		seq = peerTake()
		sent(t, f)
		peerEcho(seq, bad)
		return f, peerTake, peerEcho, seq
	}
	t.Run("answered", func(t *testing.T) {
		f, peerTake, peerEcho, seq := armed(t, false)
		wc := echo(t, f)
		a := answer(t, f)
		f.take(wc, a)
		s := f.slots[0]
		if f.failClass != "" || f.count != 1 || f.answered != 1 || f.unseen != 0 || f.busy != 1 ||
			!s.busy || s.seq != seq+1 || s.sent || s.echoed || !s.due.Equal(a.At) {
			t.Fatalf("after an answered echo: fail %q (%s), count %d, answered %d, unseen %d, busy %d, slot %+v",
				f.failClass, f.failText, f.count, f.answered, f.unseen, f.busy, s)
		}
		if got := peerTake(); got != seq+1 {
			t.Fatalf("the answer was message %d, want %d", got, seq+1)
		}
		// An echo that came another way (no answer) leaves nothing armed.
		sent(t, f)
		if f.c.group.answer.Load() == nil {
			t.Fatal("the answered message's send completed: nothing armed")
		}
		peerEcho(seq+1, false)
		f.take(echo(t, f), nil)
		if f.c.group.answer.Load() != nil || f.count != 2 || f.answered != 1 {
			t.Fatalf("an echo not answered: armed %v, count %d, answered %d", f.c.group.answer.Load() != nil, f.count, f.answered)
		}
	})
	t.Run("answered-corrupt", func(t *testing.T) {
		f, _, _, _ := armed(t, true)
		f.take(echo(t, f), answer(t, f))
		if f.failClass != result.TrafficVerify || f.count != 0 || f.lost != 1 || !f.finished || f.c.group.answer.Load() != nil {
			t.Fatalf("a corrupt echo, answered: fail %q (%s), count %d, lost %d, finished %v",
				f.failClass, f.failText, f.count, f.lost, f.finished)
		}
	})
	t.Run("answered-after-failure", func(t *testing.T) {
		f, _, _, _ := armed(t, false)
		wc := echo(t, f)
		a := f.c.group.answer.Load()
		// The ticker fails the client while the router's poll is posting.
		f.mu.Lock()
		f.failLocked(result.TrafficTimeout, errTest)
		f.mu.Unlock()
		f.c.group.answer.Store(a)
		f.take(wc, answer(t, f))
		if f.lost != 2 || f.count != 0 {
			t.Fatalf("posted after the failure: lost %d, count %d; want 2 lost (the outstanding one and the answer)", f.lost, f.count)
		}
	})
}

var errTest = errors.New("test failure")
