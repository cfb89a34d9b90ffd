package report

import (
	"fmt"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// HostRow is one load-generator host as the run found it.
type HostRow struct {
	Name, Addr, System, Device, GID, Exe string
}

// HostPointRow is one host's share of one point.
type HostPointRow struct {
	Clients, Trial int
	Host           string
	Generators     int
	Connected      string // connected/attempted
	Success        string
	Rate           string // connects per second from the release
	RDMA           string // the kernel's count on the host's device, from its generators
	Faults         string
}

// hosts lays out the load-generator hosts and each point's share of
// them, when the generators ran on other hosts.
func (m *Model) hosts(run *result.Run) {
	if len(run.Hosts) == 0 && run.ServerHost == nil {
		return
	}
	c := run.Config
	if len(run.Hosts) > 0 {
		m.HostsNote = fmt.Sprintf("Load generators started by %s on %d host(s); ", c.Launcher, len(run.Hosts))
	} else {
		m.HostsNote = "Load generators on the probe's own host; "
	}
	if h := run.ServerHost; h != nil {
		m.HostsNote += fmt.Sprintf("the server ran on %s (%s) and listened at %s.", h.Name, h.Addr, c.ServerAddr)
	} else {
		m.HostsNote += fmt.Sprintf("the server listened at %s.", c.ServerAddr)
	}
	for _, h := range run.Hosts {
		r := HostRow{Name: h.Name, Addr: h.Addr, Exe: h.Exe}
		if h.Copied {
			r.Exe += " (copied)"
		}
		if e := h.Environment; e != nil {
			r.System = fmt.Sprintf("%s, Linux %s, %d CPUs, %s", e.OS, e.Kernel, e.CPUs, gib(e.MemoryBytes))
			if d := e.Device; d != nil {
				r.Device = fmt.Sprintf("%s port %d %s (max_qp %d)", d.Name, d.Port.Port, d.Port.State, d.Caps.MaxQP)
				r.GID = fmt.Sprintf("%s (index %d)", d.Port.GID, d.Port.GIDIndex)
			}
		}
		m.Hosts = append(m.Hosts, r)
	}
	for _, p := range run.Points {
		for _, hp := range p.Hosts {
			r := HostPointRow{Clients: p.Clients, Trial: p.Trial, Host: hp.Host, Generators: len(hp.Generators),
				Connected: fmt.Sprintf("%d/%d", hp.Connected, hp.Attempted), Success: Pct(hp.SuccessRate), Rate: "–", RDMA: "–"}
			if hp.ConnectRate > 0 {
				r.Rate = fmt.Sprintf("%.0f", hp.ConnectRate)
			}
			if q := hostRDMA(hp.Usage); q != "" {
				r.RDMA = q
			}
			var faults []string
			for _, f := range hp.Faults {
				faults = append(faults, fmt.Sprintf("generator %d %s: %s", f.Generator, f.Class, f.Detail))
			}
			// A fault's text is ssh's or the generator's; a '|' would
			// end its Markdown table cell.
			r.Faults = strings.ReplaceAll(strings.Join(faults, "; "), "|", "/")
			m.HostPoints = append(m.HostPoints, r)
		}
	}
}

// hostRDMA is the kernel's count of QPs, CQs and MRs on a host's device
// as its generators last read it (every generator of a host sees the
// same device, so the highest reading), "" on sim.
func hostRDMA(usage []result.GeneratorUsage) string {
	best := map[string]int{}
	for _, u := range usage {
		for k, v := range u.RDMA {
			best[k] = max(best[k], v)
		}
	}
	if len(best) == 0 {
		return ""
	}
	var parts []string
	for _, k := range []string{"qp", "cq", "mr", "pd"} {
		if v, ok := best[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %d", k, v))
		}
	}
	return strings.Join(parts, ", ")
}

func gib(b uint64) string {
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}
