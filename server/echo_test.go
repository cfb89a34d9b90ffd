package server_test

import (
	"context"
	"crypto/tls"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/exchange"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
	"github.com/rdmaprobe/rdmaprobe/payload"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/server"
)

// The srq and pool servers hold their connected clients without a
// goroutine each: the routers echo and the hangup watcher notices
// departures. With n clients connected (each after its verified round
// trips) the process has a handful of goroutines more than before, not
// n; every client is still served, released when it leaves, and in srq
// mode its SRQ buffers come back.
func TestNoGoroutinePerClient(t *testing.T) {
	for _, mode := range []string{server.ModeSRQ, server.ModePool} {
		t.Run(mode, func(t *testing.T) { noGoroutinePerClient(t, mode) })
	}
}

func noGoroutinePerClient(t *testing.T, mode string) {
	n := 500
	if timeScale > 1 {
		n = 100 // the TCG guest: handshakes cost ~15x
	}
	h := newHarnessOpts(t, n+1, harnessOpts{mode: mode, rounds: 3})
	ctx := context.Background()
	// One client first, so the group's routers and the fabric's wire
	// between the two devices are up before the count.
	first := h.connectOK(ctx, n)
	eventually.True(t, guard, "the first client is connected", func() bool { return h.srv.Stats().Connected == 1 })
	eventually.True(t, guard, "the first client's handler has returned", func() bool { return handlersRunning() == 0 })
	before := runtime.NumGoroutine()
	recs, conns, _ := client.Run(ctx, h.dialer, client.Load{N: n}, nil)
	defer func() { client.CloseAll(conns) }()
	for _, r := range recs {
		if r.Outcome != result.OutcomeOK {
			t.Fatalf("client %d: %s: %s", r.ID, r.Outcome, r.Error)
		}
	}
	eventually.True(t, guard, "the server counts every client connected", func() bool { return h.srv.Stats().Connected == n+1 })
	// Handlers return right after the exchange; give the last ones a
	// moment to finish, then count.
	var during int
	eventually.Within(guard, func() bool {
		during = runtime.NumGoroutine()
		return during-before <= 5
	})
	t.Logf("%d clients connected: %d goroutines, %d before they came", n, during, before)
	if during-before > 5 {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines with %d clients connected, %d before: a goroutine per client?\n%s",
			during, n, before, buf[:runtime.Stack(buf, true)])
	}
	if st := h.srv.Stats(); st.Connected != n+1 || st.Released != 0 || len(st.Failures) != 0 {
		t.Errorf("stats with the clients connected: %+v", st)
	}
	client.CloseAll(conns)
	conns = nil
	first.Close()
	eventually.True(t, guard, "every client is released", func() bool {
		st := h.srv.Stats()
		return st.Released == n+1
	})
	eventually.True(t, guard, "every SRQ buffer is posted again", func() bool {
		posted, total := h.srv.SRQBuffers()
		return posted == total && (total > 0) == (mode == server.ModeSRQ)
	})
}

// rdmaPeer is a client driven by hand: a legitimate exchange and QP set-up,
// then whatever messages the test sends.
type rdmaPeer struct {
	t          *testing.T
	tc         *tls.Conn
	pd         fabric.PD
	cq         fabric.CQ
	send, recv fabric.MR
	qp         fabric.QP
	size       int
	echoes     []fabric.WC // receive completions reaped while awaiting a send
}

// newRDMAPeer connects a peer to h's server with recvs receives posted.
func newRDMAPeer(h *harness, recvs int) *rdmaPeer {
	t := h.t
	t.Helper()
	p := &rdmaPeer{t: t, size: 256}
	t.Cleanup(p.close)
	var err error
	if p.pd, err = h.cdev.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if p.cq, err = h.cdev.CreateCQ(32); err != nil {
		t.Fatal(err)
	}
	if p.send, err = p.pd.RegMR(p.size, fabric.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	if p.recv, err = p.pd.RegMR(p.size, fabric.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	if p.qp, err = p.pd.CreateQP(fabric.QPInitAttr{SendCQ: p.cq, RecvCQ: p.cq,
		MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}); err != nil {
		t.Fatal(err)
	}
	port := h.cdev.Port()
	if err := p.qp.ToInit(fabric.InitAttr{Port: port.Port, Access: fabric.AccessLocalWrite}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < recvs; i++ {
		if err := p.qp.PostRecv(0, p.recv, 0, p.size); err != nil {
			t.Fatal(err)
		}
	}
	psn := uint32(0x1234 + p.qp.QPN())
	reply, tc := h.sendHello(exchange.Msg{Type: exchange.Hello, QPN: p.qp.QPN(), PSN: psn,
		LID: port.LID, MTU: port.ActiveMTU, GID: port.GID})
	p.tc = tc
	if reply.Type != exchange.Accept {
		t.Fatalf("hello: reply %+v, want accept", reply)
	}
	if err := p.qp.ToRTR(server.RTR(port, reply, min(port.ActiveMTU, reply.MTU))); err != nil {
		t.Fatal(err)
	}
	if err := p.qp.ToRTS(server.RTS(psn)); err != nil {
		t.Fatal(err)
	}
	return p
}

// sendMsg sends message seq (corrupted if bad) and waits for its send
// completion, which comes once the server's QP has taken it.
func (p *rdmaPeer) sendMsg(seq uint64, bad bool) {
	p.t.Helper()
	payload.Fill(p.send.Buf(), seq, p.size)
	if bad {
		p.send.Buf()[p.size-1] ^= 0xff
	}
	if err := p.qp.PostSend(seq, p.send, 0, p.size); err != nil {
		p.t.Fatal(err)
	}
	for {
		wc := p.await()
		if wc.Opcode == fabric.WCRecv {
			p.echoes = append(p.echoes, wc) // send and receive share the CQ
			continue
		}
		if wc.Status != fabric.WCSuccess {
			p.t.Fatalf("message %d: completion %+v, want a successful send", seq, wc)
		}
		return
	}
}

// echo waits for the next receive completion.
func (p *rdmaPeer) echo() fabric.WC {
	p.t.Helper()
	if len(p.echoes) > 0 {
		wc := p.echoes[0]
		p.echoes = p.echoes[1:]
		return wc
	}
	return p.await()
}

func (p *rdmaPeer) await() fabric.WC {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	wc, err := fabric.Await(ctx, p.cq)
	if err != nil {
		p.t.Fatalf("await completion: %v", err)
	}
	return wc
}

func (p *rdmaPeer) close() {
	if p.tc != nil {
		p.tc.Close()
	}
	if p.qp != nil {
		p.qp.Destroy()
	}
	for _, m := range []fabric.MR{p.send, p.recv} {
		if m != nil {
			m.Dereg()
		}
	}
	if p.cq != nil {
		p.cq.Destroy()
	}
	if p.pd != nil {
		p.pd.Dealloc()
	}
	*p = rdmaPeer{t: p.t}
}

// expectDroppedPeer waits until the server has dropped p for a message
// failure: its connection closed, its QP released, its SRQ buffers back.
func expectDroppedPeer(t *testing.T, h *harness, p *rdmaPeer, failures int) {
	t.Helper()
	if _, err := awaitClose(p.tc); err != nil {
		t.Errorf("server kept the peer's connection: %v", err)
	}
	eventually.True(t, guard, "the peer is released", func() bool {
		st := h.srv.Stats()
		return st.Released == st.Connected && st.Failures[result.OutcomeMessage] == failures
	})
	eventually.True(t, guard, "every SRQ buffer is posted again", func() bool {
		posted, total := h.srv.SRQBuffers()
		return posted == total
	})
	p.close()
	// What is left is the group the peer was in: its CQs (and SRQ).
	left := plus(h.baseline, 1, modeCosts[h.mode].perGroup)
	eventually.True(t, guard, "the device holds only the server's group", func() bool { return reflect.DeepEqual(h.inUse(), left) })
}

// In every mode, with a goroutine per client or with the routers echoing
// (pool and srq), busy-polled or not (per-client, busy-polled, on verbs:
// the echo loop in C), every payload is verified: a good message comes
// back, a corrupted one ends the client (counted as a message failure;
// the per-client and shared-cq loops check a message while its echo goes
// out, so it has been echoed as it came by then), and in srq mode its
// buffer goes back to the SRQ.
func TestBadPayload(t *testing.T) {
	for _, mode := range server.Modes {
		if mode == server.ModeMux {
			continue // a bad message on a shared QP: TestMuxLogicalClients
		}
		if mode == server.ModeUD {
			continue // the raw peer here has an RC QP
		}
		t.Run(mode, func(t *testing.T) { badPayload(t, mode, 0) })
		t.Run(mode+"/busy-poll", func(t *testing.T) { badPayload(t, mode, time.Millisecond) })
	}
}

func badPayload(t *testing.T, mode string, busy time.Duration) {
	h := newHarnessOpts(t, 4, harnessOpts{mode: mode, busy: busy})
	p := newRDMAPeer(h, 1)
	p.sendMsg(1, false)
	wc := p.echo()
	if wc.Opcode != fabric.WCRecv || wc.Status != fabric.WCSuccess || wc.ByteLen != p.size {
		t.Fatalf("echo: completion %+v", wc)
	}
	if s, err := payload.Check(p.recv.Buf()[:p.size]); err != nil || s != 1 {
		t.Fatalf("echo of message 1: seq %d, %v", s, err)
	}
	p.sendMsg(2, true)
	expectDroppedPeer(t, h, p, 1)
	st := h.srv.Stats()
	if st.Connected != 1 || st.Failures[result.OutcomeMessage] != 1 {
		t.Errorf("stats %+v: want 1 connected, 1 message failure", st)
	}
	// The server goes on serving.
	c := h.connectOK(context.Background(), 1)
	c.Close()
}

// A client that never takes its echoes (no receive posted: the server's
// sends wait on RNR forever) and keeps sending is dropped once it has more
// messages outstanding than its QP's send slots and the pending list; the
// SRQ buffers its echoes were going out of come back when it is released.
func TestSRQClientNotWaiting(t *testing.T) {
	// Room for more than the peer's messages in the SRQ: with every
	// buffer held the last message would wait (RNR) for ever instead.
	h := newHarnessOpts(t, 16, harnessOpts{mode: server.ModeSRQ})
	p := newRDMAPeer(h, 0)
	// QPMaxSendWR echoes in flight and 2 pending are accepted.
	for seq := uint64(1); seq <= server.QPMaxSendWR+2; seq++ {
		p.sendMsg(seq, false)
	}
	eventually.True(t, guard, "the server holds the peer's messages", func() bool {
		posted, total := h.srv.SRQBuffers()
		return total-posted == server.QPMaxSendWR+2
	})
	if st := h.srv.Stats(); st.Released != 0 || len(st.Failures) != 0 {
		t.Fatalf("peer dropped early: %+v", st)
	}
	p.sendMsg(server.QPMaxSendWR+3, false)
	expectDroppedPeer(t, h, p, 1)
}

// Pool mode has no pending list to overflow: a client that takes no
// echoes has one echo in flight (waiting on RNR at the client) and one
// verified message held in its receive slot; its next message waits (RNR)
// at the server. When it leaves it is released like any other, not
// counted as a failure, and its slot serves the next client.
func TestPoolClientNotWaiting(t *testing.T) {
	h := newHarnessOpts(t, 1, harnessOpts{mode: server.ModePool})
	p := newRDMAPeer(h, 0)
	p.sendMsg(1, false)
	p.sendMsg(2, false)
	payload.Fill(p.send.Buf(), 3, p.size)
	if err := p.qp.PostSend(3, p.send, 0, p.size); err != nil {
		t.Fatal(err)
	}
	// A window, not a wait for work: what is checked is that nothing
	// happens (no drop, message 3 not taken), and an absence has no
	// event to wait on. 100 ms is tens of round trips on either fabric.
	time.Sleep(100 * time.Millisecond * timeScale)
	if st := h.srv.Stats(); st.Released != 0 || len(st.Failures) != 0 {
		t.Fatalf("peer dropped: %+v", st)
	}
	// Message 2 still fills the server's receive slot: 3 is not taken.
	var wcs [4]fabric.WC
	if n, err := p.cq.Poll(wcs[:]); err != nil || n != 0 {
		t.Fatalf("peer's CQ: %d completions %v, %v; want none (message 3 waiting on RNR)", n, wcs[:n], err)
	}
	p.tc.Close()
	eventually.True(t, guard, "the peer is released", func() bool {
		st := h.srv.Stats()
		return st.Released == 1 && len(st.Failures) == 0
	})
	p.close()
	c := h.connectOK(context.Background(), 1)
	c.Close()
	eventually.True(t, guard, "every client is released", func() bool {
		return h.srv.Stats().Released == 2 && reflect.DeepEqual(h.inUse(), plus(h.baseline, 1, modeCosts[server.ModePool].perGroup))
	})
}
