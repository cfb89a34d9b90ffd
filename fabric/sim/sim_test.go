package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
)

// side is one simulated host: a device context and a PD.
type side struct {
	dev fabric.Device
	pd  fabric.PD
}

func newSide(t testing.TB, opts Options) *side {
	t.Helper()
	dev, err := New(opts).Open(context.Background(), fabric.DeviceConfig{GIDIndex: -1})
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

func (s *side) cq(t testing.TB, n int) fabric.CQ {
	t.Helper()
	c, err := s.dev.CreateCQ(n)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (s *side) mr(t testing.TB, n int) fabric.MR {
	t.Helper()
	m, err := s.pd.RegMR(n, fabric.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (s *side) qp(t testing.TB, scq, rcq fabric.CQ, wr int) fabric.QP {
	t.Helper()
	q, err := s.pd.CreateQP(fabric.QPInitAttr{SendCQ: scq, RecvCQ: rcq, MaxSendWR: wr, MaxRecvWR: wr, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// link parameters of one QP towards its peer.
type path struct {
	destQPN  uint32
	dlid     uint16
	rqpsn    uint32
	sqpsn    uint32
	timeout  int
	retryCnt int
	dgid     fabric.GID // zero: loopbackGID
}

func rtr(p path) fabric.RTRAttr {
	if p.dgid == (fabric.GID{}) {
		p.dgid = loopbackGID
	}
	return fabric.RTRAttr{PathMTU: fabric.MTU4096, DestQPN: p.destQPN, RQPSN: p.rqpsn,
		MaxDestRdAtomic: 1, MinRNRTimer: 12, DLID: p.dlid, DGID: p.dgid, GIDIndex: 1, HopLimit: 64, Port: 1}
}

func rts(p path) fabric.RTSAttr {
	return fabric.RTSAttr{SQPSN: p.sqpsn, Timeout: p.timeout, RetryCnt: p.retryCnt, RNRRetry: 7, MaxRdAtomic: 1}
}

func ready(t testing.TB, q fabric.QP, p path) {
	t.Helper()
	if err := q.ToInit(fabric.InitAttr{Port: 1, Access: fabric.AccessLocalWrite}); err != nil {
		t.Fatal(err)
	}
	if err := q.ToRTR(rtr(p)); err != nil {
		t.Fatal(err)
	}
	if err := q.ToRTS(rts(p)); err != nil {
		t.Fatal(err)
	}
}

// connect brings qa (on a) and qb (on b) to RTS towards each other with
// matching PSNs and the timeout the server and client use.
func connect(t testing.TB, a *side, qa fabric.QP, b *side, qb fabric.QP) {
	t.Helper()
	ready(t, qa, path{destQPN: qb.QPN(), dlid: b.dev.Port().LID, rqpsn: 0x222222, sqpsn: 0x111111, timeout: 14, retryCnt: 7})
	ready(t, qb, path{destQPN: qa.QPN(), dlid: a.dev.Port().LID, rqpsn: 0x111111, sqpsn: 0x222222, timeout: 14, retryCnt: 7})
}

func await(t testing.TB, c fabric.CQ) fabric.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc, err := fabric.Await(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	return wc
}

// wantVerbErr checks err is a VerbError with the given verb and errno.
func wantVerbErr(t testing.TB, err error, verb string, errno syscall.Errno) {
	t.Helper()
	var ve *fabric.VerbError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want %s: %s", err, verb, fabric.ErrnoName(errno))
	}
	if ve.Verb != verb || ve.Errno != errno {
		t.Fatalf("got %s: %s (%v), want %s: %s", ve.Verb, fabric.ErrnoName(ve.Errno), ve, verb, fabric.ErrnoName(errno))
	}
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

// guard bounds a wait for the fabric's goroutines to get somewhere.
const guard = 5 * time.Second

func gidOf(s string) fabric.GID {
	var g fabric.GID
	if err := g.UnmarshalText([]byte(s)); err != nil {
		panic(err)
	}
	return g
}

func TestDefaultCaps(t *testing.T) {
	want := fabric.Caps{MaxQP: 1048560, MaxQPWR: 1048576, MaxSGE: 32, MaxCQ: 1048576, MaxCQE: 32767,
		MaxMR: 524287, MaxMRSize: 0xffffffffffffffff, MaxPD: 1048576, MaxSRQ: 917503, MaxSRQWR: 1048576, MaxAH: 32767, FWVersion: "sim"}
	if got := DefaultCaps(); got != want {
		t.Fatalf("DefaultCaps() = %+v, want %+v", got, want)
	}
	p := New(Options{Caps: fabric.Caps{MaxQP: 5, MaxMR: 7}})
	dev, err := p.Open(context.Background(), fabric.DeviceConfig{GIDIndex: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	want.MaxQP, want.MaxMR = 5, 7
	if got := dev.Caps(); got != want {
		t.Fatalf("Caps() with overrides = %+v, want %+v", got, want)
	}
	if p.Name() != "sim" || !p.Simulated() {
		t.Fatalf("Name %q Simulated %v, want sim true", p.Name(), p.Simulated())
	}
	if names, _ := p.Devices(); len(names) != 1 || names[0] != "sim0" {
		t.Fatalf("Devices() = %v, want [sim0]", names)
	}
}

func TestOpen(t *testing.T) {
	tests := []struct {
		name     string
		cfg      fabric.DeviceConfig
		verb     string
		errno    syscall.Errno
		gidIndex int
	}{
		{name: "auto GID", cfg: fabric.DeviceConfig{GIDIndex: -1}, gidIndex: 1},
		{name: "named, port 1, GID 0", cfg: fabric.DeviceConfig{Name: "simX", Port: 1, GIDIndex: 0}, gidIndex: 0},
		{name: "unknown device", cfg: fabric.DeviceConfig{Name: "mlx5_0"}, verb: "ibv_open_device", errno: syscall.ENODEV},
		{name: "port 2", cfg: fabric.DeviceConfig{Port: 2}, verb: "ibv_query_port", errno: syscall.EINVAL},
		{name: "GID index 1024", cfg: fabric.DeviceConfig{GIDIndex: 1024}, verb: "ibv_query_gid", errno: syscall.EINVAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dev, err := New(Options{DeviceName: "simX"}).Open(context.Background(), tt.cfg)
			if tt.verb != "" {
				wantVerbErr(t, err, tt.verb, tt.errno)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			pi := dev.Port()
			if pi.LID == 0 || pi.State != "ACTIVE" || pi.ActiveMTU != fabric.MTU4096 || pi.Port != 1 ||
				pi.LinkLayer != "simulated" || pi.GID != gidOf("::ffff:127.0.0.1") || pi.GIDIndex != tt.gidIndex {
				t.Fatalf("Port() = %+v", pi)
			}
			if dev.Name() != "simX" {
				t.Fatalf("Name() = %q", dev.Name())
			}
		})
	}
}

func TestTransitionAttrs(t *testing.T) {
	s := newSide(t, Options{})
	good := path{destQPN: 0x42, dlid: s.dev.Port().LID, rqpsn: 7, sqpsn: 9, timeout: 14, retryCnt: 7}
	tests := []struct {
		name string
		init *fabric.InitAttr
		rtr  func(*fabric.RTRAttr)
		rts  func(*fabric.RTSAttr)
		verb string // the failing verb; "" = all succeed
	}{
		{name: "valid, any DGID", rtr: func(a *fabric.RTRAttr) { a.DGID = fabric.GID{0: 0xfe, 1: 0x80, 15: 9} }},
		{name: "INIT port 0", init: &fabric.InitAttr{Port: 0}, verb: "ibv_modify_qp(INIT)"},
		{name: "INIT pkey index 1", init: &fabric.InitAttr{Port: 1, PKeyIndex: 1}, verb: "ibv_modify_qp(INIT)"},
		{name: "MTU 0", rtr: func(a *fabric.RTRAttr) { a.PathMTU = 0 }, verb: "ibv_modify_qp(RTR)"},
		{name: "MTU 6", rtr: func(a *fabric.RTRAttr) { a.PathMTU = 6 }, verb: "ibv_modify_qp(RTR)"},
		{name: "dest QPN 0", rtr: func(a *fabric.RTRAttr) { a.DestQPN = 0 }, verb: "ibv_modify_qp(RTR)"},
		{name: "dest QPN 25 bits", rtr: func(a *fabric.RTRAttr) { a.DestQPN = 1 << 24 }, verb: "ibv_modify_qp(RTR)"},
		{name: "rq_psn 25 bits", rtr: func(a *fabric.RTRAttr) { a.RQPSN = 1 << 24 }, verb: "ibv_modify_qp(RTR)"},
		{name: "DLID 0", rtr: func(a *fabric.RTRAttr) { a.DLID = 0 }, verb: "ibv_modify_qp(RTR)"},
		{name: "sq_psn 25 bits", rts: func(a *fabric.RTSAttr) { a.SQPSN = 1 << 24 }, verb: "ibv_modify_qp(RTS)"},
		{name: "retry_cnt 8", rts: func(a *fabric.RTSAttr) { a.RetryCnt = 8 }, verb: "ibv_modify_qp(RTS)"},
		{name: "timeout 32", rts: func(a *fabric.RTSAttr) { a.Timeout = 32 }, verb: "ibv_modify_qp(RTS)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := s.cq(t, 4)
			q := s.qp(t, c, c, 2)
			defer q.Destroy()
			defer c.Destroy()
			init := fabric.InitAttr{Port: 1}
			if tt.init != nil {
				init = *tt.init
			}
			ra, sa := rtr(good), rts(good)
			if tt.rtr != nil {
				tt.rtr(&ra)
			}
			if tt.rts != nil {
				tt.rts(&sa)
			}
			errs := []struct {
				verb string
				err  func() error
				then fabric.QPState
			}{
				{"ibv_modify_qp(INIT)", func() error { return q.ToInit(init) }, fabric.QPSReset},
				{"ibv_modify_qp(RTR)", func() error { return q.ToRTR(ra) }, fabric.QPSInit},
				{"ibv_modify_qp(RTS)", func() error { return q.ToRTS(sa) }, fabric.QPSRTR},
			}
			for _, e := range errs {
				err := e.err()
				if e.verb == tt.verb {
					wantVerbErr(t, err, tt.verb, syscall.EINVAL)
					if got := q.State(); got != e.then {
						t.Fatalf("after failed %s: state %s, want %s unchanged", tt.verb, got, e.then)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestPostBeforeReady(t *testing.T) {
	s := newSide(t, Options{})
	c := s.cq(t, 8)
	m := s.mr(t, 64)
	q := s.qp(t, c, c, 4)
	p := path{destQPN: 0x42, dlid: s.dev.Port().LID, timeout: 14, retryCnt: 7}

	wantVerbErr(t, q.PostRecv(1, m, 0, 64), "ibv_post_recv", syscall.EINVAL)
	wantVerbErr(t, q.PostSend(1, m, 0, 64), "ibv_post_send", syscall.EINVAL)
	if err := q.ToInit(fabric.InitAttr{Port: 1}); err != nil {
		t.Fatal(err)
	}
	if err := q.PostRecv(1, m, 0, 64); err != nil {
		t.Fatalf("PostRecv in INIT: %v", err)
	}
	wantVerbErr(t, q.PostSend(1, m, 0, 64), "ibv_post_send", syscall.EINVAL)
	if err := q.ToRTR(rtr(p)); err != nil {
		t.Fatal(err)
	}
	wantVerbErr(t, q.PostSend(1, m, 0, 64), "ibv_post_send", syscall.EINVAL)
	// Bad SGEs are refused whatever the state.
	wantVerbErr(t, q.PostRecv(2, m, 60, 8), "ibv_post_recv", syscall.EINVAL)
	wantVerbErr(t, q.PostRecv(2, nil, 0, 8), "ibv_post_recv", syscall.EINVAL)
	wantEmpty(t, c)
}

func TestCapExhaustion(t *testing.T) {
	type alloc func(s *side) (free func() error, err error)
	tests := []struct {
		name  string
		caps  fabric.Caps
		alloc alloc
		verb  string
		errno syscall.Errno
	}{
		{
			name: "PD", caps: fabric.Caps{MaxPD: 3}, // newSide holds one
			alloc: func(s *side) (func() error, error) {
				pd, err := s.dev.AllocPD()
				if err != nil {
					return nil, err
				}
				return pd.Dealloc, nil
			},
			verb: "ibv_alloc_pd", errno: syscall.EINVAL,
		},
		{
			name: "CQ", caps: fabric.Caps{MaxCQ: 2},
			alloc: func(s *side) (func() error, error) {
				c, err := s.dev.CreateCQ(1)
				if err != nil {
					return nil, err
				}
				return c.Destroy, nil
			},
			verb: "ibv_create_cq", errno: syscall.EINVAL,
		},
		{
			name: "MR", caps: fabric.Caps{MaxMR: 2},
			alloc: func(s *side) (func() error, error) {
				m, err := s.pd.RegMR(4096, fabric.AccessLocalWrite)
				if err != nil {
					return nil, err
				}
				return m.Dereg, nil
			},
			verb: "ibv_reg_mr", errno: syscall.ENOMEM,
		},
		{
			name: "QP", caps: fabric.Caps{MaxQP: 2},
			alloc: func(s *side) (func() error, error) {
				c, err := s.dev.CreateCQ(4)
				if err != nil {
					return nil, err
				}
				q, err := s.pd.CreateQP(fabric.QPInitAttr{SendCQ: c, RecvCQ: c, MaxSendWR: 2, MaxRecvWR: 2})
				if err != nil {
					_ = c.Destroy()
					return nil, err
				}
				return func() error {
					if err := q.Destroy(); err != nil {
						return err
					}
					return c.Destroy()
				}, nil
			},
			verb: "ibv_create_qp", errno: syscall.EINVAL,
		},
		{
			name: "SRQ", caps: fabric.Caps{MaxSRQ: 2},
			alloc: func(s *side) (func() error, error) {
				q, err := s.pd.CreateSRQ(4, 1)
				if err != nil {
					return nil, err
				}
				return q.Destroy, nil
			},
			// rxe_create_srq → rxe_add_to_pool: -EINVAL when the pool is full (6.1).
			verb: "ibv_create_srq", errno: syscall.EINVAL,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSide(t, Options{Caps: tt.caps})
			f1, err := tt.alloc(s)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tt.alloc(s); err != nil {
				t.Fatal(err)
			}
			_, err = tt.alloc(s)
			wantVerbErr(t, err, tt.verb, tt.errno)
			if err := f1(); err != nil {
				t.Fatal(err)
			}
			if _, err := tt.alloc(s); err != nil {
				t.Fatalf("after freeing one: %v", err)
			}
			_, err = tt.alloc(s)
			wantVerbErr(t, err, tt.verb, tt.errno)
		})
	}
}

func TestCreateArgs(t *testing.T) {
	s := newSide(t, Options{Caps: fabric.Caps{MaxQPWR: 16, MaxSGE: 2, MaxCQE: 100}})
	c := s.cq(t, 4)
	other := newSide(t, Options{})
	foreign := other.cq(t, 4)
	tests := []struct {
		name string
		err  func() error
		verb string
	}{
		{"cqe 0", func() error { _, err := s.dev.CreateCQ(0); return err }, "ibv_create_cq"},
		{"cqe > max_cqe", func() error { _, err := s.dev.CreateCQ(101); return err }, "ibv_create_cq"},
		{"MR size 0", func() error { _, err := s.pd.RegMR(0, 0); return err }, "ibv_reg_mr"},
		{"nil send CQ", func() error {
			_, err := s.pd.CreateQP(fabric.QPInitAttr{RecvCQ: c, MaxSendWR: 1, MaxRecvWR: 1})
			return err
		}, "ibv_create_qp"},
		{"CQ of another context", func() error {
			_, err := s.pd.CreateQP(fabric.QPInitAttr{SendCQ: foreign, RecvCQ: c, MaxSendWR: 1, MaxRecvWR: 1})
			return err
		}, "ibv_create_qp"},
		{"max_send_wr > max_qp_wr", func() error {
			_, err := s.pd.CreateQP(fabric.QPInitAttr{SendCQ: c, RecvCQ: c, MaxSendWR: 17, MaxRecvWR: 1})
			return err
		}, "ibv_create_qp"},
		{"max_recv_sge > max_sge", func() error {
			_, err := s.pd.CreateQP(fabric.QPInitAttr{SendCQ: c, RecvCQ: c, MaxSendWR: 1, MaxRecvWR: 1, MaxRecvSGE: 3})
			return err
		}, "ibv_create_qp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantVerbErr(t, tt.err(), tt.verb, syscall.EINVAL) })
	}
	if _, err := s.dev.CreateCQ(100); err != nil {
		t.Fatalf("cqe = max_cqe: %v", err)
	}
}

func TestDestroyOrder(t *testing.T) {
	s := newSide(t, Options{})
	c := s.cq(t, 4)
	m := s.mr(t, 16)
	q := s.qp(t, c, c, 2)
	if err := q.ToInit(fabric.InitAttr{Port: 1}); err != nil {
		t.Fatal(err)
	}
	if err := q.PostRecv(7, m, 0, 16); err != nil {
		t.Fatal(err)
	}
	wantVerbErr(t, c.Destroy(), "ibv_destroy_cq", syscall.EBUSY)
	wantVerbErr(t, s.pd.Dealloc(), "ibv_dealloc_pd", syscall.EBUSY)
	if err := q.Destroy(); err != nil {
		t.Fatal(err)
	}
	// Destroying a QP flushes nothing onto its CQ.
	wantEmpty(t, c)
	wantVerbErr(t, q.Destroy(), "ibv_destroy_qp", syscall.EINVAL)
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := m.Dereg(); err != nil {
		t.Fatal(err)
	}
	if err := s.pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
}

func TestCapsSharedByContexts(t *testing.T) {
	p := New(Options{Caps: fabric.Caps{MaxPD: 1}})
	d1, err := p.Open(context.Background(), fabric.DeviceConfig{GIDIndex: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer d1.Close()
	d2, err := p.Open(context.Background(), fabric.DeviceConfig{GIDIndex: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d1.AllocPD(); err != nil {
		t.Fatal(err)
	}
	_, err = d2.AllocPD()
	wantVerbErr(t, err, "ibv_alloc_pd", syscall.EINVAL)
	if err := d1.Close(); err != nil {
		t.Fatal(err)
	}
	// Closing a context returns what it held to the device's pools.
	if _, err := d2.AllocPD(); err != nil {
		t.Fatalf("after closing the other context: %v", err)
	}
	_ = d2.Close()
}

func TestPingPong(t *testing.T) {
	a, b := newSide(t, Options{}), newSide(t, Options{})
	acq, bcq := a.cq(t, 8), b.cq(t, 8)
	qa, qb := a.qp(t, acq, acq, 2), b.qp(t, bcq, bcq, 2)
	const size = 4096
	as, ar, bs, br := a.mr(t, size), a.mr(t, size), b.mr(t, size), b.mr(t, size)
	connect(t, a, qa, b, qb)

	for round := 0; round < 50; round++ {
		n := 1 + round*83%size
		if err := qb.PostRecv(uint64(1000+round), br, 0, size); err != nil {
			t.Fatal(err)
		}
		if err := qa.PostRecv(uint64(2000+round), ar, 0, size); err != nil {
			t.Fatal(err)
		}
		for i := range as.Buf()[:n] {
			as.Buf()[i] = byte(i*7 + round)
		}
		if err := qa.PostSend(uint64(round), as, 0, n); err != nil {
			t.Fatal(err)
		}
		got := await(t, bcq)
		want := fabric.WC{WRID: uint64(1000 + round), Status: fabric.WCSuccess, Opcode: fabric.WCRecv, ByteLen: n, QPN: qb.QPN()}
		if got != want {
			t.Fatalf("round %d: B recv %+v, want %+v", round, got, want)
		}
		if !bytes.Equal(br.Buf()[:n], as.Buf()[:n]) {
			t.Fatalf("round %d: payload differs", round)
		}
		copy(bs.Buf(), br.Buf()[:n])
		if err := qb.PostSend(uint64(round), bs, 0, n); err != nil {
			t.Fatal(err)
		}
		// B's CQ: its send completion (after A's ACK). A's CQ: its send
		// completion and the echo, in either order.
		if got := await(t, bcq); got.Status != fabric.WCSuccess || got.Opcode != fabric.WCSend || got.ByteLen != n {
			t.Fatalf("round %d: B send %+v", round, got)
		}
		var recv fabric.WC
		for i := 0; i < 2; i++ {
			wc := await(t, acq)
			if wc.Status != fabric.WCSuccess || wc.QPN != qa.QPN() {
				t.Fatalf("round %d: A completion %+v", round, wc)
			}
			if wc.Opcode == fabric.WCRecv {
				recv = wc
			}
		}
		if recv.WRID != uint64(2000+round) || recv.ByteLen != n || !bytes.Equal(ar.Buf()[:n], as.Buf()[:n]) {
			t.Fatalf("round %d: echo %+v does not match", round, recv)
		}
	}
}

func TestPSNMismatch(t *testing.T) {
	tests := []struct {
		name    string
		skew    int // sender's sq_psn minus receiver's rq_psn
		timeout int
	}{
		// Ahead of the expected PSN: NAK sequence error, retried retry_cnt
		// times at once, no timer involved.
		{name: "ahead, NAKed", skew: 5, timeout: 14},
		// Behind: the responder takes it for a duplicate and re-ACKs its
		// last PSN, which the requester does not recognise; it times out.
		{name: "behind, ghost ACK", skew: -5, timeout: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := newSide(t, Options{}), newSide(t, Options{})
			acq, bcq := a.cq(t, 8), b.cq(t, 8)
			qa, qb := a.qp(t, acq, acq, 2), b.qp(t, bcq, bcq, 2)
			m, r := a.mr(t, 64), b.mr(t, 64)
			const rqpsn = 0x100
			ready(t, qb, path{destQPN: qa.QPN(), dlid: a.dev.Port().LID, rqpsn: rqpsn, timeout: 14, retryCnt: 7})
			if err := qb.PostRecv(9, r, 0, 64); err != nil {
				t.Fatal(err)
			}
			ready(t, qa, path{destQPN: qb.QPN(), dlid: b.dev.Port().LID, sqpsn: psnAdd(rqpsn, tt.skew), timeout: tt.timeout, retryCnt: 3})
			copy(m.Buf(), "must not arrive")
			if err := qa.PostSend(1, m, 0, 15); err != nil {
				t.Fatal(err)
			}
			if err := qa.PostSend(2, m, 0, 15); err != nil {
				t.Fatal(err)
			}
			if got := await(t, acq); got.WRID != 1 || got.Status != fabric.WCRetryExcErr {
				t.Fatalf("first send %+v, want WRID 1 %s", got, fabric.WCRetryExcErr)
			}
			if got := await(t, acq); got.WRID != 2 || got.Status != fabric.WCWRFlushErr {
				t.Fatalf("second send %+v, want WRID 2 %s", got, fabric.WCWRFlushErr)
			}
			if qa.State() != fabric.QPSErr {
				t.Fatalf("sender in %s, want ERR", qa.State())
			}
			// Later work on an ERR QP is flushed, not refused.
			if err := qa.PostSend(3, m, 0, 1); err != nil {
				t.Fatal(err)
			}
			if got := await(t, acq); got.WRID != 3 || got.Status != fabric.WCWRFlushErr {
				t.Fatalf("send after ERR %+v", got)
			}
			wantEmpty(t, bcq)
			if qb.State() != fabric.QPSRTS || !bytes.Equal(r.Buf(), make([]byte, 64)) {
				t.Fatalf("receiver %s, buffer %q: something was delivered", qb.State(), r.Buf()[:16])
			}
		})
	}
}

func TestRejectedSource(t *testing.T) {
	tests := []struct {
		name string
		// rewire returns the receiver's view of the sender and the sender's
		// destination QPN.
		rewire func(qa, qb fabric.QP, a *side) (recvPeer path, sendTo uint32)
	}{
		{name: "wrong source QPN", rewire: func(qa, qb fabric.QP, a *side) (path, uint32) {
			return path{destQPN: qa.QPN() + 1000, dlid: a.dev.Port().LID}, qb.QPN()
		}},
		{name: "wrong source LID", rewire: func(qa, qb fabric.QP, a *side) (path, uint32) {
			return path{destQPN: qa.QPN(), dlid: a.dev.Port().LID + 1}, qb.QPN()
		}},
		{name: "unknown destination QPN", rewire: func(qa, qb fabric.QP, a *side) (path, uint32) {
			return path{destQPN: qa.QPN(), dlid: a.dev.Port().LID}, 0xabcdef
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := newSide(t, Options{}), newSide(t, Options{})
			acq, bcq := a.cq(t, 8), b.cq(t, 8)
			qa, qb := a.qp(t, acq, acq, 2), b.qp(t, bcq, bcq, 2)
			m, r := a.mr(t, 64), b.mr(t, 64)
			peer, to := tt.rewire(qa, qb, a)
			peer.timeout, peer.retryCnt = 14, 7
			ready(t, qb, peer)
			if err := qb.PostRecv(9, r, 0, 64); err != nil {
				t.Fatal(err)
			}
			// Timeout 1 is floored to 1 ms: three attempts, ~3 ms.
			ready(t, qa, path{destQPN: to, dlid: b.dev.Port().LID, timeout: 1, retryCnt: 2})
			if err := qa.PostSend(1, m, 0, 8); err != nil {
				t.Fatal(err)
			}
			if got := await(t, acq); got.Status != fabric.WCRetryExcErr {
				t.Fatalf("send %+v, want %s", got, fabric.WCRetryExcErr)
			}
			if qa.State() != fabric.QPSErr {
				t.Fatalf("sender in %s, want ERR", qa.State())
			}
			wantEmpty(t, bcq)
		})
	}
}

func TestMessageTooLong(t *testing.T) {
	a, b := newSide(t, Options{}), newSide(t, Options{})
	acq, bcq := a.cq(t, 8), b.cq(t, 8)
	qa, qb := a.qp(t, acq, acq, 2), b.qp(t, bcq, bcq, 2)
	m, r := a.mr(t, 64), b.mr(t, 64)
	connect(t, a, qa, b, qb)
	if err := qb.PostRecv(1, r, 0, 8); err != nil {
		t.Fatal(err)
	}
	if err := qb.PostRecv(2, r, 8, 8); err != nil {
		t.Fatal(err)
	}
	if err := qa.PostSend(5, m, 0, 16); err != nil {
		t.Fatal(err)
	}
	if got, want := await(t, acq), (fabric.WC{WRID: 5, Status: fabric.WCRemInvReqErr, Opcode: fabric.WCSend, QPN: qa.QPN()}); got != want {
		t.Fatalf("sender %+v, want %+v", got, want)
	}
	if got, want := await(t, bcq), (fabric.WC{WRID: 1, Status: fabric.WCLocLenErr, Opcode: fabric.WCRecv, QPN: qb.QPN()}); got != want {
		t.Fatalf("receiver %+v, want %+v", got, want)
	}
	if got := await(t, bcq); got.WRID != 2 || got.Status != fabric.WCWRFlushErr {
		t.Fatalf("second receive %+v, want flushed", got)
	}
	if qa.State() != fabric.QPSErr || qb.State() != fabric.QPSErr {
		t.Fatalf("states %s/%s, want ERR/ERR", qa.State(), qb.State())
	}
}

func heldCount(q fabric.QP) int {
	x := q.(*qp)
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.held.n
}

func TestHoldUntilPosted(t *testing.T) {
	a, b := newSide(t, Options{}), newSide(t, Options{})
	acq, bcq := a.cq(t, 8), b.cq(t, 8)
	qa, qb := a.qp(t, acq, acq, 4), b.qp(t, bcq, bcq, 4)
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
	// Held messages are not acknowledged: the sends stay outstanding.
	wantEmpty(t, acq)
	wantEmpty(t, bcq)
	for i, want := range []string{"first", "second"} {
		if err := qb.PostRecv(uint64(10+i), r, 32*i, 32); err != nil {
			t.Fatal(err)
		}
		got := await(t, bcq)
		if got.WRID != uint64(10+i) || got.ByteLen != len(want) || string(r.Buf()[32*i:32*i+got.ByteLen]) != want {
			t.Fatalf("receive %d: %+v %q, want %q", i, got, r.Buf()[32*i:32*i+len(want)], want)
		}
		if got := await(t, acq); got.WRID != uint64(1+i) || got.Status != fabric.WCSuccess {
			t.Fatalf("send %d: %+v", i, got)
		}
	}
}

func TestQueueFull(t *testing.T) {
	a, b := newSide(t, Options{}), newSide(t, Options{})
	acq, bcq := a.cq(t, 16), b.cq(t, 16)
	// Asked for 2, rxe rounds the queues to 3 (4 slots, one kept empty).
	qa, qb := a.qp(t, acq, acq, 2), b.qp(t, bcq, bcq, 2)
	m := a.mr(t, 8)
	connect(t, a, qa, b, qb)
	for i := 0; i < 3; i++ {
		if err := qa.PostRecv(uint64(i), m, 0, 8); err != nil {
			t.Fatalf("recv %d: %v", i, err)
		}
	}
	wantVerbErr(t, qa.PostRecv(3, m, 0, 8), "ibv_post_recv", syscall.ENOMEM)
	// B has no receives posted: the sends are held there and stay
	// outstanding, so the fourth does not fit.
	for i := 0; i < 3; i++ {
		if err := qa.PostSend(uint64(i), m, 0, 8); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	wantVerbErr(t, qa.PostSend(3, m, 0, 8), "ibv_post_send", syscall.ENOMEM)
}

func TestSharedCQ(t *testing.T) {
	const n = 200
	a, b := newSide(t, Options{}), newSide(t, Options{})
	acq, bcq := a.cq(t, 2*n), b.cq(t, 2*n)
	m, r := a.mr(t, 8*n), b.mr(t, 8*n)
	qas, qbs := make([]fabric.QP, n), make([]fabric.QP, n)
	byQPN := map[uint32]int{}
	for i := range qas {
		qas[i], qbs[i] = a.qp(t, acq, acq, 1), b.qp(t, bcq, bcq, 1)
		connect(t, a, qas[i], b, qbs[i])
		byQPN[qbs[i].QPN()] = i
		if err := qbs[i].PostRecv(uint64(i), r, 8*i, 8); err != nil {
			t.Fatal(err)
		}
	}
	for i, q := range qas {
		copy(m.Buf()[8*i:], fmt.Sprintf("msg%05d", i))
		if err := q.PostSend(uint64(i), m, 8*i, 8); err != nil {
			t.Fatal(err)
		}
	}
	seen := make([]bool, n)
	for range n {
		wc := await(t, bcq)
		i, ok := byQPN[wc.QPN]
		if !ok || wc.WRID != uint64(i) || wc.Status != fabric.WCSuccess || seen[i] {
			t.Fatalf("completion %+v (QP index %d, ok %v)", wc, i, ok)
		}
		seen[i] = true
		if got := string(r.Buf()[8*i : 8*i+8]); got != fmt.Sprintf("msg%05d", i) {
			t.Fatalf("QP %d received %q", i, got)
		}
	}
	for range n {
		if wc := await(t, acq); wc.Status != fabric.WCSuccess || wc.Opcode != fabric.WCSend {
			t.Fatalf("send completion %+v", wc)
		}
	}
	wantEmpty(t, acq)
}

func TestCQOverflow(t *testing.T) {
	a, b := newSide(t, Options{}), newSide(t, Options{})
	acq, bcq := a.cq(t, 8), b.cq(t, 1)
	qa, qb := a.qp(t, acq, acq, 2), b.qp(t, bcq, bcq, 2)
	m, r := a.mr(t, 8), b.mr(t, 16)
	connect(t, a, qa, b, qb)
	for i := 0; i < 2; i++ {
		if err := qb.PostRecv(uint64(i), r, 8*i, 8); err != nil {
			t.Fatal(err)
		}
		if err := qa.PostSend(uint64(i), m, 0, 8); err != nil {
			t.Fatal(err)
		}
	}
	// Both sends are ACKed only after their receives completed, so B's
	// one-entry CQ has overrun by now.
	await(t, acq)
	await(t, acq)
	var wc [4]fabric.WC
	_, err := bcq.Poll(wc[:])
	wantVerbErr(t, err, "ibv_poll_cq", syscall.EOVERFLOW)
	_, err = fabric.Await(context.Background(), bcq)
	wantVerbErr(t, err, "ibv_poll_cq", syscall.EOVERFLOW)
}

func TestWaitUnblocks(t *testing.T) {
	a, b := newSide(t, Options{}), newSide(t, Options{})
	acq, bcq := a.cq(t, 8), b.cq(t, 8)
	qa, qb := a.qp(t, acq, acq, 2), b.qp(t, bcq, bcq, 2)
	m, r := a.mr(t, 8), b.mr(t, 8)
	connect(t, a, qa, b, qb)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := fabric.Await(ctx, bcq); !errors.Is(err, context.Canceled) {
		t.Fatalf("Await on a cancelled context: %v", err)
	}
	// Several goroutines blocked on one CQ: each completion wakes them and
	// none is stranded.
	const waiters = 4
	got := make(chan fabric.WC, waiters)
	for range waiters {
		go func() {
			wc, err := fabric.Await(context.Background(), bcq)
			if err != nil {
				t.Error(err)
			}
			got <- wc
		}()
	}
	for i := 0; i < waiters; i++ {
		if err := qb.PostRecv(uint64(i), r, 0, 8); err != nil {
			t.Fatal(err)
		}
		if err := qa.PostSend(uint64(i), m, 0, 8); err != nil {
			t.Fatal(err)
		}
		await(t, acq)
	}
	seen := map[uint64]bool{}
	for range waiters {
		seen[(<-got).WRID] = true
	}
	if len(seen) != waiters {
		t.Fatalf("waiters got WRIDs %v, want %d distinct", seen, waiters)
	}
}

func TestTenThousandPairs(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 1000
	}
	start := time.Now()
	a, b := newSide(t, Options{}), newSide(t, Options{})
	acq, bcq := a.cq(t, 32767), b.cq(t, 32767)
	m, r := a.mr(t, 8), b.mr(t, 8*n)
	qas, qbs := make([]fabric.QP, n), make([]fabric.QP, n)
	for i := range qas {
		qas[i], qbs[i] = a.qp(t, acq, acq, 2), b.qp(t, bcq, bcq, 2)
		connect(t, a, qas[i], b, qbs[i])
		if err := qbs[i].PostRecv(uint64(i), r, 8*i, 8); err != nil {
			t.Fatal(err)
		}
	}
	setup := time.Since(start)
	copy(m.Buf(), "10k-pair")
	for i, q := range qas {
		if err := q.PostSend(uint64(i), m, 0, 8); err != nil {
			t.Fatal(err)
		}
	}
	var wc [256]fabric.WC
	for done := 0; done < n; {
		k, err := bcq.Poll(wc[:])
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			w := await(t, bcq)
			wc[0], k = w, 1
		}
		for _, w := range wc[:k] {
			if w.Status != fabric.WCSuccess || w.ByteLen != 8 {
				t.Fatalf("completion %+v", w)
			}
		}
		done += k
	}
	for i := 0; i < n; i++ {
		if got := string(r.Buf()[8*i : 8*i+8]); got != "10k-pair" {
			t.Fatalf("QP %d received %q", i, got)
		}
	}
	t.Logf("%d QP pairs: setup %v, one message each %v", n, setup, time.Since(start)-setup)
	if out, in := conns(a.dev), conns(b.dev); out != [2]int{1, 0} || in != [2]int{0, 1} {
		t.Fatalf("connections (dialed, accepted): A %v, B %v; want one from A to B", out, in)
	}
}

// conns counts a context's dialed and accepted wire connections.
func conns(dev fabric.Device) [2]int {
	d := dev.(*device)
	d.mu.Lock()
	defer d.mu.Unlock()
	return [2]int{len(d.out), len(d.in)}
}

func TestConcurrentClients(t *testing.T) {
	const clients, rounds = 300, 10
	a, b := newSide(t, Options{}), newSide(t, Options{})
	shared := b.cq(t, clients*rounds) // the server side shares one CQ, as in shared-cq mode
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		go func() {
			errs <- func() error {
				// Every call below races with the other clients on the same
				// contexts, PD and shared CQ.
				acq, err := a.dev.CreateCQ(4)
				if err != nil {
					return err
				}
				qa, err := a.pd.CreateQP(fabric.QPInitAttr{SendCQ: acq, RecvCQ: acq, MaxSendWR: 1, MaxRecvWR: 1})
				if err != nil {
					return err
				}
				qb, err := b.pd.CreateQP(fabric.QPInitAttr{SendCQ: shared, RecvCQ: shared, MaxSendWR: 1, MaxRecvWR: 1})
				if err != nil {
					return err
				}
				ma, err := a.pd.RegMR(16, fabric.AccessLocalWrite)
				if err != nil {
					return err
				}
				mb, err := b.pd.RegMR(16, fabric.AccessLocalWrite)
				if err != nil {
					return err
				}
				pa := path{destQPN: qb.QPN(), dlid: b.dev.Port().LID, rqpsn: 1, sqpsn: 2, timeout: 14, retryCnt: 7}
				pb := path{destQPN: qa.QPN(), dlid: a.dev.Port().LID, rqpsn: 2, sqpsn: 1, timeout: 14, retryCnt: 7}
				for _, x := range []struct {
					q fabric.QP
					p path
				}{{qa, pa}, {qb, pb}} {
					if err := x.q.ToInit(fabric.InitAttr{Port: 1}); err != nil {
						return err
					}
					if err := x.q.ToRTR(rtr(x.p)); err != nil {
						return err
					}
					if err := x.q.ToRTS(rts(x.p)); err != nil {
						return err
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				for r := 0; r < rounds; r++ {
					if err := qb.PostRecv(uint64(r), mb, 0, 16); err != nil {
						return err
					}
					msg := fmt.Sprintf("q%06d-r%06d", qa.QPN(), r)
					copy(ma.Buf(), msg)
					if err := qa.PostSend(uint64(r), ma, 0, len(msg)); err != nil {
						return err
					}
					wc, err := fabric.Await(ctx, acq)
					if err != nil {
						return err
					}
					if wc.Status != fabric.WCSuccess || wc.WRID != uint64(r) {
						return fmt.Errorf("QP %d round %d: %+v", qa.QPN(), r, wc)
					}
					// The send completed, so the message is in mb.
					if got := string(mb.Buf()[:len(msg)]); got != msg {
						return fmt.Errorf("QP %d round %d: received %q", qa.QPN(), r, got)
					}
				}
				return qa.Destroy()
			}()
		}()
	}
	for i := 0; i < clients; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// One receive completion per round per client on the shared CQ.
	var wc [512]fabric.WC
	total := 0
	for {
		n, err := shared.Poll(wc[:])
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		total += n
	}
	if total != clients*rounds {
		t.Fatalf("shared CQ held %d receive completions, want %d", total, clients*rounds)
	}
}

func TestPeerGone(t *testing.T) {
	a, b := newSide(t, Options{}), newSide(t, Options{})
	acq, bcq := a.cq(t, 8), b.cq(t, 8)
	qa, qb := a.qp(t, acq, acq, 2), b.qp(t, bcq, bcq, 2)
	m := a.mr(t, 8)
	ready(t, qa, path{destQPN: qb.QPN(), dlid: b.dev.Port().LID, timeout: 1, retryCnt: 3})
	if err := b.dev.Close(); err != nil {
		t.Fatal(err)
	}
	// Nothing listens on the DLID any more: every dial is refused, every
	// frame lost, and the requester gives up after retry_cnt retries.
	if err := qa.PostSend(1, m, 0, 8); err != nil {
		t.Fatal(err)
	}
	if got := await(t, acq); got.WRID != 1 || got.Status != fabric.WCRetryExcErr {
		t.Fatalf("send to a closed peer: %+v", got)
	}
}

func TestCloseReleasesGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		a, b := newSide(t, Options{}), newSide(t, Options{})
		acq, bcq := a.cq(t, 8), b.cq(t, 8)
		qa, qb := a.qp(t, acq, acq, 2), b.qp(t, bcq, bcq, 2)
		m, r := a.mr(t, 8), b.mr(t, 8)
		connect(t, a, qa, b, qb)
		// Traffic both ways so each side has dialed and accepted.
		for _, x := range []struct {
			s, d fabric.QP
			sc   fabric.CQ
			dc   fabric.CQ
			sm   fabric.MR
			dm   fabric.MR
		}{{qa, qb, acq, bcq, m, r}, {qb, qa, bcq, acq, r, m}} {
			if err := x.d.PostRecv(1, x.dm, 0, 8); err != nil {
				t.Fatal(err)
			}
			if err := x.s.PostSend(1, x.sm, 0, 8); err != nil {
				t.Fatal(err)
			}
			await(t, x.dc)
			await(t, x.sc)
		}
		if during := runtime.NumGoroutine(); during <= before {
			t.Fatalf("%d goroutines with two live contexts, %d before", during, before)
		}
		if err := a.dev.Close(); err != nil {
			t.Fatal(err)
		}
		if err := b.dev.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	// Close waits for its own goroutines; what may linger are timer
	// callbacks already running, which return at once.
	eventually.True(t, guard, "the goroutines have exited", func() bool { return runtime.NumGoroutine() <= before })
}

func BenchmarkRoundTrip(b *testing.B) {
	x, y := newSide(b, Options{}), newSide(b, Options{})
	xcq, ycq := x.cq(b, 8), y.cq(b, 8)
	qx, qy := x.qp(b, xcq, xcq, 2), y.qp(b, ycq, ycq, 2)
	xm, ym := x.mr(b, 64), y.mr(b, 64)
	connect(b, x, qx, y, qy)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := qy.PostRecv(0, ym, 0, 64); err != nil {
			b.Fatal(err)
		}
		if err := qx.PostRecv(0, xm, 0, 64); err != nil {
			b.Fatal(err)
		}
		if err := qx.PostSend(0, xm, 0, 64); err != nil {
			b.Fatal(err)
		}
		await(b, ycq) // recv
		if err := qy.PostSend(0, ym, 0, 64); err != nil {
			b.Fatal(err)
		}
		for j := 0; j < 2; j++ { // send completion + echo
			await(b, xcq)
		}
		await(b, ycq) // y's send completion
	}
}

func BenchmarkQPSetup(b *testing.B) {
	s := newSide(b, Options{})
	c := s.cq(b, 8)
	p := path{destQPN: 0x42, dlid: s.dev.Port().LID, timeout: 14, retryCnt: 7}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q := s.qp(b, c, c, 2)
		ready(b, q, p)
		if err := q.Destroy(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestScale checks that the simulated fabric holds SIM_SCALE QP pairs (for
// example 100000) in one process pair and reports the heap each costs. It
// is skipped unless SIM_SCALE is set, as it takes seconds and memory.
func TestScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SIM_SCALE"))
	if n <= 0 {
		t.Skip("set SIM_SCALE=<QP pairs> to run")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	a, b := newSide(t, Options{}), newSide(t, Options{})
	m, r := a.mr(t, 64), b.mr(t, 64)
	type conn struct {
		qa, qb   fabric.QP
		acq, bcq fabric.CQ
	}
	conns := make([]conn, n)
	for i := range conns {
		// One client's worth of resources on each side, as the server and
		// client create them: a CQ pair per QP.
		c := &conns[i]
		c.acq, c.bcq = a.cq(t, 4), b.cq(t, 4)
		c.qa, c.qb = a.qp(t, c.acq, c.acq, 2), b.qp(t, c.bcq, c.bcq, 2)
		connect(t, a, c.qa, b, c.qb)
		if err := c.qb.PostRecv(uint64(i), r, 0, 64); err != nil {
			t.Fatal(err)
		}
	}
	setup := time.Since(start)
	for i := range conns {
		if err := conns[i].qa.PostSend(uint64(i), m, 0, 64); err != nil {
			t.Fatal(err)
		}
	}
	for i := range conns {
		if wc := await(t, conns[i].bcq); wc.Status != fabric.WCSuccess {
			t.Fatalf("pair %d: %+v", i, wc)
		}
		if wc := await(t, conns[i].acq); wc.Status != fabric.WCSuccess {
			t.Fatalf("pair %d: %+v", i, wc)
		}
	}
	elapsed := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	perPair := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
	t.Logf("%d QP pairs (+2 CQs each): setup %v, total %v, heap %.0f B per pair (%.0f B per QP with its CQ), %d goroutines",
		n, setup.Round(time.Millisecond), elapsed.Round(time.Millisecond), perPair, perPair/2, runtime.NumGoroutine())
	runtime.KeepAlive(conns)
}

// A responder that reads a request long after the local ACK timeout (its
// goroutine starved of CPU) is not a lost peer: a NIC would have ACKed in
// hardware. The requester waits for it instead of failing with
// RETRY_EXC_ERR after retry_cnt timeouts.
func TestStarvedResponderIsNotLost(t *testing.T) {
	a, b := newSide(t, Options{}), newSide(t, Options{})
	acq, bcq := a.cq(t, 8), b.cq(t, 8)
	qa, qb := a.qp(t, acq, acq, 2), b.qp(t, bcq, bcq, 2)
	m, r := a.mr(t, 64), b.mr(t, 64)
	ready(t, qb, path{destQPN: qa.QPN(), dlid: a.dev.Port().LID, timeout: 14, retryCnt: 7})
	// A tiny budget: 3 attempts of 1 ms.
	ready(t, qa, path{destQPN: qb.QPN(), dlid: b.dev.Port().LID, timeout: 1, retryCnt: 2})
	if err := qb.PostRecv(9, r, 0, 64); err != nil {
		t.Fatal(err)
	}
	resp := qb.(*qp)
	resp.mu.Lock() // the responder's reader blocks on this, as if starved
	copy(m.Buf(), "late but here")
	if err := qa.PostSend(1, m, 0, 13); err != nil {
		resp.mu.Unlock()
		t.Fatal(err)
	}
	// Starve the responder until the requester's local ACK timer has
	// expired ten times its retry budget: each expiry on a live link
	// re-arms it one timeout later instead of counting a retry.
	req := qa.(*qp)
	req.mu.Lock()
	first, budget := req.deadline, 10*time.Duration(req.retryCnt+1)*req.rto
	req.mu.Unlock()
	starved := eventually.Within(guard, func() bool {
		req.mu.Lock()
		defer req.mu.Unlock()
		return !first.IsZero() && req.deadline.Sub(first) >= budget
	})
	resp.mu.Unlock() // before failing: the cleanup destroys the QP
	if !starved {
		t.Fatalf("the requester's ACK timer did not run ten times its retry budget (%v) while the responder was starved", budget)
	}
	if got := await(t, acq); got.WRID != 1 || got.Status != fabric.WCSuccess {
		t.Fatalf("send to a starved responder: %+v, want success", got)
	}
	if got := await(t, bcq); got.Status != fabric.WCSuccess || string(r.Buf()[:13]) != "late but here" {
		t.Fatalf("responder got %+v %q", got, r.Buf()[:13])
	}
}

// A message held for a receive (RNR) is lost when the responder QP is
// destroyed; the requester learns it and gives up after its retries,
// not after waiting out starvedWindow.
func TestHeldThenDestroyed(t *testing.T) {
	a, b := newSide(t, Options{}), newSide(t, Options{})
	acq, bcq := a.cq(t, 8), b.cq(t, 8)
	qa, qb := a.qp(t, acq, acq, 2), b.qp(t, bcq, bcq, 2)
	m := a.mr(t, 64)
	ready(t, qb, path{destQPN: qa.QPN(), dlid: a.dev.Port().LID, timeout: 14, retryCnt: 7})
	ready(t, qa, path{destQPN: qb.QPN(), dlid: b.dev.Port().LID, timeout: 1, retryCnt: 2})
	if err := qa.PostSend(1, m, 0, 8); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, guard, "the responder holds the message", func() bool { return heldCount(qb) == 1 })
	if err := qb.Destroy(); err != nil {
		t.Fatal(err)
	}
	// Without the drop notice the requester would hear nothing for
	// starvedWindow before it retried: waiting half of that tells the two
	// apart however slow the host is, where a bound near the retries'
	// few milliseconds would not.
	ctx, cancel := context.WithTimeout(context.Background(), starvedWindow/2)
	defer cancel()
	got, err := fabric.Await(ctx, acq)
	if err != nil {
		t.Fatalf("no completion within %v of the responder's destruction: the drop notice did not count", starvedWindow/2)
	}
	if got.WRID != 1 || got.Status != fabric.WCRetryExcErr {
		t.Fatalf("send held by a destroyed QP: %+v, want %s", got, fabric.WCRetryExcErr)
	}
}
