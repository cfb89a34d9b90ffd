package fabrictest

import (
	"bytes"
	"fmt"
	"syscall"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// caps: the device reports every bound capacity depends on, and holds
// to them: a CQ or QP beyond its caps is refused, one at them is not.
func (f Fabric) caps(t *testing.T) {
	s := f.side(t)
	c := s.dev.Caps()
	for name, v := range map[string]int{"max_qp": c.MaxQP, "max_qp_wr": c.MaxQPWR, "max_sge": c.MaxSGE,
		"max_cq": c.MaxCQ, "max_cqe": c.MaxCQE, "max_mr": c.MaxMR, "max_pd": c.MaxPD,
		"max_srq": c.MaxSRQ, "max_srq_wr": c.MaxSRQWR, "max_ah": c.MaxAH} {
		if v <= 0 {
			t.Errorf("%s %d: the device reports no such capacity", name, v)
		}
	}
	if p := s.dev.Port(); p.State != "ACTIVE" || !p.ActiveMTU.Valid() || p.Port < 1 {
		t.Fatalf("port %+v: want an ACTIVE port with a valid MTU", p)
	}
	_, err := s.dev.CreateCQ(0)
	wantVerbErr(t, err, "ibv_create_cq", syscall.EINVAL)
	_, err = s.dev.CreateCQ(c.MaxCQE + 1)
	f.wantDeviceErr(t, err, "ibv_create_cq", syscall.EINVAL)
	cq, err := s.dev.CreateCQ(c.MaxCQE)
	if err != nil {
		t.Fatalf("cqe = max_cqe: %v", err)
	}
	_, err = s.pd.CreateQP(fabric.QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: c.MaxQPWR + 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	f.wantDeviceErr(t, err, "ibv_create_qp", syscall.EINVAL)
	if err := cq.Destroy(); err != nil {
		t.Fatal(err)
	}
}

// qpTransitions: RESET→INIT→RTR→RTS in that order only; a step out of
// order is refused with EINVAL and leaves the QP where it was.
func (f Fabric) qpTransitions(t *testing.T) {
	s := f.side(t)
	c := s.cq(t, 8)
	peer := s.qp(t, c, 2, nil)
	step := map[string]func(fabric.QP) error{
		"INIT": s.toInit,
		"RTR":  func(q fabric.QP) error { return q.ToRTR(s.rtr(s, peer.QPN(), psnB)) },
		"RTS":  func(q fabric.QP) error { return q.ToRTS(rts(psnA)) },
	}
	for _, tt := range []struct {
		steps  []string
		failAt int // the step refused, -1 for none
		final  fabric.QPState
	}{
		{[]string{"INIT", "RTR", "RTS"}, -1, fabric.QPSRTS},
		{[]string{"RTR"}, 0, fabric.QPSReset},
		{[]string{"RTS"}, 0, fabric.QPSReset},
		{[]string{"INIT", "RTS"}, 1, fabric.QPSInit},
		{[]string{"INIT", "RTR", "INIT"}, 2, fabric.QPSRTR},
		{[]string{"INIT", "RTR", "RTR"}, 2, fabric.QPSRTR},
		{[]string{"INIT", "RTR", "RTS", "INIT"}, 3, fabric.QPSRTS},
		{[]string{"INIT", "RTR", "RTS", "RTR"}, 3, fabric.QPSRTS},
	} {
		t.Run(fmt.Sprint(tt.steps), func(t *testing.T) {
			q := s.qp(t, c, 2, nil)
			defer q.Destroy()
			if q.State() != fabric.QPSReset {
				t.Fatalf("new QP in %s, want RESET", q.State())
			}
			for i, name := range tt.steps {
				err := step[name](q)
				if i == tt.failAt {
					wantVerbErr(t, err, "ibv_modify_qp("+name+")", syscall.EINVAL)
					break
				}
				if err != nil {
					t.Fatalf("step %d (%s): %v", i, name, err)
				}
			}
			if got := q.State(); got != tt.final {
				t.Fatalf("state %s, want %s", got, tt.final)
			}
		})
	}
}

// postBeforeRTS: a send is refused until the QP is in RTS; a receive is
// taken from INIT on.
func (f Fabric) postBeforeRTS(t *testing.T) {
	s := f.side(t)
	c := s.cq(t, 8)
	m := s.mr(t, 64, fabric.AccessLocalWrite)
	q, peer := s.qp(t, c, 4, nil), s.qp(t, c, 4, nil)
	wantVerbErr(t, q.PostSend(1, m, 0, 64), "ibv_post_send", syscall.EINVAL)
	if err := s.toInit(q); err != nil {
		t.Fatal(err)
	}
	wantVerbErr(t, q.PostSend(1, m, 0, 64), "ibv_post_send", syscall.EINVAL)
	if err := q.PostRecv(1, m, 0, 64); err != nil {
		t.Fatalf("receive in INIT: %v", err)
	}
	if err := q.ToRTR(s.rtr(s, peer.QPN(), psnB)); err != nil {
		t.Fatal(err)
	}
	wantVerbErr(t, q.PostSend(1, m, 0, 64), "ibv_post_send", syscall.EINVAL)
	wantEmpty(t, c)
}

// completionErrors: what goes wrong on the wire comes back as a
// completion with the status verbs gives it, and the QP that met it is
// in ERR.
func (f Fabric) completionErrors(t *testing.T) {
	t.Run("PSN ahead of the receiver", func(t *testing.T) {
		a, b := f.side(t), f.side(t)
		acq, bcq := a.cq(t, 8), b.cq(t, 8)
		qa, qb := a.qp(t, acq, 2, nil), b.qp(t, bcq, 2, nil)
		m, r := a.mr(t, 64, fabric.AccessLocalWrite), b.mr(t, 64, fabric.AccessLocalWrite)
		// b expects a PSN 100 behind the one a sends with: b NAKs the
		// sequence error, a retries once and gives up.
		behind := uint32(psnA - 100)
		sa := rts(psnA)
		sa.Timeout, sa.RetryCnt = 8, 1
		for _, err := range []error{
			a.toInit(qa), b.toInit(qb),
			qa.ToRTR(a.rtr(b, qb.QPN(), psnB)), qb.ToRTR(b.rtr(a, qa.QPN(), behind)),
			qa.ToRTS(sa), qb.ToRTS(rts(psnB)), qb.PostRecv(9, r, 0, 64),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
		copy(m.Buf(), "must not arrive")
		if err := qa.PostSend(1, m, 0, 15); err != nil {
			t.Fatal(err)
		}
		if err := qa.PostSend(2, m, 0, 15); err != nil {
			t.Fatal(err)
		}
		if got := await(t, acq); got.WRID != 1 || got.Status != fabric.WCRetryExcErr {
			t.Fatalf("first send %+v (%s), want WRID 1 %s", got, got.Status, fabric.WCRetryExcErr)
		}
		if got := await(t, acq); got.WRID != 2 || got.Status != fabric.WCWRFlushErr {
			t.Fatalf("second send %+v (%s), want WRID 2 %s", got, got.Status, fabric.WCWRFlushErr)
		}
		if qa.State() != fabric.QPSErr {
			t.Fatalf("sender in %s, want ERR", qa.State())
		}
		wantEmpty(t, bcq)
		if !bytes.Equal(r.Buf(), make([]byte, 64)) {
			t.Fatalf("receive buffer holds %q: something was delivered", r.Buf()[:16])
		}
	})
	t.Run("message longer than the receive", func(t *testing.T) {
		a, b := f.side(t), f.side(t)
		acq, bcq := a.cq(t, 8), b.cq(t, 8)
		qa, qb := a.qp(t, acq, 2, nil), b.qp(t, bcq, 2, nil)
		m, r := a.mr(t, 64, fabric.AccessLocalWrite), b.mr(t, 64, fabric.AccessLocalWrite)
		connect(t, a, qa, b, qb)
		if err := qb.PostRecv(1, r, 0, 8); err != nil {
			t.Fatal(err)
		}
		if err := qa.PostSend(5, m, 0, 16); err != nil {
			t.Fatal(err)
		}
		// The statuses differ: sim answers with an invalid-request NAK
		// (REM_INV_REQ_ERR, the receive LOC_LEN_ERR), rxe on 6.1 with an
		// operational error on both sides (REM_OP_ERR, LOC_QP_OP_ERR);
		// either way the sender learns the peer refused the message and
		// the receive fails with it.
		send, recv := await(t, acq), await(t, bcq)
		t.Logf("sender %s, receiver %s", send.Status, recv.Status)
		if send.WRID != 5 || send.QPN != qa.QPN() || (send.Status != fabric.WCRemInvReqErr && send.Status != fabric.WCRemOpErr) {
			t.Fatalf("sender %+v (%s), want WRID 5 %s or %s", send, send.Status, fabric.WCRemInvReqErr, fabric.WCRemOpErr)
		}
		if recv.WRID != 1 || recv.QPN != qb.QPN() || (recv.Status != fabric.WCLocLenErr && recv.Status != fabric.WCLocQPOpErr) {
			t.Fatalf("receiver %+v (%s), want WRID 1 %s or %s", recv, recv.Status, fabric.WCLocLenErr, fabric.WCLocQPOpErr)
		}
		if qa.State() != fabric.QPSErr || qb.State() != fabric.QPSErr {
			t.Fatalf("states %s/%s, want ERR/ERR", qa.State(), qb.State())
		}
	})
	t.Run("bad rkey", func(t *testing.T) {
		a, b := f.side(t), f.side(t)
		acq, bcq := a.cq(t, 8), b.cq(t, 8)
		qa, qb := a.qp(t, acq, 2, nil), b.qp(t, bcq, 2, nil)
		m, region := a.mr(t, 64, fabric.AccessLocalWrite), b.mr(t, 64, remoteAccess)
		connect(t, a, qa, b, qb)
		if err := qa.PostWrite(3, m, 0, 64, region.Addr(), region.RKey()^0x5500); err != nil {
			t.Fatal(err)
		}
		if got := await(t, acq); got.WRID != 3 || got.Status != fabric.WCRemAccessErr {
			t.Fatalf("write %+v (%s), want WRID 3 %s", got, got.Status, fabric.WCRemAccessErr)
		}
		if qa.State() != fabric.QPSErr {
			t.Fatalf("sender in %s, want ERR", qa.State())
		}
		wantEmpty(t, bcq)
	})
}
