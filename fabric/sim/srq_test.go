package sim

import (
	"context"
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

// An SRQ takes buffers only from an MR of its own PD, and serves QPs
// only of its own context (the suite checks the device's other limits).
func TestSRQForeign(t *testing.T) {
	s := newSide(t, Options{})
	other := newSide(t, Options{})
	srq := s.srq(t, 2)
	c := s.cq(t, 4)
	wantVerbErr(t, srq.PostRecv(1, other.mr(t, 64), 0, 8), "ibv_post_srq_recv", syscall.EINVAL)
	_, err := s.pd.CreateQP(fabric.QPInitAttr{SendCQ: c, RecvCQ: c, SRQ: other.srq(t, 2), MaxSendWR: 1})
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
	if got, want := p.InUse(), map[string]int{"pd": 1, "cq": 1, "mr": 0, "qp": 3, "srq": 1, "ah": 0}; !reflect.DeepEqual(got, want) {
		t.Errorf("in use %v, want %v", got, want)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := p.InUse(), map[string]int{"pd": 0, "cq": 0, "mr": 0, "qp": 0, "srq": 0, "ah": 0}; !reflect.DeepEqual(got, want) {
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
	// Each side counts the RNR NAKs under rxe's names: b sent them, a
	// received them.
	eventually.True(t, guard, "RNR NAKs counted", func() bool {
		return b.dev.(fabric.CounterReader).Counters()["send_rnr_err"] >= 2 && a.dev.(fabric.CounterReader).Counters()["rcvd_rnr_err"] >= 2
	})
	if n := a.dev.(fabric.CounterReader).Counters()["send_rnr_err"]; n != 0 {
		t.Errorf("the requester counted %d RNR NAKs sent", n)
	}
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
	// Each receive went straight to a held message: none is left over.
	if n := postedOf(srq); n != 0 {
		t.Errorf("SRQ holds %d receives after delivering both held messages, want 0", n)
	}
}

// postedOf is how many receives q holds.
func postedOf(q fabric.SRQ) int { return q.(*srq).posted() }
