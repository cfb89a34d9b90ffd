//go:build verbs && cgo

package verbs

/*
#cgo LDFLAGS: -libverbs
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// Provider opens libibverbs devices.
type Provider struct{}

var _ fabric.Provider = (*Provider)(nil)

// New returns the libibverbs provider.
func New() fabric.Provider { return &Provider{} }

// Supported reports whether this binary was built with libibverbs.
func Supported() bool { return true }

// Name is the backend name recorded in results.
func (*Provider) Name() string { return "verbs" }

// Simulated is false: these are real verbs on a real (or Soft-RoCE) device.
func (*Provider) Simulated() bool { return false }

// Devices lists the devices libibverbs sees (ibv_get_device_list).
func (*Provider) Devices() ([]string, error) {
	var n C.int
	list, err := C.ibv_get_device_list(&n)
	if list == nil {
		return nil, deviceListError(errnoOf(err, syscall.ENODEV))
	}
	defer C.ibv_free_device_list(list)
	names := make([]string, 0, int(n))
	for _, d := range unsafe.Slice(list, int(n)) {
		names = append(names, C.GoString(C.ibv_get_device_name(d)))
	}
	return names, nil
}

// Open opens the device context, checks that the port is ACTIVE, resolves
// the GID index, reads the caps and starts the device's event goroutine.
func (p *Provider) Open(ctx context.Context, cfg fabric.DeviceConfig) (fabric.Device, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	port := cfg.Port
	if port == 0 {
		port = 1
	}
	if port < 1 || port > 255 {
		return nil, verr("ibv_query_port", syscall.EINVAL, fmt.Sprintf("port %d", port))
	}
	vctx, name, err := openByName(cfg.Name)
	if err != nil {
		return nil, err
	}
	d, err := openContext(vctx, name, port, cfg.GIDIndex, false)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// openContext makes a device of an open context. A borrowed context is
// another library's (librdmacm's, cm.go): Close leaves it open, and a
// failure here too.
func openContext(vctx *C.struct_ibv_context, name string, port, gidIndex int, borrowed bool) (*device, error) {
	d := &device{
		slots:    make(chan struct{}, 2*runtime.GOMAXPROCS(0)),
		name:     name,
		ctx:      vctx,
		portNum:  port,
		cqs:      make(map[uintptr]*cq),
		pds:      make(map[*pd]struct{}),
		done:     make(chan struct{}),
		borrowed: borrowed,
	}
	fail := func(err error) (*device, error) {
		if d.ch != nil {
			C.ibv_destroy_comp_channel(d.ch)
		}
		if !borrowed {
			C.ibv_close_device(vctx)
		}
		return nil, err
	}

	var attr C.struct_ibv_device_attr
	if r := C.ibv_query_device(vctx, &attr); r != 0 {
		return fail(verr("ibv_query_device", syscall.Errno(r), name))
	}
	d.caps = capsOf(&attr)
	if port > int(attr.phys_port_cnt) {
		return fail(verr("ibv_query_port", syscall.EINVAL,
			fmt.Sprintf("%s has %d port(s), asked for port %d", name, int(attr.phys_port_cnt), port)))
	}

	var pa C.struct_ibv_port_attr
	if r := C.rp_query_port(vctx, C.uint8_t(port), &pa); r != 0 {
		return fail(verr("ibv_query_port", syscall.Errno(r), fmt.Sprintf("%s port %d", name, port)))
	}
	state := portState(int(pa.state))
	if pa.state != C.IBV_PORT_ACTIVE {
		return fail(fmt.Errorf("%s port %d is %s, not ACTIVE: the link is not up (see `rdma link show`)", name, port, state))
	}
	d.port = fabric.PortInfo{
		Port:      port,
		State:     state,
		LID:       uint16(pa.lid),
		ActiveMTU: fabric.MTU(pa.active_mtu),
		LinkLayer: linkLayer(int(pa.link_layer)),
	}
	idx, gid, err := d.resolveGID(gidIndex, int(pa.gid_tbl_len))
	if err != nil {
		return fail(err)
	}
	d.port.GIDIndex, d.port.GID = idx, gid

	ch, err := C.ibv_create_comp_channel(vctx)
	if ch == nil {
		return fail(verr("ibv_create_comp_channel", errnoOf(err, syscall.EIO), name))
	}
	d.ch = ch
	fd, err := C.rp_channel_fd(ch)
	if fd < 0 {
		return fail(verr("fcntl(comp channel)", errnoOf(err, syscall.EIO), name))
	}
	// A non-blocking fd makes os.NewFile register it with the netpoller.
	d.evf = os.NewFile(uintptr(fd), "ibv_comp_channel:"+name)
	rc, err := d.evf.SyscallConn()
	if err != nil {
		d.evf.Close()
		return fail(fmt.Errorf("%s: completion channel: %w", name, err))
	}
	d.evIDs = (*C.uintptr_t)(C.malloc(C.size_t(evBatch) * C.size_t(unsafe.Sizeof(C.uintptr_t(0)))))
	go d.events(rc)
	return d, nil
}

func openByName(want string) (*C.struct_ibv_context, string, error) {
	var n C.int
	list, err := C.ibv_get_device_list(&n)
	if list == nil {
		return nil, "", deviceListError(errnoOf(err, syscall.ENODEV))
	}
	defer C.ibv_free_device_list(list)
	devs := unsafe.Slice(list, int(n))
	var have []string
	for _, dev := range devs {
		name := C.GoString(C.ibv_get_device_name(dev))
		have = append(have, name)
		if want != "" && name != want {
			continue
		}
		vctx, err := C.ibv_open_device(dev)
		if vctx == nil {
			return nil, "", verr("ibv_open_device", errnoOf(err, syscall.EIO), name)
		}
		return vctx, name, nil
	}
	if len(have) == 0 {
		return nil, "", verr("ibv_get_device_list", syscall.ENODEV, "no RDMA devices (is a driver such as rdma_rxe loaded and a link added?)")
	}
	return nil, "", verr("ibv_open_device", syscall.ENODEV, fmt.Sprintf("no device %q (have %s)", want, strings.Join(have, ", ")))
}

func capsOf(a *C.struct_ibv_device_attr) fabric.Caps {
	return fabric.Caps{
		MaxQP:      int(a.max_qp),
		MaxQPWR:    int(a.max_qp_wr),
		MaxSGE:     int(a.max_sge),
		MaxCQ:      int(a.max_cq),
		MaxCQE:     int(a.max_cqe),
		MaxMR:      int(a.max_mr),
		MaxMRSize:  uint64(a.max_mr_size),
		MaxPD:      int(a.max_pd),
		MaxSRQ:     int(a.max_srq),
		MaxSRQWR:   int(a.max_srq_wr),
		MaxAH:      int(a.max_ah),
		FWVersion:  C.GoString(&a.fw_ver[0]),
		VendorID:   uint32(a.vendor_id),
		VendorPart: uint32(a.vendor_part_id),
	}
}

// errnoOf is the errno a cgo call left, or def when the call failed without
// setting one.
func errnoOf(err error, def syscall.Errno) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) && e != 0 {
		return e
	}
	return def
}

func verr(verb string, errno syscall.Errno, detail string) error {
	return &fabric.VerbError{Verb: verb, Errno: errno, Detail: detail}
}

// portState names enum ibv_port_state as ibv_devinfo prints it.
func portState(s int) string {
	switch s {
	case 0:
		return "NOP"
	case 1:
		return "DOWN"
	case 2:
		return "INIT"
	case 3:
		return "ARMED"
	case 4:
		return "ACTIVE"
	case 5:
		return "ACTIVE_DEFER"
	}
	return "UNKNOWN"
}

// linkLayer names the port's link layer; IBV_LINK_LAYER_UNSPECIFIED is what
// older InfiniBand drivers report.
func linkLayer(l int) string {
	if l == 2 {
		return "Ethernet"
	}
	return "InfiniBand"
}
