package verbs

import (
	"net"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// isIPv4Mapped reports whether g is ::ffff:a.b.c.d, the form RoCE v2 GIDs
// take for an IPv4 address.
func isIPv4Mapped(g fabric.GID) bool {
	for _, b := range g[:10] {
		if b != 0 {
			return false
		}
	}
	return g[10] == 0xff && g[11] == 0xff
}

// parseSysfsGID parses a sysfs gids/<i> entry
// ("0000:0000:0000:0000:0000:ffff:7f00:0001"); an all-zero GID is an empty
// slot and reports false.
func parseSysfsGID(s string) (fabric.GID, bool) {
	ip := net.ParseIP(strings.TrimSpace(s))
	if ip == nil {
		return fabric.GID{}, false
	}
	var g fabric.GID
	copy(g[:], ip.To16())
	return g, g != fabric.GID{}
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
