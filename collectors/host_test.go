package collectors

import (
	"math"
	"testing"
)

// Shares are of the ticks counted, scaled by the CPUs: half of the ticks
// of 2 CPUs busy is 1 core, however few ticks a busy host let the guest
// count.
func TestCPUShareSince(t *testing.T) {
	start := CPUShare{busy: 5, softirq: 0.5, total: 10, cpus: 2}
	end := CPUShare{busy: 10, softirq: 1, total: 20, cpus: 2}
	busy, soft, ok := end.Since(start)
	if !ok || math.Abs(busy-1) > 1e-9 || math.Abs(soft-0.1) > 1e-9 {
		t.Errorf("busy %g, softirq %g, ok %v; want 1 and 0.1", busy, soft, ok)
	}
	if _, _, ok := start.Since(start); ok {
		t.Error("no tick counted, yet a share")
	}
	now, err := CPUTimes()
	if err != nil || now.cpus < 1 || now.total <= 0 || now.busy > now.total || now.softirq > now.busy {
		t.Errorf("this machine's CPU times %+v, %v", now, err)
	}
}
