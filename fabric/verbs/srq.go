//go:build verbs && cgo

package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"math"
	"sync"
	"syscall"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// CreateSRQ creates a shared receive queue (ibv_create_srq). The device
// checks max_wr and max_sge against max_srq_wr and its max_srq_sge (rxe:
// EINVAL); the queue it maps may be deeper than asked.
func (x *pd) CreateSRQ(maxWR, maxSGE int) (fabric.SRQ, error) {
	const verb = "ibv_create_srq"
	if maxWR < 0 || maxSGE < 0 || maxWR > math.MaxUint32 || maxSGE > math.MaxUint32 {
		return nil, verr(verb, syscall.EINVAL, fmt.Sprintf("max_wr %d, max_sge %d", maxWR, maxSGE))
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
	p, err := C.rp_create_srq(x.pd, C.uint32_t(maxWR), C.uint32_t(maxSGE))
	if p == nil {
		return nil, verr(verb, errnoOf(err, syscall.ENOMEM), fmt.Sprintf("max_wr %d, max_sge %d", maxWR, maxSGE))
	}
	s := &srq{pd: x, srq: p}
	x.mu.Lock()
	x.srqs[s] = struct{}{}
	x.mu.Unlock()
	return s, nil
}

// srq is a shared receive queue. life keeps Destroy from freeing it under
// a concurrent post or a QP being created on it.
type srq struct {
	pd   *pd
	life sync.RWMutex
	srq  *C.struct_ibv_srq
	dead bool
}

var _ fabric.SRQ = (*srq)(nil)

// PostRecv posts one receive (ibv_post_srq_recv, thread-safe in
// rdma-core's providers).
func (s *srq) PostRecv(wrID uint64, m fabric.MR, off, length int) error {
	const verb = "ibv_post_srq_recv"
	x, err := sgeMR(verb, m, off, length)
	if err != nil {
		return err
	}
	s.life.RLock()
	defer s.life.RUnlock()
	if s.dead {
		return verr(verb, syscall.EINVAL, "SRQ destroyed")
	}
	r := C.rp_post_srq_recv(s.srq, C.uint64_t(wrID), C.uint64_t(x.addr+uintptr(off)), C.uint32_t(length), C.uint32_t(x.lkey))
	if r != 0 {
		return verr(verb, syscall.Errno(r), "")
	}
	return nil
}

// Destroy releases the SRQ (ibv_destroy_srq). While a QP uses it the
// kernel refuses with EBUSY and the SRQ stays usable.
func (s *srq) Destroy() error {
	const verb = "ibv_destroy_srq"
	s.life.Lock()
	defer s.life.Unlock()
	if s.dead {
		return verr(verb, syscall.EINVAL, "already destroyed")
	}
	if r := C.rp_destroy_srq(s.srq); r != 0 {
		return verr(verb, syscall.Errno(r), "")
	}
	s.dead = true
	x := s.pd
	x.mu.Lock()
	delete(x.srqs, s)
	x.mu.Unlock()
	return nil
}
