//go:build verbs && cgo

package verbs

/*
#include "shim.h"
#include "cm.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// qp is an RC queue pair. life keeps Destroy from freeing the QP under a
// concurrent post or modify.
type qp struct {
	pd   *pd
	qpn  uint32
	srq  *srq // nil: the QP has its own receive queue
	ud   bool
	life sync.RWMutex
	qp   *C.struct_ibv_qp
	dead bool
	last atomic.Int32 // state after the last successful modify
	// cmid is the rdma_cm id whose QP this is (cm.go), nil for one of
	// ibv_create_qp.
	cmid *C.struct_rdma_cm_id
}

var _ fabric.QP = (*qp)(nil)

func (x *pd) CreateQP(a fabric.QPInitAttr) (fabric.QP, error) {
	q, err := x.createQP(a, "ibv_create_qp", func(scq, rcq *C.struct_ibv_cq, srq *C.struct_ibv_srq) (*C.struct_ibv_qp, syscall.Errno) {
		p, err := C.rp_create_qp(x.pd, scq, rcq, srq, C.uint32_t(a.MaxSendWR), C.uint32_t(a.MaxRecvWR),
			C.uint32_t(a.MaxSendSGE), C.uint32_t(a.MaxRecvSGE), C.int(a.Type))
		return p, errnoOf(err, syscall.ENOMEM)
	})
	if err != nil {
		return nil, err
	}
	return q, nil
}

// createQP checks a's objects and holds them while create makes the QP
// on them (ibv_create_qp, or rdma_create_qp: cm.go).
func (x *pd) createQP(a fabric.QPInitAttr, verb string,
	create func(scq, rcq *C.struct_ibv_cq, srq *C.struct_ibv_srq) (*C.struct_ibv_qp, syscall.Errno)) (*qp, error) {
	scq, ok1 := a.SendCQ.(*cq)
	rcq, ok2 := a.RecvCQ.(*cq)
	if !ok1 || !ok2 || scq == nil || rcq == nil {
		return nil, verr("ibv_create_qp", syscall.EINVAL, "send and receive CQs must be verbs CQs")
	}
	var sq *srq
	if a.SRQ != nil {
		var ok bool
		if sq, ok = a.SRQ.(*srq); !ok || sq == nil {
			return nil, verr("ibv_create_qp", syscall.EINVAL, "the SRQ must be a verbs SRQ")
		}
	}
	if err := x.dev.enter("ibv_create_qp"); err != nil {
		return nil, err
	}
	defer x.dev.exit()
	x.life.RLock()
	defer x.life.RUnlock()
	if x.dead {
		return nil, verr("ibv_create_qp", syscall.EINVAL, "PD deallocated")
	}
	// The CQs are held across the call so neither is destroyed under it;
	// afterwards the kernel itself refuses (EBUSY) while the QP lives.
	unlock, err := holdCQs(scq, rcq)
	if err != nil {
		return nil, err
	}
	// The SRQ likewise: the kernel refuses to destroy it (EBUSY) once the
	// QP exists, but not while the QP is being created.
	var csrq *C.struct_ibv_srq
	if sq != nil {
		sq.life.RLock()
		if sq.dead {
			sq.life.RUnlock()
			unlock()
			return nil, verr("ibv_create_qp", syscall.EINVAL, "SRQ destroyed")
		}
		csrq = sq.srq
	}
	p, errno := create(scq.cq, rcq.cq, csrq)
	if sq != nil {
		sq.life.RUnlock()
	}
	unlock()
	if p == nil {
		return nil, verr(verb, errno, "")
	}
	q := &qp{pd: x, qp: p, qpn: uint32(p.qp_num), srq: sq, ud: a.Type == fabric.QPTypeUD}
	x.mu.Lock()
	x.qps[q] = struct{}{}
	x.mu.Unlock()
	return q, nil
}

// holdCQs read-locks the lifetimes of one or two CQs in id order, so QPs
// created over the same CQs in swapped roles while one is being destroyed
// cannot deadlock.
func holdCQs(a, b *cq) (func(), error) {
	if a.id > b.id {
		a, b = b, a
	}
	a.life.RLock()
	if b != a {
		b.life.RLock()
	}
	unlock := func() {
		if b != a {
			b.life.RUnlock()
		}
		a.life.RUnlock()
	}
	if a.dead || b.dead {
		unlock()
		return nil, verr("ibv_create_qp", syscall.EINVAL, "CQ destroyed")
	}
	return unlock, nil
}

func (q *qp) QPN() uint32 { return q.qpn }

// State asks the device, since a transport error moves an RTS QP to ERR
// without any call on our side.
func (q *qp) State() fabric.QPState {
	q.life.RLock()
	defer q.life.RUnlock()
	if q.dead {
		return fabric.QPSReset
	}
	if s := C.rp_qp_state(q.qp); s >= 0 {
		return fabric.QPState(s)
	}
	return fabric.QPState(q.last.Load())
}

func (q *qp) modify(verb string, to fabric.QPState, f func() C.int) error {
	q.life.RLock()
	defer q.life.RUnlock()
	if q.dead {
		return verr(verb, syscall.EINVAL, "QP destroyed")
	}
	if r := f(); r != 0 {
		return verr(verb, syscall.Errno(r), fmt.Sprintf("QP %d", q.qpn))
	}
	q.last.Store(int32(to))
	return nil
}

func (q *qp) ToInit(a fabric.InitAttr) error {
	port := a.Port
	if port == 0 {
		port = q.pd.dev.portNum
	}
	if q.ud {
		return q.modify("ibv_modify_qp(INIT)", fabric.QPSInit, func() C.int {
			return C.rp_to_init_ud(q.qp, C.int(a.PKeyIndex), C.int(port), C.uint32_t(a.QKey))
		})
	}
	return q.modify("ibv_modify_qp(INIT)", fabric.QPSInit, func() C.int {
		return C.rp_to_init(q.qp, C.int(a.PKeyIndex), C.int(port), C.int(a.Access))
	})
}

func (q *qp) ToRTR(a fabric.RTRAttr) error {
	if q.ud {
		return q.modify("ibv_modify_qp(RTR)", fabric.QPSRTR, func() C.int { return C.rp_to_rtr_ud(q.qp) })
	}
	port := a.Port
	if port == 0 {
		port = q.pd.dev.portNum
	}
	var g C.rp_gid
	for i, b := range a.DGID {
		g.raw[i] = C.uint8_t(b)
	}
	hop := a.HopLimit
	if hop == 0 {
		hop = 64 // 0 would drop the packet at the first router
	}
	return q.modify("ibv_modify_qp(RTR)", fabric.QPSRTR, func() C.int {
		return C.rp_to_rtr(q.qp, C.int(a.PathMTU), C.uint32_t(a.DestQPN), C.uint32_t(a.RQPSN),
			C.int(a.MaxDestRdAtomic), C.int(a.MinRNRTimer), C.uint16_t(a.DLID), g,
			C.int(a.GIDIndex), C.int(hop), C.int(port))
	})
}

func (q *qp) ToRTS(a fabric.RTSAttr) error {
	if q.ud {
		return q.modify("ibv_modify_qp(RTS)", fabric.QPSRTS, func() C.int { return C.rp_to_rts_ud(q.qp, C.uint32_t(a.SQPSN)) })
	}
	return q.modify("ibv_modify_qp(RTS)", fabric.QPSRTS, func() C.int {
		return C.rp_to_rts(q.qp, C.uint32_t(a.SQPSN), C.int(a.Timeout), C.int(a.RetryCnt),
			C.int(a.RNRRetry), C.int(a.MaxRdAtomic))
	})
}

func (q *qp) PostSend(wrID uint64, m fabric.MR, off, length int) error {
	return q.post("ibv_post_send", wrID, m, off, length, false)
}

func (q *qp) PostRecv(wrID uint64, m fabric.MR, off, length int) error {
	return q.post("ibv_post_recv", wrID, m, off, length, true)
}

func (q *qp) post(verb string, wrID uint64, m fabric.MR, off, length int, recv bool) error {
	if !recv && q.ud {
		// Without an address handle the provider would read a NULL one.
		return verr(verb, syscall.EINVAL, "a UD QP sends datagrams only, each to a destination (PostSendUD)")
	}
	if recv && q.srq != nil {
		// librxe answers EINVAL itself (the QP's rq.queue is NULL), but
		// providers differ (mlx5 reports a full queue, ENOMEM): say it
		// the same way everywhere.
		return verr(verb, syscall.EINVAL, "QP takes its receives from an SRQ: it has no receive queue")
	}
	return q.postRaw(verb, wrID, m, off, length, recv)
}

func (q *qp) PostWrite(wrID uint64, m fabric.MR, off, length int, raddr uint64, rkey uint32) error {
	return q.postRDMA(false, wrID, m, off, length, raddr, rkey)
}

func (q *qp) PostRead(wrID uint64, m fabric.MR, off, length int, raddr uint64, rkey uint32) error {
	return q.postRDMA(true, wrID, m, off, length, raddr, rkey)
}

// postRDMA posts an RDMA WRITE or READ; the remote address and rkey are
// the peer's to check (a bad one completes with IBV_WC_REM_ACCESS_ERR).
func (q *qp) postRDMA(read bool, wrID uint64, m fabric.MR, off, length int, raddr uint64, rkey uint32) error {
	const verb = "ibv_post_send"
	if q.ud {
		return verr(verb, syscall.EINVAL, "a UD QP has no RDMA WRITE or READ")
	}
	x, err := sgeMR(verb, m, off, length)
	if err != nil {
		return err
	}
	q.life.RLock()
	defer q.life.RUnlock()
	if q.dead {
		return verr(verb, syscall.EINVAL, "QP destroyed")
	}
	isRead := C.int(0)
	if read {
		isRead = 1
	}
	r := C.rp_post_rdma(q.qp, isRead, C.uint64_t(wrID), C.uint64_t(x.addr+uintptr(off)), C.uint32_t(length),
		C.uint32_t(x.lkey), C.uint64_t(raddr), C.uint32_t(rkey))
	if r != 0 {
		return verr(verb, syscall.Errno(r), "")
	}
	return nil
}

// postRaw posts without the fabric's own SRQ check, so tests can see what
// the provider itself answers.
func (q *qp) postRaw(verb string, wrID uint64, m fabric.MR, off, length int, recv bool) error {
	x, err := sgeMR(verb, m, off, length)
	if err != nil {
		return err
	}
	q.life.RLock()
	defer q.life.RUnlock()
	if q.dead {
		return verr(verb, syscall.EINVAL, "QP destroyed")
	}
	addr := C.uint64_t(x.addr + uintptr(off))
	var r C.int
	if recv {
		r = C.rp_post_recv(q.qp, C.uint64_t(wrID), addr, C.uint32_t(length), C.uint32_t(x.lkey))
	} else {
		r = C.rp_post_send(q.qp, C.uint64_t(wrID), addr, C.uint32_t(length), C.uint32_t(x.lkey))
	}
	if r != 0 {
		return verr(verb, syscall.Errno(r), "")
	}
	return nil
}

func (q *qp) Destroy() error {
	q.life.Lock()
	defer q.life.Unlock()
	if q.dead {
		return verr("ibv_destroy_qp", syscall.EINVAL, "already destroyed")
	}
	r := C.int(0)
	if q.cmid != nil {
		r = -C.rp_cm_destroy_qp(q.cmid)
	} else {
		r = C.ibv_destroy_qp(q.qp)
	}
	if r != 0 {
		return verr("ibv_destroy_qp", syscall.Errno(r), fmt.Sprintf("QP %d", q.qpn))
	}
	q.dead = true
	x := q.pd
	x.mu.Lock()
	delete(x.qps, q)
	x.mu.Unlock()
	return nil
}
