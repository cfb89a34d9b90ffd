package analysis

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// NoteRetest is the result.Step.Note of a count the probe measured again
// because it contradicted a larger count; the verdict then says the
// failure held "also on re-test".
const NoteRetest = "re-test: non-monotonic"

// RateInversion finds a failing count whose success rate is credibly below
// a larger count's: the upper end of its 95% interval is under the lower end
// of the other's. Pass/fail alone misses this at a 100% threshold, where 85%
// at 450 and 98% at 500 are both just "failed". Only failing counts are
// considered because differences above the threshold change nothing the
// operator acts on. The widest gap is reported. cs is in increasing order
// of clients, as Pool returns it.
func RateInversion(cs []Count) (a, b Count, ok bool) {
	best := 0.0
	for i, x := range cs {
		if x.Attempted == 0 || x.Passed {
			continue
		}
		for _, y := range cs[i+1:] {
			if y.Attempted == 0 {
				continue
			}
			if gap := y.CILow - x.CIHigh; gap > best {
				best, a, b, ok = gap, x, y, true
			}
		}
	}
	return a, b, ok
}

// Pct formats a rate in 0..1 as a percentage with one decimal where needed,
// and more only when one decimal would round a non-perfect rate to 100% (or
// a non-zero one to 0%): at 25,000 clients 99.996% is not 100%. The probe's
// notes use it so that they read like the verdict.
func Pct(r float64) string {
	return pctNum(r, nearest) + "%"
}

type rounding int

const (
	nearest rounding = iota
	down
	up
)

// pctNum formats r as a percentage number. Interval ends round outward
// (down for the low end, up for the high end) so the printed interval always
// contains the computed one.
func pctNum(r float64, how rounding) string {
	if r >= 1 {
		return "100"
	}
	if r <= 0 {
		return "0"
	}
	const maxDigits = 4
	for d := 1; ; d++ {
		scale := math.Pow(10, float64(d))
		x := r * 100 * scale
		// The nudges keep exact decimals such as 0.92 from becoming 91.9 or
		// 92.1 through binary representation error.
		switch how {
		case down:
			x = math.Floor(x + 1e-6)
		case up:
			x = math.Ceil(x - 1e-6)
		default:
			x = math.Round(x)
		}
		x /= scale
		if (x > 0 && x < 100) || d == maxDigits {
			s := strconv.FormatFloat(x, 'f', d, 64)
			s = strings.TrimRight(s, "0")
			return strings.TrimSuffix(s, ".")
		}
	}
}

// DescribeResolution names a search's resolution (probe.Resolution,
// result.Search's ResolutionClients and ResolutionPercent): "2%" of the
// capacity, else "50 clients"; zero clients is one, adjacent counts.
func DescribeResolution(clients int, percent float64) string {
	if percent > 0 {
		return strconv.FormatFloat(percent, 'f', -1, 64) + "%"
	}
	n := max(1, clients)
	return Thousands(n) + " " + plural(n, "client", "clients")
}

// JoinCounts lists client counts in prose; long lists are abbreviated to
// their ends.
func JoinCounts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	case 2, 3, 4:
		return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
	}
	return fmt.Sprintf("%s, %s, …, %s (%d counts)", s[0], s[1], s[len(s)-1], len(s))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
