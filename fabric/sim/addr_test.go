package sim

import (
	"bytes"
	"context"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// sideAt is a side whose port has address addr (its wire and GID).
func sideAt(t testing.TB, addr string) *side {
	t.Helper()
	dev, err := New(Options{}).Open(context.Background(), fabric.DeviceConfig{GIDIndex: -1, Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Close() })
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	return &side{dev: dev, pd: pd}
}

// TestAddresses connects QPs on devices with different addresses (two
// hosts, as far as the wire can tell: every 127/8 address is this
// machine's) by DGID and DLID, and checks that a QP takes requests only
// from the address of the GID it was connected to.
func TestAddresses(t *testing.T) {
	a, b, c := sideAt(t, "127.0.0.2"), sideAt(t, "127.0.0.3"), sideAt(t, "127.0.0.4")
	for _, s := range []struct {
		side *side
		gid  string
	}{{a, "::ffff:127.0.0.2"}, {b, "::ffff:127.0.0.3"}} {
		if got := s.side.dev.Port().GID.String(); got != s.gid {
			t.Errorf("GID %s, want %s", got, s.gid)
		}
	}

	t.Run("across", func(t *testing.T) {
		acq, bcq := a.cq(t, 8), b.cq(t, 8)
		qa, qb := a.qp(t, acq, acq, 2), b.qp(t, bcq, bcq, 2)
		m, r := a.mr(t, 64), b.mr(t, 64)
		ready(t, qa, path{destQPN: qb.QPN(), dlid: b.dev.Port().LID, dgid: b.dev.Port().GID, rqpsn: 2, sqpsn: 1, timeout: 14, retryCnt: 7})
		ready(t, qb, path{destQPN: qa.QPN(), dlid: a.dev.Port().LID, dgid: a.dev.Port().GID, rqpsn: 1, sqpsn: 2, timeout: 14, retryCnt: 7})
		copy(m.Buf(), "across addresses")
		if err := qb.PostRecv(1, r, 0, 64); err != nil {
			t.Fatal(err)
		}
		if err := qa.PostSend(2, m, 0, 16); err != nil {
			t.Fatal(err)
		}
		if wc := await(t, bcq); wc.Status != fabric.WCSuccess || !bytes.Equal(r.Buf()[:16], []byte("across addresses")) {
			t.Fatalf("receive %+v %q", wc, r.Buf()[:16])
		}
		if wc := await(t, acq); wc.Status != fabric.WCSuccess {
			t.Fatalf("send %+v", wc)
		}
	})

	t.Run("wrong-address-dropped", func(t *testing.T) {
		// qb believes its peer is at a's address, with qc's QPN and
		// LID; qc on c sends to it. LID and QPN match, the address does
		// not: the request is dropped and qc runs out of retries.
		bcq, ccq := b.cq(t, 8), c.cq(t, 8)
		qb, qc := b.qp(t, bcq, bcq, 2), c.qp(t, ccq, ccq, 2)
		m, r := c.mr(t, 64), b.mr(t, 64)
		ready(t, qb, path{destQPN: qc.QPN(), dlid: c.dev.Port().LID, dgid: a.dev.Port().GID, rqpsn: 1, sqpsn: 2, timeout: 14, retryCnt: 7})
		if err := qb.PostRecv(1, r, 0, 64); err != nil {
			t.Fatal(err)
		}
		// Timeout 1 is floored to 1 ms: three attempts.
		ready(t, qc, path{destQPN: qb.QPN(), dlid: b.dev.Port().LID, dgid: b.dev.Port().GID, rqpsn: 2, sqpsn: 1, timeout: 1, retryCnt: 2})
		if err := qc.PostSend(2, m, 0, 8); err != nil {
			t.Fatal(err)
		}
		if wc := await(t, ccq); wc.Status != fabric.WCRetryExcErr {
			t.Fatalf("send from the wrong address: %+v, want %s", wc, fabric.WCRetryExcErr)
		}
		wantEmpty(t, bcq)
	})

	t.Run("bad-address", func(t *testing.T) {
		_, err := New(Options{}).Open(context.Background(), fabric.DeviceConfig{Addr: "fe80::1"})
		if err == nil {
			t.Fatal("an IPv6 address was accepted")
		}
	})
}
