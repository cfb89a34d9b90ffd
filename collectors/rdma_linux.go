package collectors

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// rdmaCollector counts one device's resources through RDMA netlink
// (RDMA_NLDEV_CMD_RES_GET, as `rdma resource show`), minus a baseline
// taken when the session starts.
type rdmaCollector struct {
	device string
	base   map[string]int
	// nl keeps one RDMA netlink socket open for the session. Without it
	// every reading opens, configures, binds and closes a socket (seven
	// system calls besides the request, each slow under emulation, in
	// the CPUs the point measures).
	nl *netlink.Handle
}

func newRDMACollector(device string) *rdmaCollector {
	c := &rdmaCollector{device: device}
	if h, err := netlink.NewHandle(unix.NETLINK_RDMA); err == nil {
		c.nl = h
	}
	return c
}

func (*rdmaCollector) Name() string { return "rdma" }

func (c *rdmaCollector) baseline() error {
	m, err := deviceResources(c.nl, c.device)
	c.base = m
	return err
}

func (c *rdmaCollector) Collect(s *result.Sample) error {
	m, err := deviceResources(c.nl, c.device)
	if err != nil {
		return err
	}
	s.RDMA = Subtract(m, c.base)
	return nil
}

func (c *rdmaCollector) close() {
	if c.nl != nil {
		c.nl.Close()
		c.nl = nil
	}
}

// DeviceResources reads the device's resource counts through netlink.
func DeviceResources(device string) (map[string]int, error) {
	return deviceResources(nil, device)
}

// deviceResources reads them over h, or a socket of its own if h is nil.
func deviceResources(h *netlink.Handle, device string) (map[string]int, error) {
	var list []*netlink.RdmaResource
	var err error
	if h != nil {
		list, err = h.RdmaResourceList()
	} else {
		list, err = netlink.RdmaResourceList()
	}
	if err != nil {
		return nil, fmt.Errorf("rdma netlink resource dump: %w", err)
	}
	for _, r := range list {
		if r.Name == device {
			return Counts(r.RdmaResourceSummaryEntries), nil
		}
	}
	return nil, fmt.Errorf("rdma device %q not in the kernel's resource list", device)
}
