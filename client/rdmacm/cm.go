//go:build verbs && cgo

package rdmacm

/*
#cgo LDFLAGS: -lrdmacm -libverbs
#include <stdlib.h>
#include "cm.h"
*/
import "C"

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// Supported reports whether this binary was built with librdmacm.
func Supported() bool { return true }

// The steps of one attempt, in order.
const (
	stepAddr = iota
	stepRoute
	stepQP // lockstep: route resolved, waiting for the window's QPs
	stepEstablish
	stepHeld
	stepEnded
)

type conn struct {
	id          *C.struct_rdma_cm_id
	step        int
	start, last time.Time
	deadline    time.Time
	// ready: under Config.Lockstep, this attempt has finished its step
	// and waits for the rest of its batch.
	ready bool
	// The traffic phase's registered buffer (traffic.go).
	mr  *C.struct_ibv_mr
	buf unsafe.Pointer
}

// Conns are the connections Run made, held until Close.
type Conns struct {
	g     *C.rp_cm_gen
	conns []conn
	// depth is what each QP's queues were made for (Config.TrafficDepth),
	// idBase the first connection's client ID, proc the generator's.
	depth, idBase, proc int
}

// Close disconnects and frees every connection, then the channel.
func (h *Conns) Close() {
	if h == nil || h.g == nil {
		return
	}
	for i := range h.conns {
		c := &h.conns[i]
		if c.id != nil {
			C.rp_cm_close(c.id, C.int(btoi(c.step == stepHeld)))
			c.id = nil
		}
		// After its QP: nothing posted on the buffer is left then.
		if c.mr != nil {
			C.ibv_dereg_mr(c.mr)
			c.mr = nil
		}
		if c.buf != nil {
			C.free(c.buf)
			c.buf = nil
		}
	}
	C.rp_cm_free(h.g)
	h.g = nil
}

// pollSlice bounds one wait for an event, so that a cancelled ctx is
// seen soon.
const pollSlice = 100 * time.Millisecond

// Run makes cfg.N connections to cfg.Addr, at most cfg.InFlight in
// progress, and returns a record per attempt and the connections made,
// held until the caller closes them. An error is the generator's own
// (no event channel, a bad address): then no attempt was made.
func Run(ctx context.Context, cfg Config) ([]result.ClientRecord, *Conns, error) {
	if err := cfg.Check(); err != nil {
		return nil, nil, err
	}
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("server address %q: %w", cfg.Addr, err)
	}
	if net.ParseIP(host) == nil {
		return nil, nil, fmt.Errorf("server address %q: rdma_cm clients need an IP address", cfg.Addr)
	}
	// With a traffic phase each QP takes depth receives and four times
	// depth SENDs (a SEND's completion may come after its echo, and the
	// next SEND is posted then), and each device's CQ all of them;
	// without, nothing is posted.
	depth, cqe := 1, 256
	if cfg.TrafficDepth > 0 {
		depth = cfg.TrafficDepth
		cqe = max(cqe, 5*depth*cfg.N+64)
	}
	h := &Conns{conns: make([]conn, cfg.N), depth: depth, idBase: cfg.IDBase, proc: cfg.Proc}
	if e := C.rp_cm_open(&h.g, C.int(depth), C.int(cqe)); e != 0 {
		return nil, nil, fmt.Errorf("rdma_create_event_channel: %w", syscall.Errno(-e))
	}
	chost, cport := C.CString(host), C.CString(port)
	defer C.free(unsafe.Pointer(chost))
	defer C.free(unsafe.Pointer(cport))
	var pdata unsafe.Pointer
	if len(cfg.PrivateData) > 0 {
		pdata = C.CBytes(cfg.PrivateData)
		defer C.free(pdata)
	}
	window := cfg.InFlight
	if window <= 0 {
		window = cfg.N
	}
	// The CM's own address and route timeouts fit inside an attempt's.
	cmMS := C.int(min(cfg.Timeout, 2*time.Second) / time.Millisecond)
	if cmMS < 1 {
		cmMS = 2000
	}

	recs := make([]result.ClientRecord, cfg.N)
	for i := range recs {
		recs[i] = result.ClientRecord{ID: cfg.IDBase + i, Proc: cfg.Proc}
	}
	var next, pending, ended, ok int
	// started is every attempt in start order, so deadlines (start +
	// Timeout) come due from its front.
	started := make([]int, 0, cfg.N)
	// end records attempt i's outcome and frees what it holds.
	end := func(i int, outcome, why string, errno syscall.Errno) {
		c := &h.conns[i]
		r := &recs[i]
		r.Outcome, r.Error = outcome, why
		if errno != 0 {
			r.Errno = unix.ErrnoName(errno)
		}
		if outcome == result.OutcomeOK {
			c.step = stepHeld
			r.ConnectUS = time.Since(c.start).Microseconds()
			ok++
		} else {
			if c.id != nil {
				C.rp_cm_close(c.id, 0)
				c.id = nil
			}
			c.step = stepEnded
		}
		pending--
		ended++
		if cfg.Ended != nil {
			cfg.Ended(r)
		}
		if cfg.Progress != nil {
			cfg.Progress(ended, ok)
		}
	}
	// phase closes the step that just ended.
	phase := func(i int, name string) {
		c := &h.conns[i]
		now := time.Now()
		if recs[i].PhasesUS == nil {
			recs[i].PhasesUS = make(map[string]int64, 4)
		}
		recs[i].PhasesUS[name] = now.Sub(c.last).Microseconds()
		c.last = now
	}
	st := &steps{h: h, recs: recs, phase: phase, end: end, cmMS: cmMS, pdata: pdata, pdlen: len(cfg.PrivateData)}
	// batch is the attempts of the current lockstep batch.
	var batch []int
	begin := time.Now()
	for ended < cfg.N {
		now := time.Now()
		if ctx.Err() != nil {
			for i := range h.conns[:next] {
				if s := h.conns[i].step; s != stepHeld && s != stepEnded {
					end(i, result.OutcomeTimeout, "interrupted", 0)
				}
			}
			for i := next; i < cfg.N; i++ {
				recs[i].Outcome, recs[i].Error = result.OutcomeTimeout, "interrupted: not started"
			}
			break
		}
		if cfg.Lockstep && pending == 0 {
			batch = batch[:0]
		}
		for next < cfg.N && pending < window && (cfg.Rate <= 0 || !now.Before(startAt(begin, next, cfg.Rate))) &&
			(!cfg.Lockstep || len(batch) < window) {
			i := next
			next++
			pending++
			c := &h.conns[i]
			c.start, c.last, c.deadline = now, now, now.Add(cfg.Timeout)
			started = append(started, i)
			if cfg.Lockstep {
				batch = append(batch, i)
			}
			if e := C.rp_cm_start(h.g, C.uint64_t(i), chost, cport, cmMS, &c.id); e != 0 {
				c.id = nil
				end(i, result.OutcomeAddrError, "rdma_resolve_addr", syscall.Errno(-e))
			}
		}
		for len(started) > 0 {
			i := started[0]
			if s := h.conns[i].step; s == stepHeld || s == stepEnded {
				started = started[1:]
				continue
			}
			if cfg.Timeout > 0 && !now.Before(h.conns[i].deadline) {
				started = started[1:]
				end(i, result.OutcomeTimeout, "no CM event ended the attempt within --timeout: "+stepName(h.conns[i].step), 0)
				continue
			}
			break
		}
		if cfg.Lockstep {
			advance(st, batch)
		}
		if ended == cfg.N {
			break
		}
		wait := pollSlice
		if len(started) > 0 && cfg.Timeout > 0 {
			wait = min(wait, time.Until(h.conns[started[0]].deadline))
		}
		if next < cfg.N && pending < window && cfg.Rate > 0 {
			wait = min(wait, time.Until(startAt(begin, next, cfg.Rate)))
		}
		var ev C.rp_cm_ev
		got := C.rp_cm_next(h.g, C.int(max(wait, 0)/time.Millisecond), &ev)
		if got < 0 {
			h.Close()
			return nil, nil, fmt.Errorf("rdma_get_cm_event: %w", syscall.Errno(-got))
		}
		if got == 0 {
			continue
		}
		// The channel drains in one go: one poll per burst of events.
		for got > 0 {
			handle(st, &ev, cfg.Lockstep)
			got = C.rp_cm_next(h.g, 0, &ev)
		}
	}
	return recs, h, nil
}

// advance moves a lockstep batch on once every attempt of it still in
// progress has finished its step: all routes are resolved, then all QPs
// created, then all connects issued, as cmtime steps its connections.
// Each step is timed from its own issue, as cmtime times it.
func advance(st *steps, batch []int) {
	h := st.h
	live := 0
	for _, i := range batch {
		c := &h.conns[i]
		if c.step == stepHeld || c.step == stepEnded {
			continue
		}
		if !c.ready {
			return
		}
		live++
	}
	if live == 0 {
		return
	}
	for _, i := range batch {
		c := &h.conns[i]
		if c.step != stepRoute || !c.ready {
			continue
		}
		c.ready, c.last = false, time.Now()
		st.route(i)
	}
	for _, i := range batch {
		c := &h.conns[i]
		if c.step != stepQP || !c.ready {
			continue
		}
		c.last = time.Now()
		st.createQP(i)
	}
	for _, i := range batch {
		c := &h.conns[i]
		if c.step != stepQP || !c.ready {
			continue
		}
		c.ready, c.last = false, time.Now()
		st.connect(i)
	}
}

// steps issues an attempt's next CM call, in lockstep batches (advance)
// or as its events come (handle), and ends the attempt on a failure.
type steps struct {
	h     *Conns
	recs  []result.ClientRecord
	phase func(int, string)
	end   func(int, string, string, syscall.Errno)
	cmMS  C.int
	pdata unsafe.Pointer
	pdlen int
}

func (st *steps) route(i int) {
	if e := C.rp_cm_route(st.h.conns[i].id, st.cmMS); e != 0 {
		st.end(i, result.OutcomeRouteError, "rdma_resolve_route", syscall.Errno(-e))
	}
}

// createQP creates attempt i's QP and reports whether it did.
func (st *steps) createQP(i int) bool {
	var qpn C.uint32_t
	if e := C.rp_cm_qp(st.h.g, st.h.conns[i].id, &qpn); e != 0 {
		st.end(i, result.OutcomeQPCreate, "rdma_create_qp", syscall.Errno(-e))
		return false
	}
	st.recs[i].LocalQPN = uint32(qpn)
	st.phase(i, result.PhaseQPCreate)
	return true
}

func (st *steps) connect(i int) {
	c := &st.h.conns[i]
	c.step = stepEstablish
	if e := C.rp_cm_connect(c.id, st.pdata, C.int(st.pdlen)); e != 0 {
		st.end(i, result.OutcomeConnectError, "rdma_connect", syscall.Errno(-e))
	}
}

// handle moves the attempt ev belongs to on by one step; under lockstep
// a resolved address or route waits for advance.
func handle(st *steps, ev *C.rp_cm_ev, lockstep bool) {
	h, recs, phase, end := st.h, st.recs, st.phase, st.end
	i := int(ev.idx)
	if i < 0 || i >= len(h.conns) || h.conns[i].id != ev.id {
		return // an attempt already ended
	}
	c := &h.conns[i]
	status := int(ev.status)
	errno := syscall.Errno(0)
	if status < 0 {
		errno = syscall.Errno(-status)
	}
	switch ev.event {
	case C.RDMA_CM_EVENT_ADDR_RESOLVED:
		phase(i, result.PhaseResolveAddr)
		c.step = stepRoute
		if lockstep {
			c.ready = true
			return
		}
		st.route(i)
	case C.RDMA_CM_EVENT_ROUTE_RESOLVED:
		phase(i, result.PhaseResolveRoute)
		if lockstep {
			c.step, c.ready = stepQP, true
			return
		}
		if st.createQP(i) {
			st.connect(i)
		}
	case C.RDMA_CM_EVENT_ESTABLISHED:
		phase(i, result.PhaseEstablish)
		recs[i].RemoteQPN = uint32(ev.qpn)
		end(i, result.OutcomeOK, "", 0)
	case C.RDMA_CM_EVENT_REJECTED:
		why := fmt.Sprintf("reason %d", status)
		if name := rejectReasons[status]; name != "" {
			why += " (" + name + ")"
		}
		end(i, result.OutcomeRejected, fmt.Sprintf("%s, private data %d bytes", why, int(ev.pdlen)), 0)
	case C.RDMA_CM_EVENT_UNREACHABLE:
		end(i, result.OutcomeUnreachable, fmt.Sprintf("status %d", status), errno)
	case C.RDMA_CM_EVENT_CONNECT_ERROR:
		end(i, result.OutcomeConnectError, fmt.Sprintf("status %d", status), errno)
	case C.RDMA_CM_EVENT_ADDR_ERROR:
		end(i, result.OutcomeAddrError, fmt.Sprintf("status %d", status), errno)
	case C.RDMA_CM_EVENT_ROUTE_ERROR:
		end(i, result.OutcomeRouteError, fmt.Sprintf("status %d", status), errno)
	case C.RDMA_CM_EVENT_DISCONNECTED, C.RDMA_CM_EVENT_DEVICE_REMOVAL, C.RDMA_CM_EVENT_ADDR_CHANGE:
		if c.step == stepHeld {
			// Made, then closed by the other side before the last
			// attempt of this generator ended.
			recs[i].Outcome, recs[i].Error = result.OutcomeDisconnected, C.GoString(C.rdma_event_str(uint32(ev.event)))
			C.rp_cm_close(c.id, 0)
			c.id, c.step = nil, stepEnded
		} else if c.step != stepEnded {
			end(i, result.OutcomeDisconnected, C.GoString(C.rdma_event_str(uint32(ev.event))), 0)
		}
	}
}

// Watch reads the event channel after Run, while the connections are
// held, until ctx ends: each held connection the other side closed
// (DISCONNECTED, or its device or address gone) is given to dropped as
// its client's record with outcome DISCONNECTED, once. A connection the
// server dropped while held is a failure of the point, whenever it
// came. The connection itself is left to Close. Watch returns when ctx
// ends or the channel fails.
func (h *Conns) Watch(ctx context.Context, dropped func(result.ClientRecord)) {
	if h == nil || h.g == nil {
		return
	}
	seen := map[int]bool{}
	for ctx.Err() == nil {
		var ev C.rp_cm_ev
		got := C.rp_cm_next(h.g, C.int(pollSlice/time.Millisecond), &ev)
		if got < 0 {
			return
		}
		if got == 0 {
			continue
		}
		i := int(ev.idx)
		if i < 0 || i >= len(h.conns) || h.conns[i].id != ev.id || h.conns[i].step != stepHeld || seen[i] {
			continue
		}
		switch ev.event {
		case C.RDMA_CM_EVENT_DISCONNECTED, C.RDMA_CM_EVENT_DEVICE_REMOVAL, C.RDMA_CM_EVENT_ADDR_CHANGE:
			seen[i] = true
			dropped(result.ClientRecord{ID: h.idBase + i, Proc: h.proc, Outcome: result.OutcomeDisconnected,
				Error: C.GoString(C.rdma_event_str(uint32(ev.event))) + " while held, after every connection of the generator was made"})
		}
	}
}

// rejectReasons names the IB CM's reject reasons (IBTA 12.6.7.2) that
// an rdma_cm client meets: what a RoCE or InfiniBand REJECTED carries.
var rejectReasons = map[int]string{
	1: "no QP", 3: "no resources", 4: "timeout", 5: "unsupported", 6: "invalid comm ID",
	8: "invalid service ID: no listener", 10: "stale connection", 26: "invalid MTU",
	27: "insufficient responder resources", 28: "consumer defined", 29: "invalid RNR retry",
	31: "invalid class version",
}

// startAt is when attempt i starts at rate per second.
func startAt(begin time.Time, i int, rate float64) time.Time {
	return begin.Add(time.Duration(float64(i) / rate * float64(time.Second)))
}

func stepName(step int) string {
	switch step {
	case stepAddr:
		return "resolving the address"
	case stepRoute:
		return "resolving the route"
	case stepQP:
		return "waiting for the rest of its lockstep batch to resolve its routes"
	default:
		return "connecting"
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
