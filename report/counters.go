package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// counterLines says, point by point, which of the device's own counters
// rose and by how much, the known ones with what their rise means; and a
// note on where they were read.
func counterLines(run *result.Run) (lines []string, note string) {
	var shared, sim bool
	var device string
	designs := run.DesignModes() != nil
	for _, p := range run.Points {
		dc := p.DeviceCounters
		if dc == nil {
			continue
		}
		device = dc.Device
		shared = shared || dc.Shared
		sim = sim || dc.Source == "sim"
		rise := dc.Rise()
		names := make([]string, 0, len(rise))
		for k := range rise {
			names = append(names, k)
		}
		// Known meanings first, then by name.
		sort.Slice(names, func(i, j int) bool {
			mi, mj := analysis.CounterMeaning(names[i]), analysis.CounterMeaning(names[j])
			if (mi == "") != (mj == "") {
				return mi != ""
			}
			return names[i] < names[j]
		})
		var parts []string
		for _, k := range names {
			s := fmt.Sprintf("%s +%s", k, analysis.Thousands(int(rise[k])))
			if m := analysis.CounterMeaning(k); m != "" {
				s += " (" + m + ")"
			}
			parts = append(parts, s)
		}
		what := "none rose"
		if len(parts) > 0 {
			what = strings.Join(parts, ", ")
		}
		lines = append(lines, fmt.Sprintf("%s clients, trial %d: %s", pointName(p, designs), p.Trial, what))
	}
	if lines == nil {
		return nil, ""
	}
	note = fmt.Sprintf("The counters of %s's port, read before and after each point, by the driver's own names; their per-second rates are in run.json's samples.", device)
	if sim {
		note = "The sim's simulated device counters (not a NIC's), counted by the server's simulated device over each point."
	}
	if shared {
		note += " The server and the clients ran on this one device, so both sides' counts are mixed in these (--vm-peer puts them on two)."
	}
	return lines, note
}

func pointName(p result.Point, designs bool) string {
	if designs && p.Design != "" {
		return fmt.Sprintf("%d (%s)", p.Clients, p.Design)
	}
	return fmt.Sprint(p.Clients)
}
