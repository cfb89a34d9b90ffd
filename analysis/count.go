package analysis

import (
	"sort"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// Count is the trials at one client count, pooled: the unit every verdict,
// capacity and table row speaks of.
type Count struct {
	Clients   int
	Trials    int
	Attempted int
	Connected int
	// Errored is set when a trial itself failed (Point.Error, a server or
	// load generator that died): the count then fails whatever its
	// clients did.
	Errored bool
	// SLOFailed is set when the count's median trial's traffic phase
	// decided against it (result.Traffic.Failed: criterion traffic, an
	// SLO missed), SLOMissed of its Trials (MissesSLOs).
	SLOFailed bool
	SLOMissed int
	// Rate is Connected/Attempted (0 with nothing attempted); CILow and
	// CIHigh are its 95% Wilson interval, on the pooled clients.
	Rate, CILow, CIHigh float64
	// Passed: the pooled rate reached the threshold (Passes), no trial
	// errored, and none missed the run's SLOs under criterion traffic.
	Passed bool
	// ConnectP50 and ConnectP99 are the worst trial's: percentiles do not
	// pool exactly.
	ConnectP50, ConnectP99 float64
	// Failures counts clients by failed outcome class.
	Failures map[string]int
	// Steps counts the trials that were a staircase's steps
	// (result.Point.Cumulative), clients added on top of those held: a
	// count with a fresh point too is the fresh points' alone (Pool).
	Steps int
	// NonMonotonic: a larger tested count reached a higher success rate.
	// Success should not rise with load, so such a count was disturbed by
	// something other than capacity.
	NonMonotonic bool
}

// MissesSLOs is whether a count whose traffic phase missed its SLOs in
// missed of its trials misses them: when its median trial did, the
// worse of the middle two for an even number (one of one, one of two,
// two of three). A traffic phase is noisier than a connect, and a count
// re-tested after one noisy trial must be able to pass.
func MissesSLOs(missed, trials int) bool {
	return missed > 0 && missed >= (trials+1)/2
}

// Pool pools points by client count, in increasing order of clients,
// judging each count against threshold (DefaultThreshold when 0). A
// staircase's step at a count that also has a fresh point is left out:
// the fresh point, everything started for it, is the measurement of
// that count (a step is evidence that its clients were held at once).
func Pool(points []result.Point, threshold float64) []Count {
	if threshold <= 0 {
		threshold = DefaultThreshold
	}
	fresh := map[int]bool{}
	for _, p := range points {
		if !p.Cumulative {
			fresh[p.Clients] = true
		}
	}
	by := map[int]*Count{}
	for _, p := range points {
		if p.Cumulative && fresh[p.Clients] {
			continue
		}
		c := by[p.Clients]
		if c == nil {
			c = &Count{Clients: p.Clients, Failures: map[string]int{}}
			by[p.Clients] = c
		}
		c.Trials++
		if p.Cumulative {
			c.Steps++
		}
		c.Attempted += p.Attempted
		c.Connected += p.Connected
		if p.Error != "" {
			c.Errored = true
		}
		if p.Traffic.Failed() {
			c.SLOMissed++
		}
		c.ConnectP50 = max(c.ConnectP50, p.Connect.P50)
		c.ConnectP99 = max(c.ConnectP99, p.Connect.P99)
		for o, n := range p.Outcomes {
			if o != result.OutcomeOK {
				c.Failures[o] += n
			}
		}
	}
	out := make([]Count, 0, len(by))
	for _, c := range by {
		if c.Attempted > 0 {
			c.Rate = float64(c.Connected) / float64(c.Attempted)
		}
		c.CILow, c.CIHigh = Wilson(c.Connected, c.Attempted, Z95)
		c.SLOFailed = MissesSLOs(c.SLOMissed, c.Trials)
		c.Passed = !c.Errored && !c.SLOFailed && Passes(c.Connected, c.Attempted, threshold)
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Clients < out[j].Clients })
	for i := range out {
		if out[i].Attempted == 0 {
			continue
		}
		for _, larger := range out[i+1:] {
			if larger.Attempted > 0 && larger.Rate > out[i].Rate {
				out[i].NonMonotonic = true
				break
			}
		}
	}
	return out
}
