package softroce

import (
	"fmt"
	"net/netip"
	"os"
)

// A link is a virtual Ethernet cable between two guests, for RDMA across
// hosts: each guest gets a virtio-net NIC (LinkNetdev) whose frames QEMU
// carries over one end of a socketpair (-netdev socket,fd=N), and binds
// LinkRxe to it. The socketpair is the whole wire: no address, port or
// path on the host, no tap or bridge, so nothing either guest sends can
// reach anything but the other guest. Each guest still has no other NIC
// (-nic none).
//
// The addresses (LinkPrefix) are IPv4 link-local, set inside the guests
// only; on LinkRxe they are GIDs ::ffff:169.254.77.x (RoCE v2), next to
// the fe80:: one made from the NIC's MAC.
const (
	LinkRxe     = "rxe2"
	LinkNetdev  = "eth0"
	linkEnv     = "RDMAPROBE_LINK"
	linkModList = "/etc/rdmaprobe/modules-link"
)

// LinkPrefix holds the link's addresses: end i is .(i+1).
var LinkPrefix = netip.MustParsePrefix("169.254.77.0/24")

// linkModules are the roots loaded only with a link: the virtio-net
// driver (with net_failover and failover under it).
var linkModules = []string{"virtio_net"}

// LinkEnd is one guest's end of a link (see NewLink). Boot takes it over:
// QEMU gets the socket, and Boot closes the host's copy.
type LinkEnd struct {
	// Addr is the guest's address on the link, with its prefix length.
	Addr netip.Prefix
	// MAC is the guest NIC's address.
	MAC  string
	conn *os.File
}

// Peer is the address of the other end, without prefix length.
func (e *LinkEnd) Peer() netip.Addr {
	a := e.Addr.Addr().As4()
	if a[3] == 1 {
		a[3] = 2
	} else {
		a[3] = 1
	}
	return netip.AddrFrom4(a)
}

// Close releases the host's copy of this end; Boot does it once QEMU
// has the socket, so only an end never booted needs it.
func (e *LinkEnd) Close() error {
	if e == nil || e.conn == nil {
		return nil
	}
	err := e.conn.Close()
	e.conn = nil
	return err
}

// LinkInfo describes a guest's link device.
type LinkInfo struct {
	Device    string            `json:"device"`
	Netdev    string            `json:"netdev"`
	Addr      string            `json:"addr"`
	MAC       string            `json:"mac"`
	PortState string            `json:"port_state"`
	GIDs      map[string]string `json:"gids,omitempty"`
	// GIDIndex is the index of the address's IPv4-mapped GID.
	GIDIndex int `json:"gid_index"`
}

// linkArg is the kernel command-line word that tells the guest its link
// address and MAC: RDMAPROBE_LINK=169.254.77.1/24,52:54:00:72:70:01.
func (e *LinkEnd) linkArg() string {
	return fmt.Sprintf("%s=%s,%s", linkEnv, e.Addr, e.MAC)
}
