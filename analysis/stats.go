package analysis

import (
	"math"
	"sort"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// Z95 is the two-sided 95% normal quantile used for every interval a run
// reports.
const Z95 = 1.959963984540054

// Wilson returns the Wilson score interval for successes out of n at normal
// quantile z. The Wilson interval is used rather than the normal
// approximation because capacity points sit at or near 100%, where the
// normal interval collapses to zero width and claims certainty it does not
// have. With n == 0 there is no evidence, so the interval is [0, 1].
func Wilson(successes, n int, z float64) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	if successes < 0 {
		successes = 0
	}
	if successes > n {
		successes = n
	}
	nf := float64(n)
	p := float64(successes) / nf
	z2 := z * z
	denom := 1 + z2/nf
	centre := (p + z2/(2*nf)) / denom
	half := z / denom * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	lo, hi = centre-half, centre+half
	// The closed form is exact at the ends; pin them so that 10/10 reads as
	// "…–100%" and not "…–99.99999999%".
	if successes == 0 {
		lo = 0
	}
	if successes == n {
		hi = 1
	}
	return math.Max(0, lo), math.Min(1, hi)
}

// DefaultThreshold is the success rate a count must reach when a run
// records none: every client.
const DefaultThreshold = 1.0

// FailAllowance is how many of n clients may fail while the point still
// passes threshold (Passes).
func FailAllowance(n int, threshold float64) int {
	need := int(math.Ceil(threshold*float64(n) - 1e-9))
	return min(n, max(0, n-need))
}

// Passes reports whether connected out of attempted reaches threshold. The
// comparison is done on counts with a small tolerance so that, for example,
// 19/20 passes a 0.95 threshold despite 0.95*20 not being exact in binary.
// It is the one pass rule: of a point, of pooled trials, of a search step.
func Passes(connected, attempted int, threshold float64) bool {
	if attempted <= 0 {
		return false
	}
	return float64(connected) >= threshold*float64(attempted)-1e-9
}

// Judge fills p's SuccessRate, CILow, CIHigh and Passed from Attempted
// and Connected. A point that carries an Error never passes: a server or
// generator that died is a failure of that client count, whatever the counts
// collected before it died say. A point with nothing attempted never passes
// either, nor does one whose traffic phase decides against it
// (result.Traffic.Failed).
func Judge(p *result.Point, threshold float64) {
	if p.Attempted > 0 {
		p.SuccessRate = float64(p.Connected) / float64(p.Attempted)
	} else {
		p.SuccessRate = 0
	}
	p.CILow, p.CIHigh = Wilson(p.Connected, p.Attempted, Z95)
	p.Passed = p.Error == "" && Passes(p.Connected, p.Attempted, threshold) && !p.Traffic.Failed()
}

// Percentiles summarises samples. Quantiles use linear interpolation between
// closest ranks (Hyndman & Fan type 7, the default of numpy and R), so the
// p50 of an even-sized sample is the mean of the two middle values. NaN
// samples are ignored; an empty sample gives the zero value.
func Percentiles(samples []float64) result.Percentiles {
	xs := make([]float64, 0, len(samples))
	sum := 0.0
	for _, v := range samples {
		if math.IsNaN(v) {
			continue
		}
		xs = append(xs, v)
		sum += v
	}
	if len(xs) == 0 {
		return result.Percentiles{}
	}
	sort.Float64s(xs)
	return result.Percentiles{
		N:    len(xs),
		Min:  xs[0],
		Mean: sum / float64(len(xs)),
		P50:  quantile(xs, 0.50),
		P95:  quantile(xs, 0.95),
		P99:  quantile(xs, 0.99),
		Max:  xs[len(xs)-1],
	}
}

// quantile expects sorted, non-empty xs.
func quantile(xs []float64, q float64) float64 {
	h := float64(len(xs)-1) * q
	i := int(math.Floor(h))
	if i >= len(xs)-1 {
		return xs[len(xs)-1]
	}
	return xs[i] + (h-float64(i))*(xs[i+1]-xs[i])
}
