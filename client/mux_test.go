package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/exchange"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/fabric/sim"
	"github.com/rdmaprobe/rdmaprobe/payload"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/server"
)

// A dialer's logical clients fill a QP before the next opens; the QP's
// router hands each verified echo to the logical client it names, and an
// echo that fails its check ends the QP for all of them: the one it
// names fails, the others share its fate, and each is told which.
func TestSharedQPFate(t *testing.T) {
	const size, k = 64, 3
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dev, err := sim.New(sim.Options{}).Open(ctx, fabric.DeviceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	d, err := NewDialer(dev, Config{MsgSize: size, Mux: k})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	conns := map[uint32]*Conn{}
	var sq *sharedQP
	for i := 0; i < k; i++ {
		s, id, err := d.join()
		if err != nil {
			t.Fatal(err)
		}
		if sq == nil {
			sq = s
		} else if s != sq {
			t.Fatalf("logical client %d opened a second QP before the first carried %d", i+1, k)
		}
		c := &Conn{wcs: make(chan fabric.WC, 4), sq: s, logical: id, sqDead: s.dead, group: s.group}
		s.enter(id, c)
		conns[id] = c
	}
	next, id, err := d.join()
	if err != nil {
		t.Fatal(err)
	}
	if next == sq || id != 1 {
		t.Fatalf("the %dth logical client joined QP %p as %d, want a new QP as 1", k+1, next, id)
	}
	defer next.leave(id)
	defer func() {
		for id := range conns {
			sq.leave(id)
		}
	}()

	// The server's end: a QP on the same device, connected to the shared
	// one, that sends echoes as a server would.
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	cq, err := dev.CreateCQ(8)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Destroy()
	mr, err := pd.RegMR(size, fabric.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Dereg()
	peer, err := pd.CreateQP(fabric.QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Destroy()
	port := dev.Port()
	if err := peer.ToInit(fabric.InitAttr{Port: port.Port, Access: fabric.AccessLocalWrite}); err != nil {
		t.Fatal(err)
	}
	const peerPSN = 77
	end := func(qpn, psn uint32) exchange.Msg {
		return exchange.Msg{Type: exchange.Accept, QPN: qpn, PSN: psn, LID: port.LID, GID: port.GID, MTU: port.ActiveMTU}
	}
	if _, err := sq.connect(end(peer.QPN(), peerPSN)); err != nil {
		t.Fatal(err)
	}
	if err := peer.ToRTR(server.RTR(port, end(sq.qp.QPN(), sq.psn), port.ActiveMTU)); err != nil {
		t.Fatal(err)
	}
	if err := peer.ToRTS(server.RTS(peerPSN)); err != nil {
		t.Fatal(err)
	}
	echo := func(_ int, seq uint64, corrupt bool) {
		b := mr.Buf()[:size]
		payload.Fill(b, seq, size)
		if corrupt {
			b[size-1] ^= 0x80
		}
		if err := peer.PostSend(seq, mr, 0, size); err != nil {
			t.Fatal(err)
		}
		if wc, err := fabric.Await(ctx, cq); err != nil || wc.Status != fabric.WCSuccess {
			t.Fatalf("echo %#x: %+v, %v", seq, wc, err)
		}
	}
	echo(2, payload.MuxSeq(1, 1), false)
	if wc, err := conns[1].await(ctx); err != nil || wc.WRID != payload.MuxSeq(1, 1) {
		t.Fatalf("logical client 1: %+v, %v; want its echo", wc, err)
	}
	// A corrupted echo naming logical client 2 ends the QP.
	echo(0, payload.MuxSeq(2, 1), true)
	for id, c := range conns {
		_, err := c.await(ctx)
		var fe *fateError
		if !errors.As(err, &fe) || fe.shared != (id != 2) {
			t.Errorf("logical client %d: %v; want shared fate %v", id, err, id != 2)
		}
	}
}

// In the traffic phase, an echo that fails its check ends the shared QP
// for every logical client on it: the one it names fails as verify, its
// neighbours, mid-phase with messages outstanding, as shared-fate, and
// none waits for the message timeout.
func TestSharedQPTrafficFate(t *testing.T) {
	const size, k = 64, 3
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dev, err := sim.New(sim.Options{}).Open(ctx, fabric.DeviceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	d, err := NewDialer(dev, Config{MsgSize: size, Mux: k})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var (
		sq    *sharedQP
		conns []*Conn
	)
	for i := 0; i < k; i++ {
		s, id, err := d.join()
		if err != nil {
			t.Fatal(err)
		}
		sq = s
		c := &Conn{id: i, msg: size, wcs: make(chan fabric.WC, 4), sq: s, logical: id, sqDead: s.dead, group: s.group, qp: s.qp}
		if c.buf, err = d.bufs.get(); err != nil {
			t.Fatal(err)
		}
		s.enter(id, c)
		conns = append(conns, c)
		defer func() { d.bufs.put(c.buf); s.leave(id) }()
	}

	// The server's end echoes each message back, the 50th message of
	// logical client 2 corrupted.
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	cq, err := dev.CreateCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Destroy()
	const nbuf = 2 * k
	mr, err := pd.RegMR(2*nbuf*size, fabric.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Dereg()
	peer, err := pd.CreateQP(fabric.QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: nbuf, MaxRecvWR: nbuf, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Destroy()
	port := dev.Port()
	if err := peer.ToInit(fabric.InitAttr{Port: port.Port, Access: fabric.AccessLocalWrite}); err != nil {
		t.Fatal(err)
	}
	for j := 0; j < nbuf; j++ {
		if err := peer.PostRecv(uint64(j), mr, j*size, size); err != nil {
			t.Fatal(err)
		}
	}
	const peerPSN = 78
	end := func(qpn, psn uint32) exchange.Msg {
		return exchange.Msg{Type: exchange.Accept, QPN: qpn, PSN: psn, LID: port.LID, GID: port.GID, MTU: port.ActiveMTU}
	}
	if _, err := sq.connect(end(peer.QPN(), peerPSN)); err != nil {
		t.Fatal(err)
	}
	if err := peer.ToRTR(server.RTR(port, end(sq.qp.QPN(), sq.psn), port.ActiveMTU)); err != nil {
		t.Fatal(err)
	}
	if err := peer.ToRTS(server.RTS(peerPSN)); err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithCancel(ctx)
	echoed := make(chan struct{})
	go func() {
		defer close(echoed)
		buf := mr.Buf()
		for {
			wc, err := fabric.Await(pctx, cq)
			if err != nil || wc.Status != fabric.WCSuccess {
				return
			}
			if wc.Opcode != fabric.WCRecv {
				continue
			}
			j := int(wc.WRID)
			out := buf[(nbuf+j)*size:][:size]
			copy(out, buf[j*size:][:size])
			if payload.Seq(out) == payload.MuxSeq(2, 50) {
				out[size-1] ^= 0x80
			}
			if peer.PostSend(uint64(nbuf+j), mr, (nbuf+j)*size, size) != nil || peer.PostRecv(uint64(j), mr, j*size, size) != nil {
				return
			}
		}
	}()
	defer func() { stop(); <-echoed }()

	tr := d.Traffic(ctx, conns, TrafficConfig{Duration: 10 * time.Second, Timeout: 10 * time.Second})
	if tr.ClientsFailed != k || tr.Errors[result.TrafficVerify] != 1 || tr.Errors[result.OutcomeSharedFate] != k-1 ||
		!strings.Contains(tr.ErrorText[result.OutcomeSharedFate], "its shared QP failed: echo:") {
		t.Errorf("%d of %d failed, errors %v (%v); want verify for logical client 2, shared-fate for the others", tr.ClientsFailed, k, tr.Errors, tr.ErrorText)
	}
	// Logical client 2 sent its 49 messages before; the others theirs.
	if tr.Messages < 49 || tr.DurationSec >= 10 {
		t.Errorf("%d messages in %.1fs: the phase should have ended at the failure", tr.Messages, tr.DurationSec)
	}
}
