//go:build verbs && cgo

package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// mr is a registered C buffer.
type mr struct {
	pd   *pd
	mr   *C.struct_ibv_mr
	addr uintptr // C memory: never moved or collected
	size int
	buf  []byte
	lkey uint32
	rkey uint32
	mu   sync.Mutex // serialises Dereg
	dead atomic.Bool
}

var _ fabric.MR = (*mr)(nil)

func (m *mr) Buf() []byte  { return m.buf }
func (m *mr) LKey() uint32 { return m.lkey }
func (m *mr) Addr() uint64 { return uint64(m.addr) }
func (m *mr) RKey() uint32 { return m.rkey }

func (x *pd) RegMR(size int, access fabric.Access) (fabric.MR, error) {
	if size <= 0 {
		return nil, verr("ibv_reg_mr", syscall.EINVAL, fmt.Sprintf("size %d", size))
	}
	if err := x.dev.enter("ibv_reg_mr"); err != nil {
		return nil, err
	}
	defer x.dev.exit()
	x.life.RLock()
	defer x.life.RUnlock()
	if x.dead {
		return nil, verr("ibv_reg_mr", syscall.EINVAL, "PD deallocated")
	}
	p, err := C.rp_reg_mr(x.pd, C.size_t(size), C.int(access))
	if p == nil {
		return nil, verr("ibv_reg_mr", errnoOf(err, syscall.ENOMEM), fmt.Sprintf("%d bytes", size))
	}
	m := &mr{
		pd:   x,
		mr:   p,
		addr: uintptr(p.addr),
		size: size,
		lkey: uint32(p.lkey),
		rkey: uint32(p.rkey),
	}
	m.buf = unsafe.Slice((*byte)(p.addr), size)
	x.mu.Lock()
	x.mrs[m] = struct{}{}
	x.mu.Unlock()
	return m, nil
}

func (m *mr) Dereg() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead.Load() {
		return verr("ibv_dereg_mr", syscall.EINVAL, "already deregistered")
	}
	if r := C.rp_dereg_mr(m.mr); r != 0 {
		return verr("ibv_dereg_mr", syscall.Errno(r), "")
	}
	m.dead.Store(true)
	m.buf = nil
	x := m.pd
	x.mu.Lock()
	delete(x.mrs, m)
	x.mu.Unlock()
	return nil
}

// sgeMR checks that [off, off+length) lies in a live verbs MR.
func sgeMR(verb string, m fabric.MR, off, length int) (*mr, error) {
	x, ok := m.(*mr)
	if !ok || x == nil {
		return nil, verr(verb, syscall.EINVAL, "not a verbs MR")
	}
	if off < 0 || length < 0 || off+length > x.size {
		return nil, verr(verb, syscall.EINVAL, fmt.Sprintf("[%d:%d] outside the %d-byte MR", off, off+length, x.size))
	}
	if x.dead.Load() {
		return nil, verr(verb, syscall.EINVAL, "MR deregistered")
	}
	return x, nil
}
