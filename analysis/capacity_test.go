package analysis

import (
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

func TestCapacity(t *testing.T) {
	pt := func(n, connected int, slo *bool) result.Point {
		p := result.Point{Clients: n, Attempted: n, Connected: connected}
		if slo != nil {
			p.Traffic = &result.Traffic{SLOPassed: *slo}
		}
		return p
	}
	yes, no := true, false
	points := []result.Point{
		pt(10, 10, &yes), pt(20, 20, &yes), pt(40, 40, &no), pt(80, 80, &no), pt(160, 150, &no),
	}
	if got := Capacity(points, 1, result.CriterionConnect); got != 80 {
		t.Errorf("max connected %d, want 80", got)
	}
	if got := Capacity(points, 1, result.CriterionTraffic); got != 20 {
		t.Errorf("max sustainable %d, want 20", got)
	}
	// The input is not changed: its points were judged by the run's own
	// criterion.
	if points[2].Traffic.Judged {
		t.Error("Capacity changed its input")
	}
	// Without a traffic phase nothing is sustainable.
	if got := Capacity([]result.Point{pt(10, 10, nil)}, 1, result.CriterionTraffic); got != 0 {
		t.Errorf("capacity without traffic %d, want 0", got)
	}
	// A failing count below a passing one stops the capacity there.
	if got := Capacity([]result.Point{pt(10, 9, &yes), pt(20, 20, &yes)}, 1, result.CriterionConnect); got != 0 {
		t.Errorf("capacity %d, want 0 (the smallest count failed)", got)
	}
}
