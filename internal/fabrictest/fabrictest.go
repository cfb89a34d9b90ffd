// Package fabrictest is what every fabric must do, written once: shared
// receive queues, unreliable datagrams, completion errors, QP state transitions and the
// device's caps, checked against the fabric interface alone. fabric/sim
// runs it in its tests, and fabric/verbs inside the Soft-RoCE guest on
// rxe0, so the simulation and the device are held to the same behaviour
// instead of each to a copy of the tests.
package fabrictest

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// Fabric is the fabric under test.
type Fabric struct {
	// Open opens a fresh device context; the suite closes it when the
	// test ends, with whatever it still holds. Two contexts opened in
	// one test must reach each other.
	Open func(tb testing.TB) fabric.Device
	// DeviceErrnos says the device's own checks (its caps, a full queue)
	// answer with the errnos rxe returns, as sim's do. Without it those
	// calls need only fail; what the interface itself promises (EINVAL
	// for a verb out of state, EBUSY for a resource in use) is checked
	// on every fabric.
	DeviceErrnos bool
}

// Run runs the suite, each check a subtest of t.
func Run(t *testing.T, f Fabric) {
	t.Run("Caps", f.caps)
	t.Run("QPTransitions", f.qpTransitions)
	t.Run("PostBeforeRTS", f.postBeforeRTS)
	t.Run("CompletionErrors", f.completionErrors)
	t.Run("SRQRoundTrips", f.srqRoundTrips)
	t.Run("SRQQPHasNoRQ", f.srqQPHasNoRQ)
	t.Run("SRQArgs", f.srqArgs)
	t.Run("SRQDestroyOrder", f.srqDestroyOrder)
	t.Run("UDDatagrams", f.udDatagrams)
}

// side is one device context and a PD on it.
type side struct {
	dev fabric.Device
	pd  fabric.PD
}

func (f Fabric) side(t testing.TB) *side {
	t.Helper()
	dev := f.Open(t)
	t.Cleanup(func() {
		if err := dev.Close(); err != nil {
			t.Errorf("close %s: %v", dev.Name(), err)
		}
	})
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	return &side{dev: dev, pd: pd}
}

func (s *side) cq(t testing.TB, n int) fabric.CQ {
	t.Helper()
	c, err := s.dev.CreateCQ(n)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (s *side) mr(t testing.TB, n int, access fabric.Access) fabric.MR {
	t.Helper()
	m, err := s.pd.RegMR(n, access)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// qp is an RC QP on s; with srq set it takes its receives from there.
func (s *side) qp(t testing.TB, c fabric.CQ, wr int, srq fabric.SRQ) fabric.QP {
	t.Helper()
	q, err := s.pd.CreateQP(fabric.QPInitAttr{SendCQ: c, RecvCQ: c, SRQ: srq, MaxSendWR: wr, MaxRecvWR: wr, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func (s *side) srq(t testing.TB, maxWR int) fabric.SRQ {
	t.Helper()
	q, err := s.pd.CreateSRQ(maxWR, 1)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

const remoteAccess = fabric.AccessLocalWrite | fabric.AccessRemoteWrite | fabric.AccessRemoteRead

func (s *side) toInit(q fabric.QP) error {
	return q.ToInit(fabric.InitAttr{Port: s.dev.Port().Port, Access: remoteAccess})
}

// rtr is the RTR of a QP on s towards QP qpn on peer, expecting the
// peer's send PSN rqpsn: the path the server and client set up.
func (s *side) rtr(peer *side, qpn, rqpsn uint32) fabric.RTRAttr {
	here, there := s.dev.Port(), peer.dev.Port()
	return fabric.RTRAttr{PathMTU: here.ActiveMTU, DestQPN: qpn, RQPSN: rqpsn, MaxDestRdAtomic: 1, MinRNRTimer: 12,
		DLID: there.LID, DGID: there.GID, GIDIndex: here.GIDIndex, HopLimit: 64, Port: here.Port}
}

func rts(psn uint32) fabric.RTSAttr {
	return fabric.RTSAttr{SQPSN: psn, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}
}

const psnA, psnB = 0x111111, 0x222222

// connect brings qa (on a) and qb (on b) to RTS towards each other with
// matching PSNs, as the server and client do after their exchange.
func connect(t testing.TB, a *side, qa fabric.QP, b *side, qb fabric.QP) {
	t.Helper()
	for _, err := range []error{
		a.toInit(qa), b.toInit(qb),
		qa.ToRTR(a.rtr(b, qb.QPN(), psnB)), qb.ToRTR(b.rtr(a, qa.QPN(), psnA)),
		qa.ToRTS(rts(psnA)), qb.ToRTS(rts(psnB)),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// await bounds a wait for a completion; rxe in an emulated guest with
// RNR retries is the slowest fabric it waits on.
func await(t testing.TB, c fabric.CQ) fabric.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wc, err := fabric.Await(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	return wc
}

func wantEmpty(t testing.TB, c fabric.CQ) {
	t.Helper()
	var wc [4]fabric.WC
	n, err := c.Poll(wc[:])
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("CQ holds %d unexpected completions: %+v", n, wc[:n])
	}
}

// wantVerbErr checks err is a VerbError with the given verb and errno.
func wantVerbErr(t testing.TB, err error, verb string, errno syscall.Errno) {
	t.Helper()
	var ve *fabric.VerbError
	if !errors.As(err, &ve) || ve.Verb != verb || ve.Errno != errno {
		t.Fatalf("got %v, want %s: %s", err, verb, fabric.ErrnoName(errno))
	}
}

// wantDeviceErr checks an error the device's own checks return: exactly
// when the fabric answers with rxe's errnos, else only that it failed.
func (f Fabric) wantDeviceErr(t testing.TB, err error, verb string, errno syscall.Errno) {
	t.Helper()
	if f.DeviceErrnos {
		wantVerbErr(t, err, verb, errno)
	} else if err == nil {
		t.Fatalf("%s accepted, want an error", verb)
	}
}
