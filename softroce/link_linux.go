package softroce

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// NewLink makes the two ends of a link: boot one guest with each
// (BootConfig.Link).
func NewLink() (a, b *LinkEnd, err error) {
	// SOCK_STREAM: QEMU frames each Ethernet frame with its length, and a
	// stream has none of a datagram socketpair's small queue limit
	// (net.unix.max_dgram_qlen, 10 by default).
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("link socketpair: %w", err)
	}
	end := func(i int) *LinkEnd {
		a := LinkPrefix.Addr().As4()
		a[3] = byte(i + 1)
		return &LinkEnd{
			Addr: netip.PrefixFrom(netip.AddrFrom4(a), LinkPrefix.Bits()),
			// 52:54:00 is QEMU's prefix; "rp" and the end's number.
			MAC:  fmt.Sprintf("52:54:00:72:70:%02x", i+1),
			conn: os.NewFile(uintptr(fds[i]), "link-end-"+strconv.Itoa(i)),
		}
	}
	return end(0), end(1), nil
}

// parseLinkArg reads the value of RDMAPROBE_LINK.
func parseLinkArg(v string) (netip.Prefix, string, error) {
	addr, mac, ok := strings.Cut(v, ",")
	if !ok {
		return netip.Prefix{}, "", fmt.Errorf("%s=%q: want ADDR/BITS,MAC", linkEnv, v)
	}
	p, err := netip.ParsePrefix(addr)
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}, "", fmt.Errorf("%s=%q: want an IPv4 address with prefix length", linkEnv, v)
	}
	return p, mac, nil
}

// setupLink brings up the NIC with the MAC the host gave, sets the
// address, binds LinkRxe to it and waits until the port is ACTIVE with
// the address's IPv4-mapped GID.
func setupLink(arg string) error {
	pfx, mac, err := parseLinkArg(arg)
	if err != nil {
		return err
	}
	if err := loadModules(linkModList); err != nil {
		return err
	}
	var link netlink.Link
	// virtio_net registers the NIC while its module loads; look for it by
	// MAC rather than trust the name.
	err = waitFor("the link's NIC ("+mac+")", 10*time.Second, func() (bool, error) {
		links, err := netlink.LinkList()
		if err != nil {
			return false, err
		}
		for _, l := range links {
			if strings.EqualFold(l.Attrs().HardwareAddr.String(), mac) {
				link = l
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	name := link.Attrs().Name
	if name != LinkNetdev {
		if err := netlink.LinkSetName(link, LinkNetdev); err != nil {
			return fmt.Errorf("ip link set %s name %s: %w", name, LinkNetdev, err)
		}
	}
	addr := &netlink.Addr{IPNet: prefixIPNet(pfx)}
	if err := netlink.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("ip addr add %s dev %s: %w", pfx, LinkNetdev, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("ip link set %s up: %w", LinkNetdev, err)
	}
	if err := netlink.RdmaLinkAdd(LinkRxe, "rxe", LinkNetdev); err != nil {
		return fmt.Errorf("rdma link add %s type rxe netdev %s: %w", LinkRxe, LinkNetdev, err)
	}
	mapped := ipv4MappedGID(pfx.Addr().String())
	return waitFor(LinkRxe+" ACTIVE with GID "+mapped, 10*time.Second, func() (bool, error) {
		st, gids := portInfo(LinkRxe)
		return strings.Contains(st, "ACTIVE") && gidIndex(gids, mapped) >= 0, nil
	})
}

func prefixIPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// gidIndex is the index of GID g in gids (as portInfo reads them), or -1.
func gidIndex(gids map[string]string, g string) int {
	for k, v := range gids {
		if v == g {
			i, err := strconv.Atoi(k)
			if err == nil {
				return i
			}
		}
	}
	return -1
}

// linkInfo describes the link device, if this guest has one.
func linkInfo() *LinkInfo {
	arg := os.Getenv(linkEnv)
	if arg == "" {
		return nil
	}
	pfx, mac, err := parseLinkArg(arg)
	if err != nil {
		return nil
	}
	li := &LinkInfo{Device: LinkRxe, Netdev: LinkNetdev, Addr: pfx.String(), MAC: mac, GIDIndex: -1}
	if _, err := os.Stat(filepath.Join("/sys/class/infiniband", LinkRxe)); errors.Is(err, os.ErrNotExist) {
		return li
	}
	li.PortState, li.GIDs = portInfo(LinkRxe)
	li.GIDIndex = gidIndex(li.GIDs, ipv4MappedGID(pfx.Addr().String()))
	return li
}
