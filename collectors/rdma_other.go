//go:build !linux

package collectors

import (
	"errors"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// errNoRDMANetlink: RDMA resource counts come from Linux's RDMA netlink.
var errNoRDMANetlink = errors.New("RDMA resource counts need Linux (RDMA netlink)")

// rdmaCollector reads nothing outside Linux: rdmaprobe measures on Linux,
// and elsewhere only reads and renders saved runs.
type rdmaCollector struct {
	device string
	base   map[string]int
}

func newRDMACollector(device string) *rdmaCollector { return &rdmaCollector{device: device} }

func (*rdmaCollector) Name() string { return "rdma" }

func (*rdmaCollector) baseline() error { return errNoRDMANetlink }

func (*rdmaCollector) Collect(*result.Sample) error { return errNoRDMANetlink }

func (*rdmaCollector) close() {}

// DeviceResources fails outside Linux.
func DeviceResources(string) (map[string]int, error) { return nil, errNoRDMANetlink }
