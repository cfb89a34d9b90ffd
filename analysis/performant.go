package analysis

import (
	"maps"
	"slices"

	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/slo"
)

// DefaultEpsilon is how far below the peak rate a count may fall and
// still be performant, when the run's SLOs do not say (rate>=F*peak
// says 1−F). It sits above the noise of a loaded 2-core host, where the
// sim's medians of three trials fell to 65% of the peak with no bend
// behind them, and below a bend's fall: a device cache past its size
// took the rate to a fifth (results/README.md, "The bend").
const DefaultEpsilon = 0.5

// MinBendCounts is how many counts must have run a completed traffic
// phase before a run states its performant-client count: with two, the
// second is past a peak it made itself.
const MinBendCounts = 3

// Bend is the performant-client count of one design's points: the
// largest tested N such that every tested count up to N got at least
// (1−eps) of the peak, the best aggregate message rate at any count up
// to it. Each count is its completed traffic phases' median rate over
// its trials (slo.Median), so one noisy trial moves neither the count
// nor the peak. ok is false when fewer than MinBendCounts counts have
// such a phase.
func Bend(points []result.Point, eps float64) (b result.Bend, ok bool) {
	by := map[int][]float64{}
	for _, p := range points {
		if t := p.Traffic; t != nil && t.Error == "" {
			by[p.Clients] = append(by[p.Clients], t.MsgRate)
		}
	}
	if len(by) < MinBendCounts {
		return result.Bend{}, false
	}
	b.Epsilon = eps
	peak, peakAt := 0.0, 0
	for _, n := range slices.Sorted(maps.Keys(by)) {
		fs := make([]slo.Figures, len(by[n]))
		for i, r := range by[n] {
			fs[i] = slo.Figures{Rate: r}
		}
		rate := slo.Median(fs).Rate
		if rate > peak || peakAt == 0 {
			peak, peakAt = rate, n
		}
		if rate < (1-eps)*peak {
			b.BendAt, b.BendRate = n, rate
			break
		}
		b.Performant, b.Rate, b.Peak, b.PeakAt = n, rate, peak, peakAt
	}
	return b, true
}

// Epsilon is a run's ε from its --slo list as saved (result.Config.SLO):
// 1−F of its first rate>=F*peak objective, else DefaultEpsilon.
func Epsilon(sloList string) float64 {
	slos, _ := slo.Parse(sloList)
	for _, s := range slos {
		if s.Metric == "rate" && s.Ref == slo.RefPeak && (s.Op == ">=" || s.Op == ">") && s.Value > 0 && s.Value <= 1 {
			return 1 - s.Value
		}
	}
	return DefaultEpsilon
}
