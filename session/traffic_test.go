package session

import (
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/slo"
)

func TestJudgeTraffic(t *testing.T) {
	slos, err := slo.Parse("rate>=0.8*base,p99<=2ms")
	if err != nil {
		t.Fatal(err)
	}
	pt := func(n int, rate, p99us float64) result.Point {
		return result.Point{Clients: n, Attempted: n, Connected: n,
			Traffic: &result.Traffic{MsgRate: rate, Latency: result.LatencyUS{P99: p99us}}}
	}
	// The first point is the base: it meets its own rate.
	first := pt(10, 1000, 500)
	judgeTraffic(&first, nil, slos, result.CriterionTraffic)
	if !first.Traffic.SLOPassed || !first.Traffic.Judged || first.Traffic.Failed() {
		t.Fatalf("base point: %+v", first.Traffic)
	}
	prior := []result.Point{first}
	// 85% of the base's rate passes, 75% does not.
	ok := pt(20, 850, 900)
	judgeTraffic(&ok, prior, slos, result.CriterionTraffic)
	slow := pt(40, 750, 900)
	judgeTraffic(&slow, prior, slos, result.CriterionTraffic)
	if !ok.Traffic.SLOPassed || slow.Traffic.SLOPassed || !slow.Traffic.Failed() {
		t.Errorf("85%% of base: %v; 75%%: %v (%v)", ok.Traffic.SLOPassed, slow.Traffic.SLOPassed, slow.Traffic.SLO)
	}
	// A smaller count measured later becomes the base.
	smaller := pt(5, 2000, 100)
	judgeTraffic(&smaller, prior, slos, result.CriterionConnect)
	again := pt(20, 850, 900)
	judgeTraffic(&again, append(prior, smaller), slos, result.CriterionConnect)
	if again.Traffic.SLOPassed {
		t.Errorf("against the smaller count's 2000 msg/s, 850 passed: %v", again.Traffic.SLO)
	}
	// Under criterion connect a missed SLO does not decide the point.
	if again.Traffic.Judged || again.Traffic.Failed() {
		t.Error("criterion connect judged the traffic phase")
	}
	// An interrupted phase misses its SLOs whatever its figures.
	cut := pt(10, 5000, 1)
	cut.Traffic.Error = "interrupted"
	judgeTraffic(&cut, prior, slos, result.CriterionTraffic)
	if cut.Traffic.SLOPassed {
		t.Error("an interrupted phase met its SLOs")
	}
	// Missing clients are errors for errors=0.
	zero, _ := slo.Parse("errors=0")
	short := pt(10, 1000, 100)
	short.Connected = 9
	judgeTraffic(&short, nil, zero, result.CriterionTraffic)
	if short.Traffic.SLOPassed || short.Traffic.SLO[0].Got != 1 {
		t.Errorf("a client missing from the phase: %+v", short.Traffic.SLO)
	}
}

// peak is the best rate at any count up to the point's, each count its
// trials' median: a noisy trial moves neither.
func TestJudgeTrafficPeak(t *testing.T) {
	slos, err := slo.Parse("rate>=0.9*peak")
	if err != nil {
		t.Fatal(err)
	}
	pt := func(n, trial int, rate float64) result.Point {
		return result.Point{Clients: n, Trial: trial, Attempted: n, Connected: n, Traffic: &result.Traffic{MsgRate: rate}}
	}
	var prior []result.Point
	judge := func(p result.Point) result.Point {
		judgeTraffic(&p, prior, slos, result.CriterionTraffic)
		prior = append(prior, p)
		return p
	}
	judge(pt(10, 1, 1000))
	judge(pt(10, 2, 5000)) // one noisy trial: the median of 10 stays 1000
	judge(pt(10, 3, 1000))
	if p := judge(pt(20, 1, 950)); !p.Traffic.SLOPassed {
		t.Errorf("950 against a peak of 1000 (one trial at 5000): %+v", p.Traffic.SLO)
	}
	if p := judge(pt(40, 1, 2000)); !p.Traffic.SLOPassed {
		t.Errorf("the new peak failed itself: %+v", p.Traffic.SLO)
	}
	if p := judge(pt(80, 1, 1700)); p.Traffic.SLOPassed || p.Traffic.SLO[0].Bound != 1800 {
		t.Errorf("1700 against a peak of 2000: %+v", p.Traffic.SLO)
	}
	// A smaller count measured later is judged by the counts up to it.
	if p := judge(pt(15, 1, 950)); !p.Traffic.SLOPassed || p.Traffic.SLO[0].Bound != 900 {
		t.Errorf("15 clients judged against a larger count's peak: %+v", p.Traffic.SLO)
	}
}
