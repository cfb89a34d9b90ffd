package runner

import (
	"os"

	"github.com/rdmaprobe/rdmaprobe/fabric/verbs"
)

// HasVerbs reports whether this binary has the libibverbs fabric.
func HasVerbs() bool { return verbs.Supported() }

// HasRDMADevice reports whether the host kernel exposes an RDMA device.
func HasRDMADevice() (bool, string) {
	ents, err := os.ReadDir("/sys/class/infiniband")
	if err != nil || len(ents) == 0 {
		return false, "no RDMA device in /sys/class/infiniband"
	}
	return true, "RDMA device " + ents[0].Name() + " on this host"
}

// firstRDMADevice names the host's first RDMA device, "" if none.
func firstRDMADevice() string {
	if ents, err := os.ReadDir("/sys/class/infiniband"); err == nil && len(ents) > 0 {
		return ents[0].Name()
	}
	return ""
}
