package softroce

import (
	"fmt"
	"net"
)

// The netdev device: a second Soft-RoCE device for servers rdmaprobe did
// not write. rxe0 on lo passes RTR only at GID index 1 (IPv4-mapped
// loopback) and rdma_cm cannot resolve routes on lo, yet most third-party
// servers use rdma_cm (rping, ucmatose) or hard-code GID index 0 (the
// IPv6 link-local one), as testdata/capserver does. So, on request
// (BootConfig.Netdev), the guest also creates a dummy netdev with an
// address and binds rxe1 to it: there GID index 0 is fe80::…, index 1 is
// ::ffff:192.0.2.1, and rdma_cm resolves 192.0.2.1 to rxe1.
//
// A dummy device drops whatever it transmits; rxe delivers a packet whose
// destination MAC is its own device's straight to its receive path, so
// traffic between two processes on rxe1 never reaches the dummy driver.
// The guest runs with `-nic none` and 192.0.2.0/24 is TEST-NET-1 (RFC
// 5737), an address range that is never routed: nothing leaves the guest.
//
// rxe0 on lo stays exactly as it was, so the built-in server's figures do
// not move: the netdev device is only created when asked for.
const (
	NetdevRxe     = "rxe1"
	NetdevName    = "dummy0"
	NetdevAddr    = "192.0.2.1"
	netdevPrefix  = 24
	netdevEnv     = "RDMAPROBE_NETDEV"
	netdevModList = "/etc/rdmaprobe/modules-netdev"
)

// netdevModules are the roots loaded only with the netdev device: the
// dummy driver, and rdma_ucm (/dev/infiniband/rdma_cm, what librdmacm
// talks to) with rdma_cm, ib_cm and iw_cm under it.
var netdevModules = []string{"dummy", "rdma_ucm"}

// NetdevInfo describes the netdev device in the guest.
type NetdevInfo struct {
	Device    string            `json:"device"`
	Netdev    string            `json:"netdev"`
	Addr      string            `json:"addr"`
	PortState string            `json:"port_state"`
	GIDs      map[string]string `json:"gids,omitempty"`
}

// ipv4MappedGID is the GID sysfs shows for an IPv4 address on a RoCE v2
// port: ::ffff:a.b.c.d written as eight groups of four hex digits.
func ipv4MappedGID(addr string) string {
	ip := net.ParseIP(addr).To4()
	if ip == nil {
		return ""
	}
	return fmt.Sprintf("0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", ip[0], ip[1], ip[2], ip[3])
}
