//go:build verbs && cgo

package verbs

/*
#cgo LDFLAGS: -lrdmacm
#include <stdlib.h>
#include "shim.h"
#include "cm.h"
*/
import "C"

import (
	"fmt"
	"net/netip"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// A connection's Device is librdmacm's own context of the device its
// address resolved to (id->verbs), opened as a device of this package
// and left open on Close (it is librdmacm's); the package doc says why
// its QP is librdmacm's to create and connect.

// OpenCM opens a connection manager's event channel.
func OpenCM() (fabric.CM, error) {
	var ch *C.struct_rdma_event_channel
	if e := C.rp_cm_channel(&ch); e != 0 {
		return nil, verr("rdma_create_event_channel", syscall.Errno(-e), "")
	}
	return &cm{ch: ch, devs: map[*C.struct_ibv_context]*device{}, ids: map[*C.struct_rdma_cm_id]*cmID{}}, nil
}

type cm struct {
	ch   *C.struct_rdma_event_channel
	devs map[*C.struct_ibv_context]*device
	ids  map[*C.struct_rdma_cm_id]*cmID
}

type cmID struct {
	cm *cm
	id *C.struct_rdma_cm_id
	qp *qp
}

var _ fabric.CM = (*cm)(nil)

func (c *cm) Start(addr netip.AddrPort, timeout time.Duration, ctx uint64) (fabric.CMID, error) {
	host, port := C.CString(addr.Addr().String()), C.CString(strconv.Itoa(int(addr.Port())))
	defer C.free(unsafe.Pointer(host))
	defer C.free(unsafe.Pointer(port))
	var id *C.struct_rdma_cm_id
	if e := C.rp_cm_start(c.ch, C.uint64_t(ctx), host, port, msOf(timeout), &id); e != 0 {
		return nil, verr("rdma_resolve_addr", syscall.Errno(-e), addr.String())
	}
	x := &cmID{cm: c, id: id}
	c.ids[id] = x
	return x, nil
}

// msOf is a CM timeout in milliseconds, at least 1.
func msOf(d time.Duration) C.int { return C.int(max(d/time.Millisecond, 1)) }

func (c *cm) Next(wait time.Duration) (fabric.CMEvent, bool, error) {
	for {
		var ev C.rp_cm_ev
		got := C.rp_cm_next(c.ch, C.int(max(wait, 0)/time.Millisecond), &ev)
		if got < 0 {
			return fabric.CMEvent{}, false, verr("rdma_get_cm_event", syscall.Errno(-got), "")
		}
		if got == 0 {
			return fabric.CMEvent{}, false, nil
		}
		id := c.ids[ev.id]
		if id == nil {
			continue // an id destroyed since: nothing of it is wanted
		}
		return fabric.CMEvent{ID: id, Ctx: uint64(ev.ctx), Type: fabric.CMEventType(ev.event), Status: int(ev.status),
			PrivateDataLen: int(ev.pdlen), RemoteQPN: uint32(ev.qpn)}, true, nil
	}
}

func (c *cm) Close() error {
	var first error
	for _, d := range c.devs {
		if err := d.Close(); err != nil && first == nil {
			first = err
		}
	}
	c.devs = nil
	C.rdma_destroy_event_channel(c.ch)
	return first
}

func (x *cmID) ResolveRoute(timeout time.Duration) error {
	if e := C.rp_cm_route(x.id, msOf(timeout)); e != 0 {
		return verr("rdma_resolve_route", syscall.Errno(-e), "")
	}
	return nil
}

func (x *cmID) Device() (fabric.Device, error) {
	ctx := x.id.verbs
	if ctx == nil {
		return nil, verr("rdma_cm", syscall.EINVAL, "the address is not resolved to a device yet")
	}
	if d := x.cm.devs[ctx]; d != nil {
		return d, nil
	}
	name := C.GoString(C.ibv_get_device_name(ctx.device))
	d, err := openContext(ctx, name, int(x.id.port_num), -1, true)
	if err != nil {
		return nil, err
	}
	x.cm.devs[ctx] = d
	return d, nil
}

func (x *cmID) CreateQP(p fabric.PD, a fabric.QPInitAttr) (fabric.QP, error) {
	xp, ok := p.(*pd)
	if !ok || xp == nil || xp.dev.ctx != x.id.verbs {
		return nil, verr("rdma_create_qp", syscall.EINVAL, "the PD must be of the id's device (CMID.Device)")
	}
	if a.Type != fabric.QPTypeRC || a.SRQ != nil {
		return nil, verr("rdma_create_qp", syscall.EINVAL, "rdma_cm connections are RC QPs with receive queues of their own")
	}
	q, err := xp.createQP(a, "rdma_create_qp", func(scq, rcq *C.struct_ibv_cq, _ *C.struct_ibv_srq) (*C.struct_ibv_qp, syscall.Errno) {
		if e := C.rp_cm_create_qp(x.id, xp.pd, scq, rcq, C.uint32_t(a.MaxSendWR), C.uint32_t(a.MaxRecvWR),
			C.uint32_t(a.MaxSendSGE), C.uint32_t(a.MaxRecvSGE)); e != 0 {
			return nil, syscall.Errno(-e)
		}
		return x.id.qp, 0
	})
	if err != nil {
		return nil, err
	}
	q.cmid = x.id
	q.last.Store(int32(fabric.QPSInit)) // rdma_create_qp moved it
	x.qp = q
	return q, nil
}

func (x *cmID) Connect(privateData []byte) error {
	if len(privateData) > fabric.MaxCMPrivateData {
		return verr("rdma_connect", syscall.EINVAL, fmt.Sprintf("%d bytes of private data, at most %d", len(privateData), fabric.MaxCMPrivateData))
	}
	var pd unsafe.Pointer
	if len(privateData) > 0 {
		pd = C.CBytes(privateData)
		defer C.free(pd)
	}
	if e := C.rp_cm_connect(x.id, pd, C.int(len(privateData))); e != 0 {
		return verr("rdma_connect", syscall.Errno(-e), "")
	}
	return nil
}

func (x *cmID) Disconnect() error {
	if e := C.rp_cm_disconnect(x.id); e != 0 {
		return verr("rdma_disconnect", syscall.Errno(-e), "")
	}
	return nil
}

func (x *cmID) Destroy() error {
	if x.id == nil {
		return verr("rdma_destroy_id", syscall.EINVAL, "already destroyed")
	}
	if x.qp != nil && x.id.qp != nil {
		if err := x.qp.Destroy(); err != nil {
			return err
		}
	}
	delete(x.cm.ids, x.id)
	e := C.rp_cm_destroy(x.id)
	x.id = nil
	if e != 0 {
		return verr("rdma_destroy_id", syscall.Errno(-e), "")
	}
	return nil
}
