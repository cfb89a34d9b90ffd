package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// target says what was probed when it was not rdmaprobe's own server
// and client, and which figures such a run cannot have.
func (m *Model) target(run *result.Run) {
	t := run.Target
	if t == nil {
		return
	}
	q := func(argv []string) string { return "`" + strings.Join(argv, " ") + "`" }
	var lines []string
	if len(t.Server) > 0 {
		s := "Server under test: " + q(t.Server)
		if len(t.BuildCommand) > 0 {
			s += ", built once per client count with " + q(t.BuildCommand)
		}
		if t.Ready != "" {
			s += fmt.Sprintf("; ready when its output matched `%s`", t.Ready)
		} else {
			s += "; ready when its port listened"
		}
		if t.Port > 0 {
			s += fmt.Sprintf(" (fixed port %d)", t.Port)
		}
		lines = append(lines, s+"; stopped with SIGTERM, then SIGKILL.")
	} else {
		lines = append(lines, "Server under test: rdmaprobe's own.")
	}
	if len(t.Client) > 0 {
		s := "Clients: " + q(t.Client) + ", one process per client"
		if t.ClientStdin != "" {
			s += fmt.Sprintf(", stdin %q", t.ClientStdin)
		}
		if t.ClientOK != "" {
			s += fmt.Sprintf(", connected when a line matched `%s` and it did not fail", t.ClientOK)
		} else {
			s += ", connected on exit status 0"
		}
		lines = append(lines, s+".")
		switch t.Counting {
		case "held":
			lines = append(lines, "N at once: held. Each client's stdin stayed open until every client of the point had printed its ok line or failed, so the server held the connected ones together.")
		default:
			lines = append(lines, "N at once: launched. The N clients were started together and each did its work and exited; the server need not have held N at once.")
		}
		lines = append(lines, "Not measured for client commands: the phases of a connection (TCP, TLS, QP transitions), message round trips and PSN uniqueness; a connect time is from spawning the client to its ok line (or exit), process start included.")
	}
	if len(t.Server) > 0 {
		lines = append(lines, "The server command's own view (accepted, refused) is not known: what it printed, its exit and the kernel's count of its objects are.")
	}
	if t.Device != "" {
		lines = append(lines, fmt.Sprintf("RDMA device `%s`, clients dialled `%s`.", t.Device, t.Addr))
	}
	var bins []string
	for p := range t.Binaries {
		bins = append(bins, p)
	}
	sort.Strings(bins)
	for _, p := range bins {
		lines = append(lines, fmt.Sprintf("SHA-256 of `%s`: `%s`.", p, t.Binaries[p]))
	}
	if b := lastBuild(run.Points); b != nil {
		var outs []string
		for f, sum := range b.Outputs {
			outs = append(outs, fmt.Sprintf("`%s` %s", f, sum[:16]))
		}
		sort.Strings(outs)
		lines = append(lines, fmt.Sprintf("Built outputs (SHA-256, first 16 digits) for %s: %s.", b.Dir, strings.Join(outs, ", ")))
	}
	for _, d := range t.Dirs {
		lines = append(lines, fmt.Sprintf("Copied into the guest: `%s`.", d))
	}
	m.Target = lines
}

func lastBuild(points []result.Point) *result.Build {
	for i := len(points) - 1; i >= 0; i-- {
		if p := points[i]; p.Target != nil && p.Target.Build != nil {
			return p.Target.Build
		}
	}
	return nil
}
