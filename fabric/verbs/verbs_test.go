//go:build verbs && cgo

package verbs

// These tests need a real RDMA device and skip without one. They are the
// Soft-RoCE acceptance test: run the test binary (go test -c -tags verbs)
// inside a guest with rxe0 on lo. RDMAPROBE_DEVICE picks a device,
// RDMAPROBE_PAIRS the size of TestManyPairs.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

func skipWithoutDevice(tb testing.TB) {
	tb.Helper()
	ents, err := os.ReadDir("/sys/class/infiniband")
	if err != nil || len(ents) == 0 {
		tb.Skip("no RDMA device in /sys/class/infiniband: run this test binary where one exists (e.g. the Soft-RoCE guest)")
	}
}

func openDev(tb testing.TB, gidIndex int) fabric.Device {
	tb.Helper()
	skipWithoutDevice(tb)
	dev, err := New().Open(context.Background(), fabric.DeviceConfig{Name: os.Getenv("RDMAPROBE_DEVICE"), GIDIndex: gidIndex})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() {
		if err := dev.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return dev
}

func randPSN(tb testing.TB) uint32 {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	return binary.LittleEndian.Uint32(b[:]) & 0xffffff
}

// ep is one client's worth of resources: 2 CQs, 2 MRs and an RC QP.
type ep struct {
	scq, rcq   fabric.CQ
	smr, rmr   fabric.MR
	qp         fabric.QP
	psn        uint32
	dev        fabric.Device
	sent, recv uint64
}

const msgSize = 4096

func newEP(dev fabric.Device, pd fabric.PD) (*ep, error) {
	e := &ep{dev: dev}
	var err error
	if e.scq, err = dev.CreateCQ(16); err != nil {
		return nil, err
	}
	if e.rcq, err = dev.CreateCQ(16); err != nil {
		e.scq.Destroy()
		return nil, err
	}
	if e.smr, err = pd.RegMR(msgSize, fabric.AccessLocalWrite); err != nil {
		e.close()
		return nil, err
	}
	if e.rmr, err = pd.RegMR(msgSize, fabric.AccessLocalWrite); err != nil {
		e.close()
		return nil, err
	}
	if e.qp, err = pd.CreateQP(fabric.QPInitAttr{SendCQ: e.scq, RecvCQ: e.rcq, MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *ep) close() error {
	var errs []error
	if e.qp != nil {
		errs = append(errs, e.qp.Destroy())
	}
	for _, m := range []fabric.MR{e.smr, e.rmr} {
		if m != nil {
			errs = append(errs, m.Dereg())
		}
	}
	for _, c := range []fabric.CQ{e.scq, e.rcq} {
		if c != nil {
			errs = append(errs, c.Destroy())
		}
	}
	return errors.Join(errs...)
}

func initAttr() fabric.InitAttr {
	return fabric.InitAttr{Access: fabric.AccessLocalWrite | fabric.AccessRemoteWrite}
}

// rtrTo is the RTR of e towards peer, expecting the peer's send PSN rqpsn.
func rtrTo(e, peer *ep, rqpsn uint32) fabric.RTRAttr {
	p := peer.dev.Port()
	return fabric.RTRAttr{
		PathMTU: e.dev.Port().ActiveMTU, DestQPN: peer.qp.QPN(), RQPSN: rqpsn,
		MaxDestRdAtomic: 1, MinRNRTimer: 12,
		DLID: p.LID, DGID: p.GID, GIDIndex: e.dev.Port().GIDIndex, HopLimit: 64,
	}
}

func rtsAttr(psn uint32) fabric.RTSAttr {
	return fabric.RTSAttr{SQPSN: psn, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}
}

// connect moves both QPs RESET→INIT→RTR→RTS towards each other, as the
// server and client do after their PSN exchange.
func connect(a, b *ep) error {
	for _, x := range []*ep{a, b} {
		if err := x.qp.ToInit(initAttr()); err != nil {
			return err
		}
	}
	if err := a.qp.ToRTR(rtrTo(a, b, b.psn)); err != nil {
		return err
	}
	if err := b.qp.ToRTR(rtrTo(b, a, a.psn)); err != nil {
		return err
	}
	if err := a.qp.ToRTS(rtsAttr(a.psn)); err != nil {
		return err
	}
	return b.qp.ToRTS(rtsAttr(b.psn))
}

// exchange sends payload from a to b and checks what b received.
func exchange(ctx context.Context, a, b *ep, payload []byte) error {
	b.recv++
	if err := b.qp.PostRecv(b.recv, b.rmr, 0, msgSize); err != nil {
		return err
	}
	copy(a.smr.Buf(), payload)
	a.sent++
	if err := a.qp.PostSend(a.sent, a.smr, 0, len(payload)); err != nil {
		return err
	}
	wc, err := fabric.Await(ctx, a.scq)
	if err != nil {
		return fmt.Errorf("await send: %w", err)
	}
	if wc.Status != fabric.WCSuccess || wc.Opcode != fabric.WCSend || wc.WRID != a.sent || wc.QPN != a.qp.QPN() {
		return fmt.Errorf("send completion %+v", wc)
	}
	wc, err = fabric.Await(ctx, b.rcq)
	if err != nil {
		return fmt.Errorf("await recv: %w", err)
	}
	if wc.Status != fabric.WCSuccess || wc.Opcode != fabric.WCRecv || wc.WRID != b.recv || wc.ByteLen != len(payload) || wc.QPN != b.qp.QPN() {
		return fmt.Errorf("recv completion %+v", wc)
	}
	if !bytes.Equal(b.rmr.Buf()[:len(payload)], payload) {
		return errors.New("payload corrupted")
	}
	return nil
}

func pair(t *testing.T, dev fabric.Device, pd fabric.PD) (*ep, *ep) {
	t.Helper()
	a, err := newEP(dev, pd)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newEP(dev, pd)
	if err != nil {
		t.Fatal(err)
	}
	a.psn, b.psn = randPSN(t), randPSN(t)
	t.Cleanup(func() {
		if err := errors.Join(a.close(), b.close()); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	return a, b
}

func allocPD(t testing.TB, dev fabric.Device) fabric.PD {
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pd.Dealloc(); err != nil {
			t.Errorf("dealloc: %v", err)
		}
	})
	return pd
}

// devinfo parses `ibv_devinfo -v` into key → value.
func devinfo(t *testing.T, dev string) map[string]string {
	out, err := exec.Command("ibv_devinfo", "-v", "-d", dev).Output()
	if err != nil {
		return nil
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if ok {
			if _, dup := m[k]; !dup {
				m[k] = strings.TrimSpace(v)
			}
		}
	}
	return m
}

func TestOpenCapsMatchDevinfo(t *testing.T) {
	dev := openDev(t, -1)
	c, p := dev.Caps(), dev.Port()
	t.Logf("device %s caps %+v", dev.Name(), c)
	t.Logf("port %+v", p)
	if p.State != "ACTIVE" {
		t.Errorf("port state %q", p.State)
	}
	if p.LinkLayer != "Ethernet" && p.LinkLayer != "InfiniBand" {
		t.Errorf("link layer %q", p.LinkLayer)
	}
	if !p.ActiveMTU.Valid() {
		t.Errorf("active MTU %d", p.ActiveMTU)
	}
	if c.MaxQP <= 0 || c.MaxCQ <= 0 || c.MaxMR <= 0 || c.MaxPD <= 0 {
		t.Errorf("caps look empty: %+v", c)
	}
	ref := devinfo(t, dev.Name())
	if ref == nil {
		t.Log("ibv_devinfo not runnable here: caps not cross-checked")
		return
	}
	num := func(k string) uint64 {
		v, err := strconv.ParseUint(ref[k], 0, 64)
		if err != nil {
			t.Errorf("ibv_devinfo %s = %q", k, ref[k])
		}
		return v
	}
	for _, f := range []struct {
		key string
		got uint64
	}{
		{"max_qp", uint64(c.MaxQP)}, {"max_qp_wr", uint64(c.MaxQPWR)}, {"max_sge", uint64(c.MaxSGE)},
		{"max_cq", uint64(c.MaxCQ)}, {"max_cqe", uint64(c.MaxCQE)}, {"max_mr", uint64(c.MaxMR)},
		{"max_mr_size", c.MaxMRSize}, {"max_pd", uint64(c.MaxPD)}, {"max_srq", uint64(c.MaxSRQ)},
		{"max_srq_wr", uint64(c.MaxSRQWR)}, {"vendor_id", uint64(c.VendorID)}, {"vendor_part_id", uint64(c.VendorPart)},
	} {
		if want := num(f.key); want != f.got {
			t.Errorf("%s = %d, ibv_devinfo says %d", f.key, f.got, want)
		}
	}
	if ref["fw_ver"] != c.FWVersion {
		t.Errorf("fw_ver %q, ibv_devinfo says %q", c.FWVersion, ref["fw_ver"])
	}
	if rel, _ := os.ReadFile("/proc/sys/kernel/osrelease"); strings.HasPrefix(string(rel), "6.1.") && strings.HasPrefix(dev.Name(), "rxe") && c.MaxQP != 1048560 {
		t.Errorf("rxe on 6.1: max_qp %d, want 1048560", c.MaxQP)
	}
}

func TestGIDAuto(t *testing.T) {
	dev := openDev(t, -1)
	p := dev.Port()
	t.Logf("auto GID: index %d %s", p.GIDIndex, p.GID)
	if p.LinkLayer != "Ethernet" {
		t.Skipf("link layer %s: no RoCE GIDs", p.LinkLayer)
	}
	if !isIPv4Mapped(p.GID) {
		t.Fatalf("auto GID %s is not IPv4-mapped", p.GID)
	}
	base := fmt.Sprintf("/sys/class/infiniband/%s/ports/%d/gid_attrs/", dev.Name(), p.Port)
	typ, _ := os.ReadFile(base + "types/" + strconv.Itoa(p.GIDIndex))
	if got := strings.TrimSpace(string(typ)); got != "RoCE v2" {
		t.Errorf("sysfs says GID %d is %q, want RoCE v2", p.GIDIndex, got)
	}
	if nd, _ := os.ReadFile(base + "ndevs/" + strconv.Itoa(p.GIDIndex)); strings.TrimSpace(string(nd)) == "lo" {
		var want fabric.GID
		if err := want.UnmarshalText([]byte("::ffff:127.0.0.1")); err != nil {
			t.Fatal(err)
		}
		if p.GIDIndex != 1 || p.GID != want {
			t.Errorf("rxe on lo: auto GID %d %s, want 1 ::ffff:127.0.0.1", p.GIDIndex, p.GID)
		}
	}

	d0 := openDev(t, 0)
	if d0.Port().GIDIndex != 0 || isIPv4Mapped(d0.Port().GID) {
		t.Errorf("explicit index 0: %d %s", d0.Port().GIDIndex, d0.Port().GID)
	}
	t.Logf("explicit GID 0: %s", d0.Port().GID)
}

func TestOpenErrors(t *testing.T) {
	skipWithoutDevice(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		cfg   fabric.DeviceConfig
		verb  string
		errno syscall.Errno
	}{
		{"no such device", fabric.DeviceConfig{Name: "nosuch0", GIDIndex: -1}, "ibv_open_device", syscall.ENODEV},
		{"no such port", fabric.DeviceConfig{Name: os.Getenv("RDMAPROBE_DEVICE"), Port: 9, GIDIndex: -1}, "ibv_query_port", syscall.EINVAL},
		{"GID beyond table", fabric.DeviceConfig{Name: os.Getenv("RDMAPROBE_DEVICE"), GIDIndex: 100000}, "ibv_query_gid", syscall.EINVAL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev, err := New().Open(ctx, tc.cfg)
			if err == nil {
				dev.Close()
				t.Fatal("opened")
			}
			var ve *fabric.VerbError
			if !errors.As(err, &ve) || ve.Verb != tc.verb || ve.Errno != tc.errno {
				t.Fatalf("got %v, want %s %s", err, tc.verb, fabric.ErrnoName(tc.errno))
			}
			t.Log(err)
		})
	}
}

func TestRoundTrips(t *testing.T) {
	dev := openDev(t, -1)
	pd := allocPD(t, dev)
	a, b := pair(t, dev, pd)
	t.Logf("QPs %d (PSN %#06x) <-> %d (PSN %#06x)", a.qp.QPN(), a.psn, b.qp.QPN(), b.psn)
	for _, x := range []*ep{a, b} {
		if s := x.qp.State(); s != fabric.QPSReset {
			t.Fatalf("new QP in %s", s)
		}
	}
	start := time.Now()
	if err := connect(a, b); err != nil {
		t.Fatal(err)
	}
	t.Logf("INIT/RTR/RTS of the pair: %v", time.Since(start))
	for _, x := range []*ep{a, b} {
		if s := x.qp.State(); s != fabric.QPSRTS {
			t.Fatalf("connected QP in %s", s)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 100
	msg := make([]byte, 1024)
	start = time.Now()
	for i := range n {
		rand.Read(msg)
		if err := exchange(ctx, a, b, msg); err != nil {
			t.Fatalf("round trip %d, a→b: %v", i, err)
		}
		// Echo what arrived, as the server does.
		if err := exchange(ctx, b, a, b.rmr.Buf()[:len(msg)]); err != nil {
			t.Fatalf("round trip %d, b→a: %v", i, err)
		}
		if !bytes.Equal(a.rmr.Buf()[:len(msg)], msg) {
			t.Fatalf("round trip %d: echo differs", i)
		}
	}
	el := time.Since(start)
	t.Logf("%d verified 1 KiB round trips in %v (%v per round trip)", n, el, el/n)
}

func TestPostBounds(t *testing.T) {
	dev := openDev(t, -1)
	pd := allocPD(t, dev)
	a, _ := pair(t, dev, pd)
	for _, c := range []struct{ off, n int }{{-1, 1}, {0, msgSize + 1}, {msgSize, 1}} {
		if err := a.qp.PostRecv(1, a.rmr, c.off, c.n); fabric.Errno(err) != syscall.EINVAL {
			t.Errorf("recv [%d:+%d]: %v", c.off, c.n, err)
		}
	}
}

func TestWaitCancelAndDestroy(t *testing.T) {
	dev := openDev(t, -1)
	cq, err := dev.CreateCQ(4)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := fabric.Await(ctx, cq); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("await on an empty CQ: %v", err)
	}
	if err := cq.Arm(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cq.Wait(context.Background()) }()
	if err := cq.Destroy(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not woken by Destroy")
	}
	if _, err := cq.Poll(make([]fabric.WC, 1)); fabric.Errno(err) != syscall.EINVAL {
		t.Errorf("poll after destroy: %v", err)
	}
	if err := cq.Destroy(); fabric.Errno(err) != syscall.EINVAL {
		t.Errorf("second destroy: %v", err)
	}
}

func TestCloseReleasesLeftovers(t *testing.T) {
	skipWithoutDevice(t)
	dev, err := New().Open(context.Background(), fabric.DeviceConfig{Name: os.Getenv("RDMAPROBE_DEVICE"), GIDIndex: -1})
	if err != nil {
		t.Fatal(err)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := newEP(dev, pd); err != nil {
			t.Fatal(err)
		}
	}
	if err := dev.Close(); err != nil {
		t.Fatalf("close with leftovers: %v", err)
	}
	select {
	case <-dev.(*device).done:
	default:
		t.Fatal("event goroutine still running after Close")
	}
	if _, err := dev.CreateCQ(1); err == nil {
		t.Fatal("CreateCQ on a closed device")
	}
}

// TestManyPairs holds RDMAPROBE_PAIRS (default 1000) connected pairs at
// once, each set up and exercised by its own goroutine on one context, the
// way the server holds its clients.
func TestManyPairs(t *testing.T) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("RDMAPROBE_PAIRS")); err == nil && v > 0 {
		n = v
	}
	dev := openDev(t, -1)
	pd := allocPD(t, dev)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	eps := make([][2]*ep, n)
	errs := make([]error, n)
	psns := make([][2]uint32, n)
	for i := range psns {
		psns[i] = [2]uint32{randPSN(t), randPSN(t)}
	}
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := newEP(dev, pd)
			if err != nil {
				errs[i] = err
				return
			}
			eps[i][0] = a
			b, err := newEP(dev, pd)
			if err != nil {
				errs[i] = err
				return
			}
			eps[i][1] = b
			a.psn, b.psn = psns[i][0], psns[i][1]
			if err := connect(a, b); err != nil {
				errs[i] = err
				return
			}
			msg := []byte(fmt.Sprintf("pair %d", i))
			if err := exchange(ctx, a, b, msg); err != nil {
				errs[i] = err
				return
			}
			errs[i] = exchange(ctx, b, a, msg)
		}()
	}
	wg.Wait()
	setup := time.Since(start)
	failed := 0
	for i, err := range errs {
		if err != nil {
			if failed < 5 {
				t.Errorf("pair %d: %v", i, err)
			}
			failed++
		}
	}
	t.Logf("%d pairs (%d QPs, %d CQs, %d MRs) created, connected and exchanged concurrently in %v; %d failed",
		n, 2*n, 4*n, 4*n, setup, failed)

	start = time.Now()
	for _, p := range eps {
		for _, e := range p {
			if e != nil {
				if err := e.close(); err != nil {
					t.Error(err)
				}
			}
		}
	}
	t.Logf("teardown of %d endpoints: %v", 2*n, time.Since(start))
}

// TestClientCost reports the raw verbs cost of one client (2 CQ + 2 MR +
// RC QP + INIT/RTR/RTS) phase by phase, serially, as a baseline for the
// server's own per-client figures.
func TestClientCost(t *testing.T) {
	dev := openDev(t, -1)
	pd := allocPD(t, dev)
	const n = 200
	var cq, mr, qp, init, rtr, rts, destroy time.Duration
	for range n {
		t0 := time.Now()
		scq, err := dev.CreateCQ(16)
		if err != nil {
			t.Fatal(err)
		}
		rcq, err := dev.CreateCQ(16)
		if err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		smr, err := pd.RegMR(msgSize, fabric.AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		rmr, err := pd.RegMR(msgSize, fabric.AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		t2 := time.Now()
		q, err := pd.CreateQP(fabric.QPInitAttr{SendCQ: scq, RecvCQ: rcq, MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1})
		if err != nil {
			t.Fatal(err)
		}
		t3 := time.Now()
		e := &ep{dev: dev, scq: scq, rcq: rcq, smr: smr, rmr: rmr, qp: q, psn: randPSN(t)}
		if err := q.ToInit(initAttr()); err != nil {
			t.Fatal(err)
		}
		t4 := time.Now()
		if err := q.ToRTR(rtrTo(e, e, e.psn)); err != nil {
			t.Fatal(err)
		}
		t5 := time.Now()
		if err := q.ToRTS(rtsAttr(e.psn)); err != nil {
			t.Fatal(err)
		}
		t6 := time.Now()
		if err := e.close(); err != nil {
			t.Fatal(err)
		}
		t7 := time.Now()
		cq += t1.Sub(t0)
		mr += t2.Sub(t1)
		qp += t3.Sub(t2)
		init += t4.Sub(t3)
		rtr += t5.Sub(t4)
		rts += t6.Sub(t5)
		destroy += t7.Sub(t6)
	}
	per := func(d time.Duration) time.Duration { return d / n }
	t.Logf("per client over %d: 2×CQ %v, 2×MR(4 KiB) %v, QP %v, INIT %v, RTR %v, RTS %v; setup total %v; teardown %v",
		n, per(cq), per(mr), per(qp), per(init), per(rtr), per(rts), per(cq+mr+qp+init+rtr+rts), per(destroy))
}

// TestMapCountENOMEM lowers vm.max_map_count to just above what the
// process maps, then creates QPs until one fails: each QP maps its SQ and
// RQ rings, and this is the limit one process met at 16,371 clients.
func TestMapCountENOMEM(t *testing.T) {
	dev := openDev(t, -1)
	const knob = "/proc/sys/vm/max_map_count"
	old, err := os.ReadFile(knob)
	if err != nil {
		t.Skipf("cannot read %s: %v", knob, err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip(err)
	}
	inUse := bytes.Count(maps, []byte("\n"))
	if err := os.WriteFile(knob, []byte(strconv.Itoa(inUse+60)), 0); err != nil {
		t.Skipf("cannot lower %s (needs root): %v", knob, err)
	}
	restore := func() { os.WriteFile(knob, old, 0) }
	defer restore()

	pd := allocPD(t, dev)
	cq, err := dev.CreateCQ(16)
	if err != nil {
		restore()
		t.Fatal(err)
	}
	var qps []fabric.QP
	var qerr error
	for len(qps) < 1000 {
		q, err := pd.CreateQP(fabric.QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1})
		if err != nil {
			qerr = err
			break
		}
		qps = append(qps, q)
	}
	restore()
	for _, q := range qps {
		if err := q.Destroy(); err != nil {
			t.Error(err)
		}
	}
	if err := cq.Destroy(); err != nil {
		t.Error(err)
	}
	t.Logf("max_map_count %d+60: %d QPs, then %v", inUse, len(qps), qerr)
	var ve *fabric.VerbError
	if !errors.As(qerr, &ve) || ve.Verb != "ibv_create_qp" || ve.Errno != syscall.ENOMEM {
		t.Fatalf("got %v, want ibv_create_qp ENOMEM", qerr)
	}
}

// TestMemlockENOMEM asks for more pinned memory than RLIMIT_MEMLOCK allows.
// The kernel enforces that only without CAP_IPC_LOCK, so as root it skips.
func TestMemlockENOMEM(t *testing.T) {
	dev := openDev(t, -1)
	pd := allocPD(t, dev)
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
		t.Skip(err)
	}
	low := unix.Rlimit{Cur: 64 << 10, Max: old.Max}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &low); err != nil {
		t.Skip(err)
	}
	m, err := pd.RegMR(4<<20, fabric.AccessLocalWrite)
	unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old)
	if err == nil {
		m.Dereg()
		t.Skip("4 MiB registered under a 64 KiB RLIMIT_MEMLOCK: this process has CAP_IPC_LOCK (root), which the kernel exempts")
	}
	t.Logf("RegMR(4 MiB) under RLIMIT_MEMLOCK 64 KiB: %v", err)
	if fabric.Errno(err) != syscall.ENOMEM {
		t.Fatalf("got %v, want ENOMEM", err)
	}
}

// BenchmarkClientSetup is the raw verbs cost of one client: 2 CQs, 2 MRs
// of 4 KiB, an RC QP and RESET→INIT→RTR→RTS (connected to itself, so no
// peer is needed). Teardown is excluded from the timing.
func BenchmarkClientSetup(b *testing.B) {
	dev := openDev(b, -1)
	pd := allocPD(b, dev)
	psn := randPSN(b)
	for b.Loop() {
		e, err := newEP(dev, pd)
		if err != nil {
			b.Fatal(err)
		}
		e.psn = psn
		if err := e.qp.ToInit(initAttr()); err != nil {
			b.Fatal(err)
		}
		if err := e.qp.ToRTR(rtrTo(e, e, psn)); err != nil {
			b.Fatal(err)
		}
		if err := e.qp.ToRTS(rtsAttr(psn)); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := e.close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkRoundTrip is one verified 64-byte send/recv each way on a
// connected pair, waiting with fabric.Await.
func BenchmarkRoundTrip(b *testing.B) {
	dev := openDev(b, -1)
	pd := allocPD(b, dev)
	x, err := newEP(dev, pd)
	if err != nil {
		b.Fatal(err)
	}
	y, err := newEP(dev, pd)
	if err != nil {
		b.Fatal(err)
	}
	defer x.close()
	defer y.close()
	x.psn, y.psn = randPSN(b), randPSN(b)
	if err := connect(x, y); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	msg := make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		if err := exchange(ctx, x, y, msg); err != nil {
			b.Fatal(err)
		}
		if err := exchange(ctx, y, x, msg); err != nil {
			b.Fatal(err)
		}
	}
}
