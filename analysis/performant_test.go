package analysis

import (
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// bendPoint is one trial of n clients at rate msg/s over a second, its
// device counters rising by rise.
func bendPoint(n int, rate float64, rise map[string]uint64) result.Point {
	dc := &result.DeviceCounters{Before: map[string]uint64{}, After: map[string]uint64{}}
	for k, v := range rise {
		dc.Before[k], dc.After[k] = 100, 100+v
	}
	return result.Point{Clients: n, Attempted: n, Connected: n, DeviceCounters: dc,
		Traffic: &result.Traffic{MsgRate: rate, Messages: int64(rate), DurationSec: 1}}
}

func TestBend(t *testing.T) {
	pts := []result.Point{bendPoint(10, 1000, nil), bendPoint(20, 1900, nil), bendPoint(20, 9000, nil), bendPoint(20, 1800, nil),
		bendPoint(40, 1200, nil), bendPoint(80, 800, nil), bendPoint(160, 2000, nil)}
	b, ok := Bend(pts, 0.5)
	// 20's median is 1,900: the trial at 9,000 moves nothing; 80 falls
	// below half of it, and 160's recovery comes after the bend.
	if !ok || b.Performant != 40 || b.Peak != 1900 || b.PeakAt != 20 || b.BendAt != 80 || b.BendRate != 800 || b.Rate != 1200 {
		t.Errorf("bend %+v", b)
	}
	if _, ok := Bend(pts[:4], 0.5); ok {
		t.Error("stated from two counts")
	}
	b, _ = Bend(pts[:5], 0.5)
	if b.Performant != 40 || b.BendAt != 0 {
		t.Errorf("no count fell: %+v", b)
	}
}

// The cause of a bend is what rose between the last count that held and
// the first that fell, the device's own counts before the CPU, or none,
// said plainly.
func TestBendCause(t *testing.T) {
	b := result.Bend{Performant: 60, BendAt: 120}
	held := func(rise map[string]uint64) result.Point { return bendPoint(60, 40000, rise) }
	fell := func(rise map[string]uint64) result.Point { return bendPoint(120, 8000, rise) }
	for _, tc := range []struct {
		name   string
		before result.Point
		after  result.Point
		cpus   int
		kind   string
		says   string
	}{
		{"rnr", held(map[string]uint64{"send_rnr_err": 4}), fell(map[string]uint64{"send_rnr_err": 4000, "rcvd_rnr_err": 4000}), 2, BendRNR, "RNR NAKs: receives not posted in time rose from 0.1 to 1e+03 per 1,000 messages"},
		{"loss", held(nil), fell(map[string]uint64{"rcvd_seq_err": 80, "duplicate_request": 20}), 2, BendLoss, "loss"},
		{"cache", held(map[string]uint64{"qp_cache_miss": 60}), fell(map[string]uint64{"qp_cache_miss": 28912}), 2, BendQPCache, "QP context cache misses"},
		{"rnr flat", held(map[string]uint64{"send_rnr_err": 40000}), fell(map[string]uint64{"send_rnr_err": 8000}), 0, BendNone, "none of"},
		{"too few", held(nil), fell(map[string]uint64{"send_rnr_err": 7}), 0, BendNone, "none of"},
	} {
		kind, says := BendCause([]result.Point{tc.before, tc.after}, b.Performant, b.BendAt, tc.cpus)
		if kind != tc.kind || !strings.Contains(says, tc.says) {
			t.Errorf("%s: %s %q, want %s %q", tc.name, kind, says, tc.kind, tc.says)
		}
	}
	cpu := fell(nil)
	cpu.Traffic.HostCPU = 1.95
	if kind, says := BendCause([]result.Point{held(nil), cpu}, b.Performant, b.BendAt, 2); kind != BendServerCPU || !strings.Contains(says, "1.95 of its 2 cores") {
		t.Errorf("saturated: %s %q", kind, says)
	}
	gen := fell(nil)
	gen.Traffic.HarnessLimit = "a load generator used 0.98 of its 1 cores"
	if kind, says := BendCause([]result.Point{held(nil), gen}, b.Performant, b.BendAt, 2); kind != BendGenerator || !strings.Contains(says, "the harness and not the server") {
		t.Errorf("generator: %s %q", kind, says)
	}
	if kind, _ := BendCause(nil, 60, 0, 2); kind != "" {
		t.Errorf("no bend, cause %s", kind)
	}
}
