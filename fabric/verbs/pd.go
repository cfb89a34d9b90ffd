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

// pd is a protection domain; it tracks its QPs and MRs so Device.Close can
// release them in order.
type pd struct {
	dev *device
	pd  *C.struct_ibv_pd

	// life is held shared across the C calls that use the PD, so clients
	// register MRs and create QPs in parallel, and exclusively by Dealloc.
	life sync.RWMutex
	dead bool

	mu   sync.Mutex
	qps  map[*qp]struct{}
	mrs  map[*mr]struct{}
	srqs map[*srq]struct{}
	ahs  map[*ah]struct{}
}

var _ fabric.PD = (*pd)(nil)

func (d *device) AllocPD() (fabric.PD, error) {
	if err := d.enter("ibv_alloc_pd"); err != nil {
		return nil, err
	}
	defer d.exit()
	p, err := C.ibv_alloc_pd(d.ctx)
	if p == nil {
		return nil, verr("ibv_alloc_pd", errnoOf(err, syscall.ENOMEM), "")
	}
	x := &pd{dev: d, pd: p, qps: make(map[*qp]struct{}), mrs: make(map[*mr]struct{}), srqs: make(map[*srq]struct{}), ahs: make(map[*ah]struct{})}
	d.mu.Lock()
	d.pds[x] = struct{}{}
	d.mu.Unlock()
	return x, nil
}

func (x *pd) Dealloc() error {
	x.life.Lock()
	defer x.life.Unlock()
	if x.dead {
		return verr("ibv_dealloc_pd", syscall.EINVAL, "already deallocated")
	}
	x.mu.Lock()
	nq, nm, ns, na := len(x.qps), len(x.mrs), len(x.srqs), len(x.ahs)
	x.mu.Unlock()
	if nq > 0 || nm > 0 || ns > 0 || na > 0 {
		return verr("ibv_dealloc_pd", syscall.EBUSY, fmt.Sprintf("%d QPs, %d MRs, %d SRQs and %d AHs still use it", nq, nm, ns, na))
	}
	if r := C.ibv_dealloc_pd(x.pd); r != 0 {
		return verr("ibv_dealloc_pd", syscall.Errno(r), "")
	}
	x.dead = true
	d := x.dev
	d.mu.Lock()
	delete(d.pds, x)
	d.mu.Unlock()
	return nil
}
