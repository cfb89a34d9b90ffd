package rdmacm

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/fabric/sim"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// fakeCM is a connection manager over a simulated device: it answers
// each step with the event a script says (the success event unless
// told), and a connect it accepts connects the client's QP to a server
// QP on the same device, which echoes when asked (as cmcapserver -e).
type fakeCM struct {
	t      *testing.T
	dev    fabric.Device
	pd     fabric.PD // the server's
	cq     fabric.CQ
	events chan fabric.CMEvent

	// capacity: connects accepted; the rest are REJECTED (reason 28,
	// consumer defined, with 4 bytes), as cmcapserver rejects.
	capacity int
	// fail: the event that ends attempt ctx at its step ("addr",
	// "route", "connect"); silent: steps answered by nothing.
	fail   map[int]map[string]fabric.CMEventType
	silent map[int]string

	mu    sync.Mutex
	calls []string
	held  int
	srv   map[uint32]*srvConn
	ids   []*fakeID
	size  int
	depth int
}

type fakeID struct {
	cm    *fakeCM
	ctx   uint64
	qp    fabric.QP
	gone  bool
	srvQP fabric.QP
}

type srvConn struct {
	qp fabric.QP
	mr fabric.MR
}

func newFakeCM(t *testing.T, capacity, size, depth int) *fakeCM {
	t.Helper()
	dev, err := sim.New(sim.Options{}).Open(context.Background(), fabric.DeviceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := dev.CreateCQ(4096)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCM{t: t, dev: dev, pd: pd, cq: cq, events: make(chan fabric.CMEvent, 1024), capacity: capacity,
		fail: map[int]map[string]fabric.CMEventType{}, silent: map[int]string{}, srv: map[uint32]*srvConn{}, size: size, depth: depth}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go f.echo(ctx, done)
	t.Cleanup(func() {
		cancel()
		<-done
		f.mu.Lock()
		for _, s := range f.srv {
			s.qp.Destroy()
			s.mr.Dereg()
		}
		f.mu.Unlock()
		cq.Destroy()
		pd.Dealloc()
		dev.Close()
	})
	return f
}

func (f *fakeCM) call(s string) {
	f.mu.Lock()
	f.calls = append(f.calls, s)
	f.mu.Unlock()
}

// answer queues the event of attempt ctx's step: the script's, or ok.
func (f *fakeCM) answer(id *fakeID, step string, ok fabric.CMEventType, ev fabric.CMEvent) {
	if f.silent[int(id.ctx)] == step {
		return
	}
	ev.ID, ev.Ctx, ev.Type = id, id.ctx, ok
	if e, bad := f.fail[int(id.ctx)][step]; bad {
		ev.Type, ev.Status = e, -110 // ETIMEDOUT, as the CM's own timeouts say
	}
	f.events <- ev
}

func (f *fakeCM) Start(addr netip.AddrPort, timeout time.Duration, ctx uint64) (fabric.CMID, error) {
	f.call(fmt.Sprintf("addr %d", ctx))
	id := &fakeID{cm: f, ctx: ctx}
	f.mu.Lock()
	f.ids = append(f.ids, id)
	f.mu.Unlock()
	f.answer(id, "addr", fabric.CMAddrResolved, fabric.CMEvent{})
	return id, nil
}

func (f *fakeCM) Next(wait time.Duration) (fabric.CMEvent, bool, error) {
	select {
	case ev := <-f.events:
		if ev.ID.(*fakeID).gone {
			return f.Next(0)
		}
		return ev, true, nil
	case <-time.After(wait):
		return fabric.CMEvent{}, false, nil
	}
}

func (f *fakeCM) Close() error { return nil }

func (x *fakeID) ResolveRoute(time.Duration) error {
	x.cm.call(fmt.Sprintf("route %d", x.ctx))
	x.cm.answer(x, "route", fabric.CMRouteResolved, fabric.CMEvent{})
	return nil
}

func (x *fakeID) Device() (fabric.Device, error) { return x.cm.dev, nil }

func (x *fakeID) CreateQP(pd fabric.PD, a fabric.QPInitAttr) (fabric.QP, error) {
	x.cm.call(fmt.Sprintf("qp %d", x.ctx))
	qp, err := pd.CreateQP(a)
	if err != nil {
		return nil, err
	}
	if err := qp.ToInit(fabric.InitAttr{Port: x.cm.dev.Port().Port, Access: fabric.AccessLocalWrite}); err != nil {
		qp.Destroy()
		return nil, err
	}
	x.qp = qp
	return qp, nil
}

func (x *fakeID) Connect(pdata []byte) error {
	f := x.cm
	f.call(fmt.Sprintf("connect %d", x.ctx))
	f.mu.Lock()
	full := f.held >= f.capacity
	if !full {
		f.held++
	}
	f.mu.Unlock()
	if full {
		f.events <- fabric.CMEvent{ID: x, Ctx: x.ctx, Type: fabric.CMRejected, Status: 28, PrivateDataLen: 4}
		return nil
	}
	if _, bad := f.fail[int(x.ctx)]["connect"]; bad || f.silent[int(x.ctx)] == "connect" {
		f.answer(x, "connect", fabric.CMEstablished, fabric.CMEvent{})
		return nil
	}
	srv := f.serve(x.qp)
	x.srvQP = srv
	f.answer(x, "connect", fabric.CMEstablished, fabric.CMEvent{RemoteQPN: srv.QPN()})
	return nil
}

// serve makes the server's QP of a connection, connected to the
// client's, with twice depth receives posted.
func (f *fakeCM) serve(cli fabric.QP) fabric.QP {
	t := f.t
	port := f.dev.Port()
	qp, err := f.pd.CreateQP(fabric.QPInitAttr{SendCQ: f.cq, RecvCQ: f.cq, MaxSendWR: 2 * f.depth, MaxRecvWR: 2 * f.depth, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := qp.ToInit(fabric.InitAttr{Port: port.Port, Access: fabric.AccessLocalWrite}); err != nil {
		t.Fatal(err)
	}
	mr, err := f.pd.RegMR(2*f.depth*f.size, fabric.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	for j := 0; j < 2*f.depth; j++ {
		if err := qp.PostRecv(uint64(j), mr, j*f.size, f.size); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range [][2]fabric.QP{{qp, cli}, {cli, qp}} {
		if err := p[0].ToRTR(fabric.RTRAttr{PathMTU: port.ActiveMTU, DestQPN: p[1].QPN(), RQPSN: 1, MaxDestRdAtomic: 1,
			MinRNRTimer: 12, DLID: port.LID, DGID: port.GID, GIDIndex: port.GIDIndex, HopLimit: 64, Port: port.Port}); err != nil {
			t.Fatal(err)
		}
		if err := p[0].ToRTS(fabric.RTSAttr{SQPSN: 1, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}); err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	f.srv[qp.QPN()] = &srvConn{qp: qp, mr: mr}
	f.mu.Unlock()
	return qp
}

// echo sends every message a server QP receives back as it came, and
// posts its receive again once the echo is sent.
func (f *fakeCM) echo(ctx context.Context, done chan struct{}) {
	defer close(done)
	wcs := make([]fabric.WC, 32)
	for ctx.Err() == nil {
		n, err := fabric.Spin(ctx, f.cq, wcs, time.Millisecond)
		if err != nil {
			return
		}
		for _, wc := range wcs[:n] {
			f.mu.Lock()
			s := f.srv[wc.QPN]
			f.mu.Unlock()
			if s == nil || wc.Status != fabric.WCSuccess {
				continue
			}
			j := int(wc.WRID & 0xffff)
			if wc.Opcode == fabric.WCRecv {
				s.qp.PostSend(uint64(j)|1<<32, s.mr, j*f.size, wc.ByteLen)
			} else {
				s.qp.PostRecv(uint64(j), s.mr, j*f.size, f.size)
			}
		}
	}
}

func (x *fakeID) Disconnect() error { return nil }

func (x *fakeID) Destroy() error {
	x.gone = true
	if x.qp != nil {
		x.qp.Destroy()
	}
	return nil
}

func (f *fakeCM) callsOf(kind string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if strings.HasPrefix(c, kind) {
			out = append(out, c)
		}
	}
	return out
}

const addr = "192.0.2.1:7471"

func outcomes(recs []result.ClientRecord) map[string]int {
	m := map[string]int{}
	for _, r := range recs {
		m[r.Outcome]++
	}
	return m
}

// Connections past the server's capacity are REJECTED with the reason
// and private data the server gave; each connected one has every step's
// time and both QP numbers.
func TestConnectAndReject(t *testing.T) {
	for _, lockstep := range []bool{false, true} {
		t.Run(fmt.Sprintf("lockstep=%v", lockstep), func(t *testing.T) {
			f := newFakeCM(t, 3, 64, 1)
			recs, conns, err := Run(context.Background(), f, Config{Addr: addr, N: 5, IDBase: 10, Timeout: 5 * time.Second,
				Lockstep: lockstep, Engine: client.Config{MsgSize: 64}})
			if err != nil {
				t.Fatal(err)
			}
			defer conns.Close()
			if got := outcomes(recs); got[result.OutcomeOK] != 3 || got[result.OutcomeRejected] != 2 {
				t.Fatalf("outcomes %v, want 3 ok and 2 REJECTED", got)
			}
			for i, r := range recs {
				if r.ID != 10+i {
					t.Errorf("record %d has ID %d", i, r.ID)
				}
				if r.Outcome == result.OutcomeRejected {
					if !strings.Contains(r.Error, "reason 28 (consumer defined), private data 4 bytes") {
						t.Errorf("rejected: %q", r.Error)
					}
					continue
				}
				for _, p := range []string{result.PhaseResolveAddr, result.PhaseResolveRoute, result.PhaseQPCreate, result.PhaseEstablish} {
					if _, ok := r.PhasesUS[p]; !ok {
						t.Errorf("record %d: no %s time in %v", i, p, r.PhasesUS)
					}
				}
				if r.LocalQPN == 0 || r.RemoteQPN == 0 || r.LocalQPN == r.RemoteQPN {
					t.Errorf("record %d: QPs %d → %d", i, r.LocalQPN, r.RemoteQPN)
				}
			}
			if n := len(conns.Held()); n != 3 {
				t.Errorf("%d held, want 3", n)
			}
		})
	}
}

// Lockstep issues each step for the whole batch before the next step,
// as cmtime does; interleaved moves each attempt on as its events come.
func TestSteppings(t *testing.T) {
	for _, tc := range []struct {
		lockstep bool
		want     []string
	}{
		{false, []string{"qp 0", "connect 0", "qp 1", "connect 1", "qp 2", "connect 2"}},
		{true, []string{"qp 0", "qp 1", "qp 2", "connect 0", "connect 1", "connect 2"}},
	} {
		f := newFakeCM(t, 3, 64, 1)
		recs, conns, err := Run(context.Background(), f, Config{Addr: addr, N: 3, Timeout: 5 * time.Second,
			Lockstep: tc.lockstep, Engine: client.Config{MsgSize: 64}})
		if err != nil {
			t.Fatal(err)
		}
		conns.Close()
		if got := outcomes(recs); got[result.OutcomeOK] != 3 {
			t.Fatalf("lockstep %v: outcomes %v", tc.lockstep, got)
		}
		var got []string
		for _, c := range f.callsOf("") {
			if strings.HasPrefix(c, "qp") || strings.HasPrefix(c, "connect") {
				got = append(got, c)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("lockstep %v: calls %v, want %v", tc.lockstep, got, tc.want)
		}
		if r := f.callsOf("route"); len(r) != 3 {
			t.Errorf("lockstep %v: routes %v", tc.lockstep, r)
		}
	}
}

// Each CM event that ends an attempt is its outcome class, with the
// event's status as the errno; an attempt no event ends times out, and
// the in-flight window bounds the attempts in progress.
func TestEventClasses(t *testing.T) {
	f := newFakeCM(t, 10, 64, 1)
	f.fail[0] = map[string]fabric.CMEventType{"addr": fabric.CMAddrError}
	f.fail[1] = map[string]fabric.CMEventType{"route": fabric.CMRouteError}
	f.fail[2] = map[string]fabric.CMEventType{"connect": fabric.CMUnreachable}
	f.fail[3] = map[string]fabric.CMEventType{"connect": fabric.CMConnectError}
	f.fail[4] = map[string]fabric.CMEventType{"connect": fabric.CMDisconnected}
	f.silent[5] = "route"
	recs, conns, err := Run(context.Background(), f, Config{Addr: addr, N: 7, InFlight: 2, Timeout: 300 * time.Millisecond,
		Engine: client.Config{MsgSize: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer conns.Close()
	want := []struct{ outcome, errno, text string }{
		{result.OutcomeAddrError, "ETIMEDOUT", "status -110"},
		{result.OutcomeRouteError, "ETIMEDOUT", "status -110"},
		{result.OutcomeUnreachable, "ETIMEDOUT", "status -110"},
		{result.OutcomeConnectError, "ETIMEDOUT", "status -110"},
		{result.OutcomeDisconnected, "", "RDMA_CM_EVENT_DISCONNECTED"},
		{result.OutcomeTimeout, "", "resolving the route"},
		{result.OutcomeOK, "", ""},
	}
	for i, w := range want {
		r := recs[i]
		if r.Outcome != w.outcome || r.Errno != w.errno || !strings.Contains(r.Error, w.text) {
			t.Errorf("attempt %d: %s %s %q, want %s %s %q", i, r.Outcome, r.Errno, r.Error, w.outcome, w.errno, w.text)
		}
	}
	// The window of 2: attempt 2 starts only once 0 or 1 has ended.
	starts := f.callsOf("addr")
	if len(starts) != 7 {
		t.Fatalf("starts %v", starts)
	}
}

// The held connections are clients of the shared engine: its traffic
// phase runs over them under the same flags as over built-in clients,
// open loop included. The window stays open until every client is
// measured (MaxDuration), so a slow machine measures them all too.
func TestTrafficThroughEngine(t *testing.T) {
	const size = 128
	for _, tc := range []struct {
		name string
		cfg  client.TrafficConfig
	}{
		{"closed", client.TrafficConfig{Duration: 200 * time.Millisecond, MaxDuration: time.Minute, Depth: 2, Timeout: 5 * time.Second}},
		{"open", client.TrafficConfig{Duration: 300 * time.Millisecond, MaxDuration: time.Minute, Depth: 2, Rate: 50, Timeout: 5 * time.Second}},
	} {
		f := newFakeCM(t, 3, size, 2)
		recs, conns, err := Run(context.Background(), f, Config{Addr: addr, N: 3, Timeout: 5 * time.Second,
			Engine: client.Config{MsgSize: size, Depth: 2}})
		if err != nil {
			t.Fatal(err)
		}
		if got := outcomes(recs); got[result.OutcomeOK] != 3 {
			t.Fatalf("%s: outcomes %v", tc.name, got)
		}
		tr := conns.Traffic(context.Background(), tc.cfg)
		conns.Close()
		if tr.Error != "" || tr.Clients != 3 || tr.ClientsFailed != 0 || len(tr.Errors) != 0 || tr.Messages < 3 ||
			tr.Bytes != tr.Messages*size || tr.MsgBytes != size || tr.Op != result.OpSend || tr.Latency.N < tr.Messages {
			t.Errorf("%s: traffic %+v", tc.name, tr)
		}
		if open := tc.cfg.Rate > 0; open != (tr.Schedule != nil) || tr.RatePerClient != tc.cfg.Rate {
			t.Errorf("%s: schedule %+v at %v/s", tc.name, tr.Schedule, tr.RatePerClient)
		}
	}
}

func TestRefuse(t *testing.T) {
	for _, tc := range []struct {
		op     string
		echoes bool
		bad    bool
	}{
		{"", true, false}, {result.OpSend, true, false}, {result.OpWrite, true, true}, {result.OpRead, true, true},
		{result.OpWrite, false, false}, // no phase runs at all
	} {
		err := Refuse(Use{ServerCmd: true, ServerEchoes: tc.echoes, Traffic: client.TrafficConfig{Op: tc.op, Duration: time.Second}})
		if (err != nil) != tc.bad {
			t.Errorf("op %q echoes %v: %v", tc.op, tc.echoes, err)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("not one line: %q", err)
		}
	}
	for _, u := range []Use{{}, {ServerCmd: true, ClientCmd: true}, {ServerCmd: true, Mode: "ud"}, {ServerCmd: true, Mode: "mux"},
		{ServerCmd: true, Lockstep: true, Rate: 10}, {ServerCmd: true, Judged: "--criterion traffic"}} {
		if err := Refuse(u); err == nil {
			t.Errorf("%+v passed", u)
		}
	}
	if err := (Config{N: 1, PrivateData: make([]byte, MaxPrivateData+1)}).Check(); err == nil {
		t.Error("private data above a connect request's room passed")
	}
	if err := (Config{N: 1, PrivateData: make([]byte, MaxPrivateData)}).Check(); err != nil {
		t.Error(err)
	}
}
