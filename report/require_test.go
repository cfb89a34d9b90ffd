package report

import (
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// --require with several designs holds each to it, and the line names
// the designs that fell short with the count each held.
func TestRequireLineEveryDesign(t *testing.T) {
	pt := func(design string, n, connected int) result.Point {
		return result.Point{Design: design, Clients: n, Trial: 1, Attempted: n, Connected: connected}
	}
	r := &result.Run{Config: result.Config{Threshold: 1, ResourceMode: "per-client,srq", Designs: []string{"per-client", "srq"}},
		Points: []result.Point{pt("per-client", 5, 5), pt("srq", 5, 5), pt("per-client", 10, 8), pt("srq", 10, 10)}}
	if line, met := RequireLine(r); line != "" || !met {
		t.Errorf("no --require: %q, met %v", line, met)
	}
	r.Config.Require = "5:connect"
	if line, met := RequireLine(r); !met || line != "requirement met: 5 clients by connect in every design" {
		t.Errorf("5 clients, held by both: %q, met %v", line, met)
	}
	r.Config.Require = "10:connect"
	line, met := RequireLine(r)
	if met || !strings.Contains(line, "requirement not met: 10 clients by connect in every design") ||
		!strings.Contains(line, "per-client 5") || strings.Contains(line, "srq") {
		t.Errorf("10 clients, held by srq alone: %q, met %v", line, met)
	}
}

// One design: the line gives the count held, by the criterion's name.
func TestRequireLineTraffic(t *testing.T) {
	r := &result.Run{Config: result.Config{Threshold: 1, Require: "8:traffic", SLO: "p99<=2ms", Traffic: &result.TrafficSetup{DurationSec: 1}},
		Points: []result.Point{{Clients: 4, Trial: 1, Attempted: 4, Connected: 4, Passed: true,
			Traffic: &result.Traffic{Judged: true, SLOPassed: true}}}}
	line, met := RequireLine(r)
	if met || line != "requirement not met: 8 clients by traffic; max sustainable (--slo p99<=2ms) among the counts tested: 4" {
		t.Errorf("got %q, met %v", line, met)
	}
}
