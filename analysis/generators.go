package analysis

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// generatorLimits are errnos only the client side of a connection can
// have, the load generators' walls: the key of the diagnosis, what ran
// out, the generator's limit that says how much there was, and advice.
var generatorLimits = map[string][4]string{
	"EADDRNOTAVAIL": {"generator:ephemeral-ports", "ran out of ephemeral ports for the exchange's TCP connections (one per held client)",
		"net.ipv4.ip_local_port_range", "spread the generators over more hosts (--hosts, --hostfile) or widen net.ipv4.ip_local_port_range on them"},
	"EMFILE": {"generator:rlimit-nofile", "ran out of open files", "RLIMIT_NOFILE",
		"raise the generator hosts' open-file limit or spread the generators over more hosts (--hosts, --hostfile)"},
	"ENFILE": {"generator:file-max", "ran out of the system's open files", "RLIMIT_NOFILE",
		"raise fs.file-max on the generator hosts or spread the generators over more hosts (--hosts, --hostfile)"},
}

// generatorLimited names a wall of the load generators' own hosts, and
// which hosts hit it, when the point's clients failed with an errno only
// their side can have. A capacity probe measures the server: a run such
// a wall stopped says so, and says the server was not what limited it.
//
// A client command's errno is read from what it printed, which may be its
// server's error relayed ("server error: accept: Too many open files"):
// such failures (class exit) are not taken as the generators' wall.
func generatorLimited(pt result.Point, f failure) *result.Diagnosis {
	lim, ok := generatorLimits[f.errno]
	if !ok || f.class == result.OutcomeExit {
		return nil
	}
	hostOf := map[int]string{}
	limitOf := map[string]string{}
	for _, h := range pt.Hosts {
		for _, g := range h.Generators {
			hostOf[g] = h.Host
		}
		for _, u := range h.Usage {
			if v := u.Limits[lim[2]]; v != "" {
				limitOf[h.Host] = v
			}
		}
	}
	byHost := map[string]int{}
	for _, r := range pt.Records {
		if r.Errno == f.errno {
			h, ok := hostOf[r.Proc]
			if !ok {
				h = "this host"
			}
			byHost[h]++
		}
	}
	var hosts []string
	for h := range byHost {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	d := &result.Diagnosis{Limit: lim[0], Suggestion: lim[3]}
	d.Summary = fmt.Sprintf("the load generators' limit, not the server's: %s %s (%s clients failed as %s: %s)",
		strings.Join(hosts, ", "), lim[1], Thousands(f.count), f.class, f.errno)
	for _, h := range hosts {
		e := fmt.Sprintf("%s: %s clients failed with %s", h, Thousands(byHost[h]), f.errno)
		if v := limitOf[h]; v != "" {
			e += fmt.Sprintf("; %s %s", lim[2], v)
		}
		d.Evidence = append(d.Evidence, e)
	}
	for _, h := range pt.Hosts {
		if byHost[h.Host] == 0 && h.Attempted > 0 {
			d.Evidence = append(d.Evidence, fmt.Sprintf("%s: %s of %s connected", h.Host, Thousands(h.Connected), Thousands(h.Attempted)))
		}
	}
	return d
}
