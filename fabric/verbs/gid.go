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
