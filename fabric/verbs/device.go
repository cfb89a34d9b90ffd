//go:build verbs && cgo

package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// device is an open context with one completion channel shared by all its
// CQs and one goroutine that turns channel events into CQ wake-ups.
type device struct {
	name    string
	ctx     *C.struct_ibv_context
	ch      *C.struct_ibv_comp_channel
	portNum int
	caps    fabric.Caps
	port    fabric.PortInfo

	evf   *os.File
	evIDs *C.uintptr_t // C buffer, only touched by the event goroutine
	done  chan struct{}

	cqMu   sync.RWMutex
	cqs    map[uintptr]*cq
	nextID uintptr

	// life lets creators run concurrently while Close waits them out: a
	// resource created after Close collected its leftovers would leak and
	// keep the completion channel busy.
	life   sync.RWMutex
	closed bool

	mu  sync.Mutex
	pds map[*pd]struct{}

	slots chan struct{} // see enter
	// borrowed: the context is librdmacm's (cm.go), which closes it.
	borrowed bool
}

var _ fabric.Device = (*device)(nil)

func (d *device) Name() string          { return d.name }
func (d *device) Caps() fabric.Caps     { return d.caps }
func (d *device) Port() fabric.PortInfo { return d.port }

// enter admits one resource-creating verb unless the device is closed;
// exit ends it. At most len(d.slots) run at once: each blocks an OS thread
// inside the kernel, and thousands of clients creating QPs together would
// otherwise spawn thousands of threads that only contend for the same CPUs
// and device locks.
func (d *device) enter(verb string) error {
	d.life.RLock()
	if d.closed {
		d.life.RUnlock()
		return verr(verb, syscall.EINVAL, "device closed")
	}
	d.slots <- struct{}{}
	return nil
}

func (d *device) exit() {
	<-d.slots
	d.life.RUnlock()
}

// Close destroys what the caller left (QPs, SRQs, MRs, CQs, PDs, in the
// order verbs requires), stops the event goroutine and closes the context.
func (d *device) Close() error {
	d.life.Lock()
	if d.closed {
		d.life.Unlock()
		return nil
	}
	d.closed = true
	d.life.Unlock()
	d.mu.Lock()
	pds := make([]*pd, 0, len(d.pds))
	for x := range d.pds {
		pds = append(pds, x)
	}
	d.mu.Unlock()

	var errs []error
	var qps []*qp
	var srqs []*srq
	var mrs []*mr
	var ahs []*ah
	for _, x := range pds {
		x.mu.Lock()
		for h := range x.ahs {
			ahs = append(ahs, h)
		}
		for q := range x.qps {
			qps = append(qps, q)
		}
		for s := range x.srqs {
			srqs = append(srqs, s)
		}
		for m := range x.mrs {
			mrs = append(mrs, m)
		}
		x.mu.Unlock()
	}
	// QPs first: an SRQ (of any PD) is busy while a QP uses it.
	for _, q := range qps {
		errs = append(errs, q.Destroy())
	}
	for _, s := range srqs {
		errs = append(errs, s.Destroy())
	}
	for _, h := range ahs {
		errs = append(errs, h.Destroy())
	}
	for _, m := range mrs {
		errs = append(errs, m.Dereg())
	}
	d.cqMu.RLock()
	cqs := make([]*cq, 0, len(d.cqs))
	for _, c := range d.cqs {
		cqs = append(cqs, c)
	}
	d.cqMu.RUnlock()
	for _, c := range cqs {
		errs = append(errs, c.Destroy())
	}
	for _, x := range pds {
		errs = append(errs, x.Dealloc())
	}

	d.evf.Close()
	<-d.done
	C.free(unsafe.Pointer(d.evIDs))
	if r := C.ibv_destroy_comp_channel(d.ch); r != 0 {
		errs = append(errs, verr("ibv_destroy_comp_channel", syscall.Errno(r), d.name))
	}
	if d.borrowed {
		return errors.Join(errs...)
	}
	if r, err := C.ibv_close_device(d.ctx); r != 0 {
		errs = append(errs, verr("ibv_close_device", errnoOf(err, syscall.EIO), d.name))
	}
	return errors.Join(errs...)
}
