package fabrictest

import (
	"bytes"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

const udQKey = 0x11111111

// udQP is a UD QP on s, brought to RTS with Q_Key udQKey.
func (s *side) udQP(t testing.TB, c fabric.CQ) fabric.QP {
	t.Helper()
	q, err := s.pd.CreateQP(fabric.QPInitAttr{Type: fabric.QPTypeUD, SendCQ: c, RecvCQ: c, MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		q.ToInit(fabric.InitAttr{Port: s.dev.Port().Port, QKey: udQKey}),
		q.ToRTR(fabric.RTRAttr{}),
		q.ToRTS(fabric.RTSAttr{SQPSN: psnA}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return q
}

// ah is an address handle on s towards peer's port.
func (s *side) ah(t testing.TB, peer *side) fabric.AH {
	t.Helper()
	here, there := s.dev.Port(), peer.dev.Port()
	h, err := s.pd.CreateAH(fabric.AHAttr{DLID: there.LID, DGID: there.GID, GIDIndex: here.GIDIndex, HopLimit: 64, Port: here.Port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Destroy(); err != nil {
			t.Errorf("destroy AH: %v", err)
		}
	})
	return h
}

// udDatagrams: a datagram lands behind its GRH, which names the sender's
// GID, with the sender's QPN in the completion; one that carries the
// wrong Q_Key or exceeds the path MTU is dropped without an error on
// either side (the send completes), so the next good one is the first
// to arrive. (One that finds no receive posted is dropped too; when it
// arrived is the device's secret, so fabric/sim tests that on its own.)
func (f Fabric) udDatagrams(t *testing.T) {
	a, b := f.side(t), f.side(t)
	ca, cb := a.cq(t, 16), b.cq(t, 16)
	qa, qb := a.udQP(t, ca), b.udQP(t, cb)
	defer qa.Destroy()
	defer qb.Destroy()
	const n = 64
	mtu := min(a.dev.Port().ActiveMTU.Bytes(), b.dev.Port().ActiveMTU.Bytes())
	sm, rm := a.mr(t, mtu+1, fabric.AccessLocalWrite), b.mr(t, fabric.GRHLen+n, fabric.AccessLocalWrite)
	defer sm.Dereg()
	defer rm.Dereg()
	to := a.ah(t, b)

	send := func(fill byte, length int, qkey uint32) {
		t.Helper()
		for i := range sm.Buf()[:length] {
			sm.Buf()[i] = fill
		}
		if err := qa.PostSendUD(uint64(fill), sm, 0, length, to, qb.QPN(), qkey); err != nil {
			t.Fatal(err)
		}
		if wc := await(t, ca); wc.Status != fabric.WCSuccess || wc.Opcode != fabric.WCSend || wc.WRID != uint64(fill) {
			t.Fatalf("send completion %+v", wc)
		}
	}
	if err := qb.PostRecv(7, rm, 0, fabric.GRHLen+n); err != nil {
		t.Fatal(err)
	}
	send(2, n, udQKey^1)   // the wrong Q_Key: dropped
	send(3, mtu+1, udQKey) // above the MTU: never sent
	send(4, n, udQKey)
	wc := await(t, cb)
	if wc.Status != fabric.WCSuccess || wc.Opcode != fabric.WCRecv || wc.WRID != 7 {
		t.Fatalf("receive completion %+v", wc)
	}
	if wc.ByteLen != fabric.GRHLen+n || wc.SrcQP != qa.QPN() || !wc.GRH {
		t.Fatalf("receive of %d bytes from QP %d (GRH %v), want %d from QP %d with a GRH", wc.ByteLen, wc.SrcQP, wc.GRH, fabric.GRHLen+n, qa.QPN())
	}
	if got := rm.Buf()[fabric.GRHLen:][:n]; !bytes.Equal(got, bytes.Repeat([]byte{4}, n)) {
		t.Fatalf("received % x, want message 4 (2 and 3 should have been dropped)", got[:8])
	}
	if g, ok := fabric.SourceGID(rm.Buf()); !ok || g != a.dev.Port().GID {
		t.Fatalf("GRH names source %v (ok %v), want %v", g, ok, a.dev.Port().GID)
	}
	wantEmpty(t, cb)
	// An RC-style send on a UD QP names no destination.
	if err := qa.PostSend(9, sm, 0, n); err == nil {
		t.Fatal("PostSend on a UD QP accepted")
	}
}
