package fabrictest

import (
	"bytes"
	"fmt"
	"syscall"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// srqRoundTrips connects client QPs on a to QPs on b that share one SRQ
// and one CQ, as the server's srq mode does, and runs verified echoes:
// b finds the client by WC.QPN and the payload by WC.WRID (the SRQ
// buffer), copies it to that client's send slot, reposts the buffer and
// echoes. With fewer buffers than clients sending at once, the surplus
// SENDs wait (RNR) and are delivered as buffers are reposted.
func (f Fabric) srqRoundTrips(t *testing.T) {
	for _, tt := range []struct {
		name             string
		clients, buffers int
		rounds           int
	}{
		{"one client", 1, 1, 5},
		{"buffer per client", 16, 16, 3},
		{"fewer buffers than clients", 16, 3, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const msg = 64
			a, b := f.side(t), f.side(t)
			acq, bcq := a.cq(t, 4*tt.clients), b.cq(t, 4*tt.clients)
			sq := b.srq(t, tt.buffers)
			am := a.mr(t, 2*msg*tt.clients, fabric.AccessLocalWrite) // per client: send slot, receive slot
			pool := b.mr(t, msg*(tt.clients+tt.buffers), fabric.AccessLocalWrite)
			sendOff := func(i int) int { return msg * i }
			bufOff := func(k int) int { return msg * (tt.clients + k) }
			for k := range tt.buffers {
				if err := sq.PostRecv(uint64(k), pool, bufOff(k), msg); err != nil {
					t.Fatal(err)
				}
			}
			qas, qbs := make([]fabric.QP, tt.clients), make([]fabric.QP, tt.clients)
			byQPN := map[uint32]int{}
			for i := range qas {
				qas[i], qbs[i] = a.qp(t, acq, 2, nil), b.qp(t, bcq, 2, sq)
				connect(t, a, qas[i], b, qbs[i])
				byQPN[qbs[i].QPN()] = i
			}
			for round := range tt.rounds {
				for i, q := range qas {
					if err := q.PostRecv(uint64(i), am, 2*msg*i+msg, msg); err != nil {
						t.Fatal(err)
					}
					copy(am.Buf()[2*msg*i:2*msg*i+msg], fmt.Sprintf("round %d client %d", round, i))
					if err := q.PostSend(uint64(i), am, 2*msg*i, msg); err != nil {
						t.Fatal(err)
					}
				}
				// Each echo's send completes within the round, as the
				// server awaits it before the client's next message.
				seen := make([]bool, tt.clients)
				for echoed, sent := 0, 0; echoed < tt.clients || sent < tt.clients; {
					wc := await(t, bcq)
					if wc.Opcode == fabric.WCSend {
						if wc.Status != fabric.WCSuccess {
							t.Fatalf("echo send %+v (%s)", wc, wc.Status)
						}
						sent++
						continue
					}
					i, ok := byQPN[wc.QPN]
					if !ok || seen[i] || wc.Status != fabric.WCSuccess || wc.ByteLen != msg || wc.WRID >= uint64(tt.buffers) {
						t.Fatalf("round %d: receive completion %+v (client %d known %v)", round, wc, i, ok)
					}
					seen[i] = true
					k := int(wc.WRID)
					got := pool.Buf()[bufOff(k) : bufOff(k)+msg]
					if want := am.Buf()[2*msg*i : 2*msg*i+msg]; !bytes.Equal(got, want) {
						t.Fatalf("round %d: SRQ buffer %d holds %q for client %d, want %q", round, k, got[:20], i, want[:20])
					}
					copy(pool.Buf()[sendOff(i):sendOff(i)+msg], got)
					if err := sq.PostRecv(uint64(k), pool, bufOff(k), msg); err != nil {
						t.Fatal(err)
					}
					if err := qbs[i].PostSend(uint64(i), pool, sendOff(i), msg); err != nil {
						t.Fatal(err)
					}
					echoed++
				}
				// a gets each client's send completion and its echo.
				for range 2 * tt.clients {
					wc := await(t, acq)
					if wc.Status != fabric.WCSuccess {
						t.Fatalf("client completion %+v (%s)", wc, wc.Status)
					}
					if i := int(wc.WRID); wc.Opcode == fabric.WCRecv &&
						!bytes.Equal(am.Buf()[2*msg*i+msg:2*msg*i+2*msg], am.Buf()[2*msg*i:2*msg*i+msg]) {
						t.Fatalf("round %d: echo to client %d differs", round, i)
					}
				}
			}
			t.Logf("%d clients × %d rounds through an SRQ of %d buffers", tt.clients, tt.rounds, tt.buffers)
		})
	}
}

// srqQPHasNoRQ: a QP created with an SRQ has no receive queue of its
// own: its receive caps are ignored, however absurd, and PostRecv on it
// fails with EINVAL in every state; the SRQ takes the receive.
func (f Fabric) srqQPHasNoRQ(t *testing.T) {
	s := f.side(t)
	c := s.cq(t, 8)
	srq := s.srq(t, 4)
	m := s.mr(t, 64, fabric.AccessLocalWrite)
	peer := s.qp(t, c, 2, nil)
	q, err := s.pd.CreateQP(fabric.QPInitAttr{SendCQ: c, RecvCQ: c, SRQ: srq, MaxSendWR: 2, MaxRecvWR: 1 << 30, MaxSendSGE: 1, MaxRecvSGE: 1000})
	if err != nil {
		t.Fatalf("receive caps above the device's with an SRQ: %v", err)
	}
	for _, step := range []struct {
		state string
		next  func() error
	}{
		{"RESET", func() error { return s.toInit(q) }},
		{"INIT", func() error { return q.ToRTR(s.rtr(s, peer.QPN(), psnB)) }},
		{"RTR", func() error { return q.ToRTS(rts(psnA)) }},
		{"RTS", func() error { return nil }},
	} {
		t.Run(step.state, func(t *testing.T) {
			wantVerbErr(t, q.PostRecv(1, m, 0, 64), "ibv_post_recv", syscall.EINVAL)
		})
		if err := step.next(); err != nil {
			t.Fatal(err)
		}
	}
	if err := srq.PostRecv(1, m, 0, 64); err != nil {
		t.Fatalf("the SRQ itself: %v", err)
	}
	wantEmpty(t, c)
}

// srqArgs: the device's own checks on ibv_create_srq and
// ibv_post_srq_recv, with the errnos rxe returns (rxe_srq_chk_init:
// EINVAL; a full SRQ: ENOMEM).
func (f Fabric) srqArgs(t *testing.T) {
	s := f.side(t)
	caps := s.dev.Caps()
	m := s.mr(t, 64, fabric.AccessLocalWrite)
	create := func(maxWR, maxSGE int) error {
		q, err := s.pd.CreateSRQ(maxWR, maxSGE)
		if err == nil {
			q.Destroy()
		}
		return err
	}
	for _, tt := range []struct {
		name  string
		err   func() error
		verb  string
		errno syscall.Errno
	}{
		{"max_wr 0", func() error { return create(0, 1) }, "ibv_create_srq", syscall.EINVAL},
		{"max_wr above max_srq_wr", func() error { return create(caps.MaxSRQWR+1, 1) }, "ibv_create_srq", syscall.EINVAL},
		{"max_sge above max_srq_sge", func() error { return create(4, 1000) }, "ibv_create_srq", syscall.EINVAL},
		{"buffer outside the MR", func() error {
			q := s.srq(t, 4)
			defer q.Destroy()
			return q.PostRecv(1, m, 56, 16)
		}, "ibv_post_srq_recv", syscall.EINVAL},
		// Asked for 2, rxe rounds the queue to 3 (4 slots, one kept
		// empty), as for QPs and CQs.
		{"SRQ full", func() error {
			q := s.srq(t, 2)
			defer q.Destroy()
			for i := range 3 {
				if err := q.PostRecv(uint64(i), m, 0, 8); err != nil {
					return fmt.Errorf("receive %d: %w", i, err)
				}
			}
			return q.PostRecv(3, m, 0, 8)
		}, "ibv_post_srq_recv", syscall.ENOMEM},
	} {
		t.Run(tt.name, func(t *testing.T) { f.wantDeviceErr(t, tt.err(), tt.verb, tt.errno) })
	}
	if err := create(caps.MaxSRQWR, 1); err != nil {
		t.Fatalf("max_wr = max_srq_wr: %v", err)
	}
}

// srqDestroyOrder: QP before SRQ, SRQ before PD, as with verbs: the SRQ
// is busy (and still usable) while a QP uses it, the PD while the SRQ
// lives; a destroyed SRQ takes no QP and is not destroyed twice.
func (f Fabric) srqDestroyOrder(t *testing.T) {
	s := f.side(t)
	c := s.cq(t, 4)
	m := s.mr(t, 64, fabric.AccessLocalWrite)
	srq := s.srq(t, 4)
	q := s.qp(t, c, 2, srq)
	wantVerbErr(t, srq.Destroy(), "ibv_destroy_srq", syscall.EBUSY)
	if err := srq.PostRecv(7, m, 0, 64); err != nil {
		t.Fatalf("SRQ unusable after the refused destroy: %v", err)
	}
	if err := q.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := m.Dereg(); err != nil {
		t.Fatal(err)
	}
	wantVerbErr(t, s.pd.Dealloc(), "ibv_dealloc_pd", syscall.EBUSY)
	if err := srq.Destroy(); err != nil {
		t.Fatalf("SRQ after its QP: %v", err)
	}
	// The receive still posted vanishes without a completion.
	wantEmpty(t, c)
	wantVerbErr(t, srq.Destroy(), "ibv_destroy_srq", syscall.EINVAL)
	_, err := s.pd.CreateQP(fabric.QPInitAttr{SendCQ: c, RecvCQ: c, SRQ: srq, MaxSendWR: 2, MaxSendSGE: 1})
	wantVerbErr(t, err, "ibv_create_qp", syscall.EINVAL)
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := s.pd.Dealloc(); err != nil {
		t.Fatalf("PD after its SRQ: %v", err)
	}
}
