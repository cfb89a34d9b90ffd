//go:build verbs && cgo

package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// gidTypeRoCEv2 is IBV_GID_TYPE_ROCE_V2.
const gidTypeRoCEv2 = C.IBV_GID_TYPE_ROCE_V2

// resolveGID returns the configured GID, or for index -1 the first RoCE v2
// GID that is IPv4-mapped: on rxe the link-local fe80:: entry at index 0
// is RoCE v1 and fails at RTR, while ::ffff:a.b.c.d routes over UDP/IPv4.
// Without such an entry (InfiniBand, IPv6-only) it falls back to index 0.
func (d *device) resolveGID(want, tblLen int) (int, fabric.GID, error) {
	if want >= 0 {
		if want >= tblLen {
			return 0, fabric.GID{}, verr("ibv_query_gid", syscall.EINVAL,
				fmt.Sprintf("GID index %d: %s port %d has %d entries", want, d.name, d.portNum, tblLen))
		}
		var g C.rp_gid
		if r := C.rp_query_gid_raw(d.ctx, C.uint8_t(d.portNum), C.int(want), &g); r != 0 {
			return 0, fabric.GID{}, verr("ibv_query_gid", syscall.Errno(r), fmt.Sprintf("GID index %d", want))
		}
		return want, gidOf(g), nil
	}
	for i := 0; i < tblLen; i++ {
		var g C.rp_gid
		var typ C.uint32_t
		r := C.rp_query_gid(d.ctx, C.uint32_t(d.portNum), C.uint32_t(i), &g, &typ)
		var gid fabric.GID
		var v2 bool
		switch syscall.Errno(r) {
		case 0:
			gid, v2 = gidOf(g), typ == gidTypeRoCEv2
		case syscall.EOPNOTSUPP, syscall.ENOSYS:
			var ok bool
			if gid, v2, ok = sysfsGID(d.name, d.portNum, i); !ok {
				continue
			}
		default:
			continue // an empty slot (ENODATA) or one we cannot read
		}
		if v2 && isIPv4Mapped(gid) {
			return i, gid, nil
		}
	}
	var g C.rp_gid
	if r := C.rp_query_gid_raw(d.ctx, C.uint8_t(d.portNum), 0, &g); r != 0 {
		return 0, fabric.GID{}, verr("ibv_query_gid", syscall.Errno(r), "GID index 0")
	}
	return 0, gidOf(g), nil
}

func gidOf(g C.rp_gid) fabric.GID {
	var out fabric.GID
	for i := range out {
		out[i] = byte(g.raw[i])
	}
	return out
}

// sysfsGID reads one GID table entry the way rdma-core did before the
// GID-entry ioctl existed.
func sysfsGID(dev string, port, idx int) (fabric.GID, bool, bool) {
	base := fmt.Sprintf("/sys/class/infiniband/%s/ports/%d/", dev, port)
	typ, err := os.ReadFile(base + "gid_attrs/types/" + strconv.Itoa(idx))
	if err != nil {
		return fabric.GID{}, false, false
	}
	raw, err := os.ReadFile(base + "gids/" + strconv.Itoa(idx))
	if err != nil {
		return fabric.GID{}, false, false
	}
	gid, ok := parseSysfsGID(string(raw))
	return gid, strings.TrimSpace(string(typ)) == "RoCE v2", ok
}
