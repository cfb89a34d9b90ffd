package verbs

import (
	"syscall"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// deviceListError reads ibv_get_device_list's failure. libibverbs says
// ENOSYS when the kernel has no RDMA support at all, which reads as a bug
// in rdmaprobe unless it is said in words.
func deviceListError(errno syscall.Errno) error {
	detail := ""
	if errno == syscall.ENOSYS {
		detail = "this kernel has no RDMA devices (no /sys/class/infiniband_verbs): load a driver such as rdma_rxe and add a link, or use --backend sim (or vm, for ramp and search)"
	}
	return &fabric.VerbError{Verb: "ibv_get_device_list", Errno: errno, Detail: detail}
}
