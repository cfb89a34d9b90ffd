package report

import (
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

func TestCounterLines(t *testing.T) {
	run := &result.Run{Points: []result.Point{
		{Clients: 8, Trial: 1, DeviceCounters: &result.DeviceCounters{Device: "rxe0", Source: "sysfs", Shared: true,
			Before: map[string]uint64{"sent_pkts": 10, "rcvd_rnr_err": 0, "weird_new": 5},
			After:  map[string]uint64{"sent_pkts": 2010, "rcvd_rnr_err": 3, "weird_new": 6}}},
		{Clients: 16, Trial: 1},
	}}
	lines, note := counterLines(run)
	if len(lines) != 1 || lines[0] != "8 clients, trial 1: rcvd_rnr_err +3 (receiver not ready), sent_pkts +2,000, weird_new +1" {
		t.Errorf("lines %q", lines)
	}
	if !strings.Contains(note, "rxe0") || !strings.Contains(note, "both sides' counts are mixed") {
		t.Errorf("note %q", note)
	}
	if l, n := counterLines(&result.Run{Points: []result.Point{{Clients: 1}}}); l != nil || n != "" {
		t.Errorf("a run without counters: %q %q", l, n)
	}
}
