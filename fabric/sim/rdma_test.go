package sim

import (
	"bytes"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
)

// remotePair connects a requester QP on a to a responder QP on b whose
// INIT access is access, and registers on b a 4 KiB region with regAccess.
func remotePair(t *testing.T, access, regAccess fabric.Access) (a, b *side, qa fabric.QP, ca fabric.CQ, qb fabric.QP, cb fabric.CQ, region fabric.MR) {
	t.Helper()
	a, b = newSide(t, Options{}), newSide(t, Options{})
	ca, cb = a.cq(t, 16), b.cq(t, 16)
	qa, qb = a.qp(t, ca, ca, 4), b.qp(t, cb, cb, 4)
	pa := path{destQPN: qb.QPN(), dlid: b.dev.Port().LID, rqpsn: 0x222222, sqpsn: 0x111111, timeout: 14, retryCnt: 7}
	pb := path{destQPN: qa.QPN(), dlid: a.dev.Port().LID, rqpsn: 0x111111, sqpsn: 0x222222, timeout: 14, retryCnt: 7}
	ready(t, qa, pa)
	if err := qb.ToInit(fabric.InitAttr{Port: 1, Access: access}); err != nil {
		t.Fatal(err)
	}
	if err := qb.ToRTR(rtr(pb)); err != nil {
		t.Fatal(err)
	}
	if err := qb.ToRTS(rts(pb)); err != nil {
		t.Fatal(err)
	}
	region, err := b.pd.RegMR(4096, regAccess)
	if err != nil {
		t.Fatal(err)
	}
	return a, b, qa, ca, qb, cb, region
}

const remoteRW = fabric.AccessLocalWrite | fabric.AccessRemoteWrite | fabric.AccessRemoteRead

func TestWriteThenRead(t *testing.T) {
	a, _, qa, ca, _, cb, region := remotePair(t, remoteRW, remoteRW)
	if region.RKey() == 0 || region.Addr() == 0 {
		t.Fatalf("remote region has rkey %#x addr %#x", region.RKey(), region.Addr())
	}
	src := a.mr(t, 256)
	for i := range src.Buf()[:64] {
		src.Buf()[i] = byte(i*7 + 1)
	}
	if err := qa.PostWrite(11, src, 0, 64, region.Addr()+128, region.RKey()); err != nil {
		t.Fatal(err)
	}
	wc := await(t, ca)
	if wc.WRID != 11 || wc.Status != fabric.WCSuccess || wc.Opcode != fabric.WCRDMAWrite || wc.ByteLen != 64 {
		t.Fatalf("write completion %+v", wc)
	}
	// Completed means placed: the responder's memory holds it already.
	if !bytes.Equal(region.Buf()[128:192], src.Buf()[:64]) {
		t.Fatal("the write's completion came before its data was in the region")
	}
	// Read it back, behind a second write to another place: requests
	// execute in order, so the read sees both.
	if err := qa.PostWrite(12, src, 0, 8, region.Addr(), region.RKey()); err != nil {
		t.Fatal(err)
	}
	if err := qa.PostRead(13, src, 128, 128, region.Addr(), region.RKey()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		id uint64
		op fabric.Opcode
		n  int
	}{{12, fabric.WCRDMAWrite, 8}, {13, fabric.WCRDMARead, 128}} {
		wc := await(t, ca)
		if wc.WRID != want.id || wc.Status != fabric.WCSuccess || wc.Opcode != want.op || wc.ByteLen != want.n {
			t.Fatalf("completion %+v, want wrID %d %s of %d bytes", wc, want.id, want.op, want.n)
		}
	}
	if !bytes.Equal(src.Buf()[128:256], region.Buf()[:128]) {
		t.Fatal("the read did not bring the region's bytes")
	}
	if !bytes.Equal(src.Buf()[128:136], src.Buf()[:8]) {
		t.Fatal("the read did not see the write posted before it")
	}
	wantEmpty(t, cb) // one-sided: nothing completes at the responder
}

func TestRemoteAccessErrors(t *testing.T) {
	tests := []struct {
		name      string
		access    fabric.Access // responder QP
		regAccess fabric.Access
		read      bool
		off       uint64
		n         int
		badKey    bool
	}{
		{name: "write without QP remote write", access: fabric.AccessLocalWrite | fabric.AccessRemoteRead, regAccess: remoteRW, n: 8},
		{name: "read without QP remote read", access: fabric.AccessLocalWrite | fabric.AccessRemoteWrite, regAccess: remoteRW, read: true, n: 8},
		{name: "write to a read-only region", access: remoteRW, regAccess: fabric.AccessLocalWrite | fabric.AccessRemoteRead, n: 8},
		{name: "unknown rkey", access: remoteRW, regAccess: remoteRW, n: 8, badKey: true},
		{name: "write past the region", access: remoteRW, regAccess: remoteRW, off: 4090, n: 8},
		{name: "read past the region", access: remoteRW, regAccess: remoteRW, read: true, off: 4096, n: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, _, qa, ca, qb, _, region := remotePair(t, tc.access, tc.regAccess)
			buf := a.mr(t, 64)
			key := region.RKey()
			if tc.badKey {
				key ^= 0x5500
			}
			var err error
			if tc.read {
				err = qa.PostRead(1, buf, 0, tc.n, region.Addr()+tc.off, key)
			} else {
				err = qa.PostWrite(1, buf, 0, tc.n, region.Addr()+tc.off, key)
			}
			if err != nil {
				t.Fatal(err)
			}
			wc := await(t, ca)
			if wc.Status != fabric.WCRemAccessErr || wc.Status.Name() != "REM_ACCESS_ERR" {
				t.Fatalf("completion %+v (%s), want REM_ACCESS_ERR", wc, wc.Status)
			}
			if qa.State() != fabric.QPSErr || qb.State() != fabric.QPSErr {
				t.Errorf("after the access error: requester %s, responder %s; want both ERR", qa.State(), qb.State())
			}
			// Later work is flushed.
			if err := qa.PostWrite(2, buf, 0, 8, region.Addr(), region.RKey()); err != nil {
				t.Fatal(err)
			}
			if wc := await(t, ca); wc.Status != fabric.WCWRFlushErr || wc.Opcode != fabric.WCRDMAWrite {
				t.Fatalf("post after error: %+v", wc)
			}
		})
	}
}

func TestReadNeedsLocalWrite(t *testing.T) {
	a, _, qa, _, _, _, region := remotePair(t, remoteRW, remoteRW)
	ro, err := a.pd.RegMR(64, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantVerbErr(t, qa.PostRead(1, ro, 0, 8, region.Addr(), region.RKey()), "ibv_post_send", 22)
}

// A WRITE that arrives behind a SEND waiting for a receive (RNR) is
// executed after it, in PSN order.
func TestWriteBehindHeldSend(t *testing.T) {
	a, b, qa, ca, qb, cb, region := remotePair(t, remoteRW, remoteRW)
	buf := a.mr(t, 64)
	copy(buf.Buf(), "0123456789")
	if err := qa.PostSend(1, buf, 0, 10); err != nil {
		t.Fatal(err)
	}
	if err := qa.PostWrite(2, buf, 0, 10, region.Addr(), region.RKey()); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, guard, "the send and the write are held", func() bool { return heldCount(qb) == 2 })
	if region.Buf()[0] != 0 {
		t.Fatal("the write overtook the held send")
	}
	wantEmpty(t, ca)
	rb := b.mr(t, 64)
	if err := qb.PostRecv(9, rb, 0, 64); err != nil {
		t.Fatal(err)
	}
	if wc := await(t, cb); wc.WRID != 9 || wc.ByteLen != 10 {
		t.Fatalf("receive %+v", wc)
	}
	for _, id := range []uint64{1, 2} {
		if wc := await(t, ca); wc.WRID != id || wc.Status != fabric.WCSuccess {
			t.Fatalf("completion %+v, want %d", wc, id)
		}
	}
	if string(region.Buf()[:10]) != "0123456789" {
		t.Fatalf("region holds %q", region.Buf()[:10])
	}
}

// rtt is the time from posting a SEND to its completion, which the
// responder's acknowledgement makes.
func rtt(t *testing.T, q fabric.QP, c fabric.CQ, buf fabric.MR, id uint64) time.Duration {
	t.Helper()
	start := time.Now()
	if err := q.PostSend(id, buf, 0, 8); err != nil {
		t.Fatal(err)
	}
	if wc := await(t, c); wc.Status != fabric.WCSuccess || wc.WRID != id {
		t.Fatalf("completion %+v", wc)
	}
	return time.Since(start)
}

func TestServiceDelay(t *testing.T) {
	const delay = 150 * time.Millisecond
	a := newSide(t, Options{})
	b := newSide(t, Options{ServiceDelay: delay, ServiceDelayFrom: 2})
	ca, cb := a.cq(t, 16), b.cq(t, 16)
	qa, qb := a.qp(t, ca, ca, 4), b.qp(t, cb, cb, 4)
	connect(t, a, qa, b, qb)
	rb, buf := b.mr(t, 64), a.mr(t, 64)
	for i := 0; i < 8; i++ {
		if err := qb.PostRecv(uint64(i), rb, 0, 64); err != nil && i < 4 {
			t.Fatal(err)
		}
	}
	// One QP on the responder's device: below the threshold, no delay.
	// How long the round trip took says nothing a loaded host cannot
	// blur; that no frame entered the delay line does.
	rtt(t, qa, ca, buf, 1)
	await(t, cb)
	if delayUsed(b) {
		t.Error("below the threshold a frame went through the delay line")
	}
	// A second QP there: every frame it sends waits its turn.
	b.qp(t, cb, cb, 1)
	if d := rtt(t, qa, ca, buf, 2); d < delay {
		t.Errorf("at the threshold a round trip took %v, less than the delay %v", d, delay)
	}
	await(t, cb)
	// Three messages at once: their acknowledgements leave one per delay.
	start := time.Now()
	for id := uint64(3); id < 6; id++ {
		if err := qa.PostSend(id, buf, 0, 8); err != nil {
			t.Fatal(err)
		}
	}
	for id := uint64(3); id < 6; id++ {
		if wc := await(t, ca); wc.WRID != id || wc.Status != fabric.WCSuccess {
			t.Fatalf("completion %+v, want %d", wc, id)
		}
	}
	if d := time.Since(start); d < 3*delay {
		t.Errorf("three messages served in %v, want at least %v", d, 3*delay)
	}
}

// delayUsed tells whether a frame of s's device has waited its turn in
// the delay line (the line notes when the last one is due).
func delayUsed(s *side) bool {
	d := s.dev.(*device)
	d.delayMu.Lock()
	defer d.delayMu.Unlock()
	return !d.delay.last.IsZero()
}
