//go:build verbs && cgo

package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"syscall"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// ah is an address handle. life keeps Destroy from freeing it under a
// concurrent send that names it.
type ah struct {
	pd   *pd
	life sync.RWMutex
	ah   *C.struct_ibv_ah
	dead bool
}

func (x *pd) CreateAH(a fabric.AHAttr) (fabric.AH, error) {
	const verb = "ibv_create_ah"
	port := a.Port
	if port == 0 {
		port = x.dev.portNum
	}
	var g C.rp_gid
	for i, b := range a.DGID {
		g.raw[i] = C.uint8_t(b)
	}
	hop := a.HopLimit
	if hop == 0 {
		hop = 64
	}
	if err := x.dev.enter(verb); err != nil {
		return nil, err
	}
	defer x.dev.exit()
	x.life.RLock()
	defer x.life.RUnlock()
	if x.dead {
		return nil, verr(verb, syscall.EINVAL, "PD deallocated")
	}
	p, cerr := C.rp_create_ah(x.pd, C.uint16_t(a.DLID), g, C.int(a.GIDIndex), C.int(hop), C.int(port))
	if p == nil {
		return nil, verr(verb, errnoOf(cerr, syscall.ENOMEM), "")
	}
	h := &ah{pd: x, ah: p}
	x.mu.Lock()
	x.ahs[h] = struct{}{}
	x.mu.Unlock()
	return h, nil
}

func (h *ah) Destroy() error {
	h.life.Lock()
	defer h.life.Unlock()
	if h.dead {
		return verr("ibv_destroy_ah", syscall.EINVAL, "already destroyed")
	}
	if r := C.ibv_destroy_ah(h.ah); r != 0 {
		return verr("ibv_destroy_ah", syscall.Errno(r), "")
	}
	h.dead = true
	x := h.pd
	x.mu.Lock()
	delete(x.ahs, h)
	x.mu.Unlock()
	return nil
}

func (q *qp) PostSendUD(wrID uint64, m fabric.MR, off, length int, a fabric.AH, qpn, qkey uint32) error {
	const verb = "ibv_post_send"
	if !q.ud {
		return verr(verb, syscall.EINVAL, "an RC QP sends to its connected peer (PostSend)")
	}
	h, ok := a.(*ah)
	if !ok || h == nil {
		return verr(verb, syscall.EINVAL, "the address handle must be a verbs AH")
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
	h.life.RLock()
	defer h.life.RUnlock()
	if h.dead {
		return verr(verb, syscall.EINVAL, "address handle destroyed")
	}
	r := C.rp_post_send_ud(q.qp, C.uint64_t(wrID), C.uint64_t(x.addr+uintptr(off)), C.uint32_t(length),
		C.uint32_t(x.lkey), h.ah, C.uint32_t(qpn), C.uint32_t(qkey))
	if r != 0 {
		return verr(verb, syscall.Errno(r), fmt.Sprintf("QP %d to QP %d", q.qpn, qpn))
	}
	return nil
}
