package sim

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"syscall"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
)

func (s *side) srq(t testing.TB, maxWR int) fabric.SRQ {
	t.Helper()
	q, err := s.pd.CreateSRQ(maxWR, 1)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// srqQP is an RC QP on s that takes its receives from srq.
func (s *side) srqQP(t testing.TB, scq, rcq fabric.CQ, srq fabric.SRQ) fabric.QP {
	t.Helper()
	q, err := s.pd.CreateQP(fabric.QPInitAttr{SendCQ: scq, RecvCQ: rcq, SRQ: srq, MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestSRQRoundTrips connects n client QPs on A to n QPs on B that share
// one SRQ of depth buffers and one CQ, as the server's srq mode does, and
// runs verified echoes: B finds the client by WC.QPN, the payload by
// WC.WRID (the SRQ buffer), copies it to that client's send slot, reposts
// the buffer and echoes. With fewer buffers than clients sending at once,
// the surplus SENDs wait (RNR) and are delivered as buffers are reposted.
func TestSRQRoundTrips(t *testing.T) {
	for _, tt := range []struct {
		name             string
		clients, buffers int
		rounds           int
	}{
		{"one client", 1, 1, 5},
		{"buffer per client", 16, 16, 3},
		{"fewer buffers than clients", 16, 3, 3},
		{"one buffer for many", 8, 1, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const msg = 64
			a, b := newSide(t, Options{}), newSide(t, Options{})
			acq := a.cq(t, 4*tt.clients)
			bcq := b.cq(t, 4*tt.clients)
			sq := b.srq(t, tt.buffers)
			am := a.mr(t, 2*msg*tt.clients) // per client: send slot, recv slot
			pool := b.mr(t, msg*(tt.clients+tt.buffers))
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
				qas[i] = a.qp(t, acq, acq, 2)
				qbs[i] = b.srqQP(t, bcq, bcq, sq)
				connect(t, a, qas[i], b, qbs[i])
				byQPN[qbs[i].QPN()] = i
			}
			for round := range tt.rounds {
				for i, q := range qas {
					if err := q.PostRecv(uint64(i), am, 2*msg*i+msg, msg); err != nil {
						t.Fatal(err)
					}
					p := am.Buf()[2*msg*i : 2*msg*i+msg]
					copy(p, fmt.Sprintf("round %d client %d", round, i))
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
							t.Fatalf("echo send %+v", wc)
						}
						sent++
						continue
					}
					i, ok := byQPN[wc.QPN]
					if !ok || seen[i] || wc.Status != fabric.WCSuccess || wc.ByteLen != msg || wc.WRID >= uint64(tt.buffers) {
						t.Fatalf("round %d: recv completion %+v (client %d known %v)", round, wc, i, ok)
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
				// A gets each client's send completion and its echo.
				for range 2 * tt.clients {
					wc := await(t, acq)
					if wc.Status != fabric.WCSuccess {
						t.Fatalf("A completion %+v", wc)
					}
					if wc.Opcode == fabric.WCRecv {
						i := int(wc.WRID)
						if !bytes.Equal(am.Buf()[2*msg*i+msg:2*msg*i+2*msg], am.Buf()[2*msg*i:2*msg*i+msg]) {
							t.Fatalf("round %d: echo to client %d differs", round, i)
						}
					}
				}
			}
			if got := sq.(*srq).posted(); got != tt.buffers {
				t.Errorf("SRQ holds %d receives after the rounds, want all %d back", got, tt.buffers)
			}
		})
	}
}

// A QP created with an SRQ has no receive queue of its own: PostRecv on it
// fails with EINVAL in every state, and MaxRecvWR is ignored (even one
// above max_qp_wr, which rxe checks only without an SRQ).
func TestSRQQPHasNoRQ(t *testing.T) {
	s := newSide(t, Options{Caps: fabric.Caps{MaxQPWR: 16}})
	c := s.cq(t, 8)
	srq := s.srq(t, 4)
	m := s.mr(t, 64)
	q, err := s.pd.CreateQP(fabric.QPInitAttr{SendCQ: c, RecvCQ: c, SRQ: srq, MaxSendWR: 2, MaxRecvWR: 17, MaxSendSGE: 1, MaxRecvSGE: 99})
	if err != nil {
		t.Fatalf("MaxRecvWR/SGE above the caps with an SRQ: %v", err)
	}
	p := path{destQPN: 0x42, dlid: s.dev.Port().LID, timeout: 14, retryCnt: 7}
	for _, step := range []struct {
		state string
		next  func() error
	}{
		{"RESET", func() error { return q.ToInit(fabric.InitAttr{Port: 1}) }},
		{"INIT", func() error { return q.ToRTR(rtr(p)) }},
		{"RTR", func() error { return q.ToRTS(rts(p)) }},
		{"RTS", func() error { return nil }},
	} {
		t.Run(step.state, func(t *testing.T) {
			wantVerbErr(t, q.PostRecv(1, m, 0, 64), "ibv_post_recv", syscall.EINVAL)
		})
		if err := step.next(); err != nil {
			t.Fatal(err)
		}
	}
	// The SRQ itself takes the receive.
	if err := srq.PostRecv(1, m, 0, 64); err != nil {
		t.Fatal(err)
	}
	wantEmpty(t, c)
}

func TestSRQArgs(t *testing.T) {
	s := newSide(t, Options{Caps: fabric.Caps{MaxSRQWR: 100}})
	other := newSide(t, Options{})
	srq := s.srq(t, 2)
	foreignMR := other.mr(t, 64)
	foreignSRQ := other.srq(t, 2)
	m := s.mr(t, 64)
	c := s.cq(t, 4)
	tests := []struct {
		name  string
		err   func() error
		verb  string
		errno syscall.Errno
	}{
		{"max_wr 0", func() error { _, err := s.pd.CreateSRQ(0, 1); return err }, "ibv_create_srq", syscall.EINVAL},
		{"max_wr > max_srq_wr", func() error { _, err := s.pd.CreateSRQ(101, 1); return err }, "ibv_create_srq", syscall.EINVAL},
		{"max_sge > max_srq_sge", func() error { _, err := s.pd.CreateSRQ(1, maxSRQSGE+1); return err }, "ibv_create_srq", syscall.EINVAL},
		{"buffer outside the MR", func() error { return srq.PostRecv(1, m, 60, 8) }, "ibv_post_srq_recv", syscall.EINVAL},
		{"MR of another PD", func() error { return srq.PostRecv(1, foreignMR, 0, 8) }, "ibv_post_srq_recv", syscall.EINVAL},
		{"SRQ of another context", func() error {
			_, err := s.pd.CreateQP(fabric.QPInitAttr{SendCQ: c, RecvCQ: c, SRQ: foreignSRQ, MaxSendWR: 1})
			return err
		}, "ibv_create_qp", syscall.EINVAL},
		// Asked for 2, rxe rounds the queue to 3 (4 slots, one kept
		// empty), as for QPs and CQs.
		{"SRQ full", func() error {
			for i := range 3 {
				if err := srq.PostRecv(uint64(i), m, 0, 8); err != nil {
					return fmt.Errorf("receive %d: %w", i, err)
				}
			}
			return srq.PostRecv(3, m, 0, 8)
		}, "ibv_post_srq_recv", syscall.ENOMEM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantVerbErr(t, tt.err(), tt.verb, tt.errno) })
	}
	if _, err := s.pd.CreateSRQ(100, maxSRQSGE); err != nil {
		t.Fatalf("max_wr = max_srq_wr, max_sge = max_srq_sge: %v", err)
	}
}

// Destroying goes QP before SRQ, SRQ before PD, as with verbs: the SRQ is
// busy while a QP uses it, the PD while the SRQ lives; a QP cannot be
// created on a destroyed SRQ.
func TestSRQDestroyOrder(t *testing.T) {
	s := newSide(t, Options{})
	c := s.cq(t, 4)
	m := s.mr(t, 16)
	srq := s.srq(t, 4)
	q := s.srqQP(t, c, c, srq)
	if err := srq.PostRecv(7, m, 0, 16); err != nil {
		t.Fatal(err)
	}
	wantVerbErr(t, srq.Destroy(), "ibv_destroy_srq", syscall.EBUSY)
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
	wantVerbErr(t, srq.PostRecv(8, s.mr(t, 16), 0, 16), "ibv_post_srq_recv", syscall.EINVAL)
	_, err := s.pd.CreateQP(fabric.QPInitAttr{SendCQ: c, RecvCQ: c, SRQ: srq, MaxSendWR: 1})
	wantVerbErr(t, err, "ibv_create_qp", syscall.EINVAL)
}

// Device.Close releases an SRQ left behind with its QP, returning the
// counts to the pools; InUse reports SRQs.
func TestSRQInUseAndClose(t *testing.T) {
	p := New(Options{})
	dev, err := p.Open(context.Background(), fabric.DeviceConfig{GIDIndex: -1})
	if err != nil {
		t.Fatal(err)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	c, err := dev.CreateCQ(4)
	if err != nil {
		t.Fatal(err)
	}
	srq, err := pd.CreateSRQ(8, 1)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := pd.CreateQP(fabric.QPInitAttr{SendCQ: c, RecvCQ: c, SRQ: srq, MaxSendWR: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := p.InUse(), map[string]int{"pd": 1, "cq": 1, "mr": 0, "qp": 3, "srq": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("in use %v, want %v", got, want)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := p.InUse(), map[string]int{"pd": 0, "cq": 0, "mr": 0, "qp": 0, "srq": 0}; !reflect.DeepEqual(got, want) {
		t.Errorf("after Close: %v, want %v", got, want)
	}
}

// A SEND whose QP's SRQ is empty is held (RNR) and not acknowledged; a
// receive posted to the SRQ delivers it, and then the send completes.
func TestSRQHoldUntilPosted(t *testing.T) {
	a, b := newSide(t, Options{}), newSide(t, Options{})
	acq, bcq := a.cq(t, 8), b.cq(t, 8)
	srq := b.srq(t, 4)
	qa, qb := a.qp(t, acq, acq, 4), b.srqQP(t, bcq, bcq, srq)
	m, r := a.mr(t, 64), b.mr(t, 64)
	connect(t, a, qa, b, qb)
	copy(m.Buf(), "first-second")
	if err := qa.PostSend(1, m, 0, 5); err != nil {
		t.Fatal(err)
	}
	if err := qa.PostSend(2, m, 6, 6); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, guard, "both messages are held", func() bool { return heldCount(qb) == 2 })
	wantEmpty(t, acq)
	wantEmpty(t, bcq)
	for i, want := range []string{"first", "second"} {
		if err := srq.PostRecv(uint64(10+i), r, 32*i, 32); err != nil {
			t.Fatal(err)
		}
		got := await(t, bcq)
		if got.WRID != uint64(10+i) || got.QPN != qb.QPN() || got.ByteLen != len(want) || string(r.Buf()[32*i:32*i+got.ByteLen]) != want {
			t.Fatalf("receive %d: %+v %q, want %q", i, got, r.Buf()[32*i:32*i+len(want)], want)
		}
		if got := await(t, acq); got.WRID != uint64(1+i) || got.Status != fabric.WCSuccess {
			t.Fatalf("send %d: %+v", i, got)
		}
	}
}
