//go:build verbs && cgo

package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// cq is a completion queue on the device's shared completion channel.
type cq struct {
	dev *device
	id  uintptr // cq_context: how the event goroutine finds this CQ

	// life is held shared by every C call on the CQ (and by QP creation
	// over it) and exclusively by Destroy; pollMu guards buf, the C array
	// Poll copies completions through.
	life   sync.RWMutex
	cq     *C.struct_ibv_cq
	dead   bool
	pollMu sync.Mutex
	buf    *C.rp_wc
	// spun is the time spins found nothing (fabric.SpinCounter), ns.
	spun atomic.Int64

	// An event closes ev, waking every waiter of a shared CQ; pending keeps
	// an event that fired between Arm and Wait from being lost.
	evMu    sync.Mutex
	ev      chan struct{}
	pending bool
	gone    bool
	err     syscall.Errno
}

var _ fabric.CQ = (*cq)(nil)

func (d *device) CreateCQ(cqe int) (fabric.CQ, error) {
	if cqe < 1 {
		return nil, verr("ibv_create_cq", syscall.EINVAL, fmt.Sprintf("cqe %d", cqe))
	}
	if err := d.enter("ibv_create_cq"); err != nil {
		return nil, err
	}
	defer d.exit()
	c := &cq{dev: d, ev: make(chan struct{})}
	// Registered before ibv_create_cq so the id the kernel will hand back
	// in cq_context is always one the event goroutine can resolve.
	d.cqMu.Lock()
	d.nextID++
	c.id = d.nextID
	d.cqs[c.id] = c
	d.cqMu.Unlock()
	p, err := C.rp_create_cq(d.ctx, C.int(cqe), C.uintptr_t(c.id), d.ch)
	if p == nil {
		d.cqMu.Lock()
		delete(d.cqs, c.id)
		d.cqMu.Unlock()
		return nil, verr("ibv_create_cq", errnoOf(err, syscall.ENOMEM), fmt.Sprintf("cqe %d", cqe))
	}
	c.cq = p
	c.buf = (*C.rp_wc)(C.malloc(C.size_t(C.RP_POLL_MAX) * C.size_t(unsafe.Sizeof(C.rp_wc{}))))
	return c, nil
}

func (c *cq) signal() {
	c.evMu.Lock()
	if !c.gone {
		c.pending = true
		close(c.ev)
		c.ev = make(chan struct{})
	}
	c.evMu.Unlock()
}

func (c *cq) broken(errno syscall.Errno) {
	if errno == 0 {
		errno = syscall.EIO
	}
	c.evMu.Lock()
	if !c.gone {
		c.gone = true
		c.err = errno
		close(c.ev)
	}
	c.evMu.Unlock()
}

func (c *cq) Poll(wc []fabric.WC) (int, error) { return c.SpinPoll(wc, 0) }

// SpinPoll is Poll repeated in C until it finds completions or d has
// passed (fabric.Spinner); with d = 0 it polls once.
func (c *cq) SpinPoll(wc []fabric.WC, d time.Duration) (int, error) {
	return c.spin(wc, d)
}

var _ fabric.SpinCounter = (*cq)(nil)

// Spun is the time spent polling this CQ in vain (fabric.SpinCounter):
// its spins' own by the C clock, from each call's start to the poll that
// found completions or to its end, and what loops over them added.
func (c *cq) Spun() time.Duration { return time.Duration(c.spun.Load()) }

// AddSpun adds a polling loop's own vain time (fabric.SpinCounter).
func (c *cq) AddSpun(d time.Duration) { c.spun.Add(int64(d)) }

// nanotime is the runtime's monotonic clock: CLOCK_MONOTONIC in
// nanoseconds on Linux, rp_clock's.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// spin polls (d = 0: once) or spins up to d (rp_spin).
func (c *cq) spin(wc []fabric.WC, d time.Duration) (int, error) {
	if len(wc) == 0 {
		return 0, nil
	}
	c.life.RLock()
	defer c.life.RUnlock()
	if c.dead {
		return 0, verr("ibv_poll_cq", syscall.EINVAL, "CQ destroyed")
	}
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	room := C.int(min(len(wc), C.RP_POLL_MAX))
	var n int
	if d <= 0 {
		n = int(C.rp_poll(c.cq, c.buf, room))
	} else {
		var idle C.int64_t
		n = int(C.rp_spin(c.cq, c.buf, room, C.int64_t(d), &idle))
		c.spun.Add(int64(idle))
	}
	if n < 0 {
		return 0, verr("ibv_poll_cq", syscall.EIO, fmt.Sprintf("returned %d", n))
	}
	for i, w := range unsafe.Slice(c.buf, n) {
		wc[i] = wcOf(w)
	}
	return n, nil
}

// wcOf is the fabric's view of a completion.
func wcOf(w C.rp_wc) fabric.WC {
	// For an error completion the opcode is not defined by the spec;
	// rxe reports the work request's kind, which is the best we have.
	op := fabric.WCSend
	switch {
	case w.opcode&C.IBV_WC_RECV != 0:
		op = fabric.WCRecv
	case w.opcode == C.IBV_WC_RDMA_WRITE:
		op = fabric.WCRDMAWrite
	case w.opcode == C.IBV_WC_RDMA_READ:
		op = fabric.WCRDMARead
	}
	return fabric.WC{
		WRID:    uint64(w.wr_id),
		Status:  fabric.WCStatus(w.status),
		Opcode:  op,
		ByteLen: int(w.byte_len),
		QPN:     uint32(w.qp_num),
		SrcQP:   uint32(w.src_qp),
		GRH:     w.wc_flags&C.IBV_WC_GRH != 0,
	}
}

func (c *cq) Arm() error {
	c.life.RLock()
	defer c.life.RUnlock()
	if c.dead {
		return verr("ibv_req_notify_cq", syscall.EINVAL, "CQ destroyed")
	}
	if r := C.rp_req_notify(c.cq); r != 0 {
		return verr("ibv_req_notify_cq", syscall.Errno(r), "")
	}
	return nil
}

func (c *cq) Wait(ctx context.Context) error {
	c.evMu.Lock()
	if c.pending {
		c.pending = false
		c.evMu.Unlock()
		return nil
	}
	if c.gone {
		err := c.err
		c.evMu.Unlock()
		return verr("ibv_get_cq_event", err, "completion channel closed")
	}
	ev := c.ev
	c.evMu.Unlock()
	select {
	case <-ev:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *cq) Destroy() error {
	c.life.Lock()
	defer c.life.Unlock()
	if c.dead {
		return verr("ibv_destroy_cq", syscall.EINVAL, "already destroyed")
	}
	// Blocks until every event the kernel reported for this CQ is acked;
	// the event goroutine acks in C before it touches any Go lock.
	if r := C.ibv_destroy_cq(c.cq); r != 0 {
		return verr("ibv_destroy_cq", syscall.Errno(r), "")
	}
	c.dead = true
	C.free(unsafe.Pointer(c.buf))
	c.buf = nil
	d := c.dev
	d.cqMu.Lock()
	delete(d.cqs, c.id)
	d.cqMu.Unlock()
	c.broken(syscall.EINVAL) // waiters wake and find the CQ gone
	return nil
}
