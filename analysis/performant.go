package analysis

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

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
// such a phase. Only counts below the smallest one where a trial did
// not hold all its clients enter: the performant count never passes a
// wall.
func Bend(points []result.Point, eps float64) (b result.Bend, ok bool) {
	// A count where any trial held fewer clients than it asked for is
	// past a wall: its rate is what fewer clients got, so the range
	// ends below it.
	wall := 0
	for _, p := range points {
		if p.Connected < p.Clients && (wall == 0 || p.Clients < wall) {
			wall = p.Clients
		}
	}
	by := map[int][]float64{}
	for _, p := range points {
		if t := p.Traffic; t != nil && t.Error == "" && (wall == 0 || p.Clients < wall) {
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

// What a bend's cause is (result.Bend.CauseKind), in the order they are
// looked for: the device's own counts first, then the CPU.
const (
	BendRNR       = "rnr"
	BendLoss      = "loss"
	BendQPCache   = "qp-cache"
	BendCongest   = "congestion"
	BendServerCPU = "server-cpu"
	BendGenerator = "generator"
	BendNone      = "none"
)

// counterBend is the cause a counter's meaning (CounterMeaning) names,
// and how it is said.
var counterBend = []struct{ meaning, kind, says string }{
	{CounterRNR, BendRNR, "RNR NAKs: receives not posted in time"},
	{CounterLoss, BendLoss, "retries and sequence errors: loss"},
	{CounterCacheMiss, BendQPCache, "QP context cache misses: more QPs than the device caches"},
	{CounterCongestion, BendCongest, "congestion notifications"},
}

// minPerMessage is the fewest counts per message a counter must reach
// past a bend to name it: one per thousand messages.
const minPerMessage = 0.001

// BendCause says what rose between the last count that held and the
// first that fell (a bend's Performant and BendAt; max sustainable and
// the first count whose traffic missed the SLOs): a device counter of a known meaning
// per message at least doubled to one per thousand or more (RNR NAKs,
// retries and sequence errors, QP cache misses, congestion), the server's
// machine at saturation, or a load generator at its limit; else none of
// them, said plainly. cpus is the cores of the machine the server ran on
// (0: unknown). Nothing when fell is 0.
func BendCause(points []result.Point, held, fell, cpus int) (kind, says string) {
	if fell == 0 {
		return "", ""
	}
	type count struct {
		msgs   float64
		rise   map[string]float64
		host   float64
		server float64
		harn   string
	}
	at := func(n int) count {
		c := count{rise: map[string]float64{}}
		for _, p := range points {
			t := p.Traffic
			if p.Clients != n || t == nil || t.Error != "" {
				continue
			}
			c.msgs += float64(t.Messages)
			for name, r := range p.DeviceCounters.Rise() {
				if m := CounterMeaning(name); m != "" {
					c.rise[m] += float64(r)
				}
			}
			c.host = max(c.host, t.HostCPU)
			c.server = max(c.server, t.ServerCPU-t.ServerSpin)
			if c.harn == "" {
				c.harn = t.HarnessLimit
			}
		}
		return c
	}
	before, after := at(held), at(fell)
	per := func(c count, m string) float64 {
		if c.msgs == 0 {
			return 0
		}
		return c.rise[m] / c.msgs
	}
	for _, cb := range counterBend {
		x, y := per(before, cb.meaning), per(after, cb.meaning)
		if y >= minPerMessage && y >= 2*x {
			return cb.kind, fmt.Sprintf("%s rose from %s to %s per 1,000 messages", cb.says, perThousand(x), perThousand(y))
		}
	}
	if cpus > 0 {
		if busy := max(after.host, after.server); busy >= result.Saturated*float64(cpus) {
			return BendServerCPU, fmt.Sprintf("the server's machine at saturation: %.2f of its %d cores busy (%.2f at %d clients)",
				busy, cpus, max(before.host, before.server), held)
		}
	}
	if after.harn != "" {
		return BendGenerator, "a load generator at its limit, the harness and not the server: " + after.harn
	}
	return BendNone, "none of RNR NAKs, retries or sequence errors, QP cache misses, a saturated server machine or a load generator at its limit rose: the cause is none rdmaprobe reads"
}

func perThousand(x float64) string { return strconv.FormatFloat(x*1000, 'g', 3, 64) }
