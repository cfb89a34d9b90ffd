package analysis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// NoteRetest is the result.Step.Note of a count the probe measured again
// because it contradicted a larger count; the verdict then says the
// failure held "also on re-test".
const NoteRetest = "re-test: non-monotonic"

// Verdict states in one sentence what s concluded, with the pooled rates and
// 95% Wilson intervals recomputed from points, so that a saved run can be
// re-rendered from its JSON alone. lo and hi are the search bounds (hi 0 for
// an exponential search); pass lo = hi = 0 for a ramp.
func Verdict(s result.Search, points []result.Point, lo, hi int, threshold float64) string {
	if threshold <= 0 {
		threshold = DefaultThreshold
	}
	ps := Pool(points, threshold)
	by := map[int]pooled{}
	for _, c := range ps {
		by[c.Clients] = pooled{Count: c}
	}
	// The sentence should survive a run saved without its points.
	retested := map[int]bool{}
	for _, st := range s.Steps {
		if q, ok := by[st.Clients]; !ok || q.fromStep {
			by[st.Clients] = pooled{Count: Count{Clients: st.Clients}, stepRate: st.Rate, stepPassed: st.Passed, fromStep: true}
		}
		if st.Note == NoteRetest {
			retested[st.Clients] = true
		}
	}
	if len(by) == 0 {
		return "No client count was measured."
	}
	thr := Pct(threshold)
	at := ""
	if threshold < 1 {
		at = " at the " + thr + " threshold"
	}
	var parts []string
	switch {
	case s.AboveHi && lo == 0 && hi == 0:
		parts = append(parts, fmt.Sprintf("Every tested client count passed%s: up to %d clients connect at %s", at, s.Capacity, by[s.Capacity].describe()))
	case s.AboveHi && hi > 0:
		parts = append(parts, fmt.Sprintf("Capacity > %d: every tested N in [%d, %d] passed%s", hi, lo, hi, at),
			fmt.Sprintf("%d clients connect at %s", s.Capacity, by[s.Capacity].describe()))
	case s.AboveHi:
		parts = append(parts, fmt.Sprintf("Capacity ≥ %d, the search limit: every tested N from %d up passed%s", s.Capacity, lo, at),
			fmt.Sprintf("%d clients connect at %s", s.Capacity, by[s.Capacity].describe()))
	case s.Capacity == 0 && s.FirstFail > 0 && lo > 0:
		parts = append(parts, fmt.Sprintf("Capacity < %d: %d clients connect at %s, %s; try a lower --lo",
			s.FirstFail, s.FirstFail, by[s.FirstFail].describe(), by[s.FirstFail].why(threshold)))
	case s.Capacity == 0 && s.FirstFail > 0:
		// Not "nothing passed": a larger count may have, which the
		// non-monotonic clause below then names.
		parts = append(parts, fmt.Sprintf("Capacity < %d: %d clients connect at %s, %s",
			s.FirstFail, s.FirstFail, by[s.FirstFail].describe(), by[s.FirstFail].why(threshold)))
	case s.Capacity > 0 && s.FirstFail > 0:
		gap := ""
		if s.FirstFail > s.Capacity+1 {
			gap = ", nothing tested in between"
			if s.ResolutionClients != 0 || s.ResolutionPercent != 0 {
				gap += fmt.Sprintf(": a bracket of %s %s (%s of the capacity), within the resolution of %s asked",
					Thousands(s.FirstFail-s.Capacity), plural(s.FirstFail-s.Capacity, "client", "clients"),
					Pct(float64(s.FirstFail-s.Capacity)/float64(s.Capacity)), DescribeResolution(s.ResolutionClients, s.ResolutionPercent))
			}
		}
		// A ramp only brackets the breaking point between two listed
		// counts, so it states a capacity rather than a breaking point.
		label := "Breaking point"
		if lo == 0 && hi == 0 {
			label = "Capacity"
		}
		parts = append(parts, fmt.Sprintf("%s%s: %d clients connect at %s", label, at, s.Capacity, by[s.Capacity].describe()),
			fmt.Sprintf("%d is the first failure (%s)%s", s.FirstFail, by[s.FirstFail].failure(threshold), gap))
	default:
		return "No conclusion: nothing passed and nothing failed."
	}
	if len(s.NonMonotonic) > 0 {
		// Name the largest count that passed: it is the strongest evidence
		// that the failures below it are not the whole story.
		top := 0
		for n, q := range by {
			if n > top && q.ok() {
				top = n
			}
		}
		verb := "failed"
		for _, n := range s.NonMonotonic {
			if retested[n] {
				verb = "failed, also on re-test"
			}
		}
		parts = append(parts, fmt.Sprintf("not monotonic: %d passed (%s) although %s %s, so the capacity stated is the conservative one",
			top, Pct(by[top].rate()), JoinCounts(s.NonMonotonic), verb))
	} else if a, b, ok := RateInversion(ps); ok {
		parts = append(parts, fmt.Sprintf("the success rate is not monotonic in N: %d clients reached %s but %d reached %s (95%% intervals disjoint)",
			a.Clients, Pct(a.Rate), b.Clients, Pct(b.Rate)))
	}
	return strings.Join(parts, "; ") + "."
}

// Interrupted is the verdict of a probe that stopped before concluding; it
// claims only what the points measured so far show: capacity and first are
// the probe's bracket so far by threshold, err why it stopped.
func Interrupted(points []result.Point, capacity, first int, threshold float64, err error) string {
	why := "stopped by an error"
	switch {
	case errors.Is(err, context.Canceled):
		why = "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		why = "timed out"
	}
	rate := map[int]float64{}
	for _, c := range Pool(points, threshold) {
		rate[c.Clients] = c.Rate
	}
	head := fmt.Sprintf("Interrupted (%s) after %d %s", why, len(points), plural(len(points), "point", "points"))
	switch {
	case capacity > 0 && first > 0:
		return fmt.Sprintf("%s: so far %d passed and %d failed (%s); no breaking point stated.", head, capacity, first, Pct(rate[first]))
	case capacity > 0:
		return fmt.Sprintf("%s: so far every tested count up to %d passed; no breaking point stated.", head, capacity)
	case first > 0:
		return fmt.Sprintf("%s: %d failed (%s); no breaking point stated.", head, first, Pct(rate[first]))
	}
	return head + "; nothing to conclude."
}

// pooled is one client count as the verdict knows it: from its points, or
// from its search step when the run was saved without them.
type pooled struct {
	Count
	// stepRate and stepPassed stand in when only a Step, not the points,
	// is known.
	stepRate   float64
	stepPassed bool
	fromStep   bool
}

func (q pooled) ok() bool {
	if q.fromStep {
		return q.stepPassed
	}
	return q.Passed
}

func (q pooled) rate() float64 {
	if q.fromStep {
		return q.stepRate
	}
	return q.Rate
}

// why says what failed a count: its connect rate, or, when its clients
// connected at the threshold, its traffic phase (--criterion traffic).
func (q pooled) why(threshold float64) string {
	if !q.fromStep && q.SLOFailed && Passes(q.Connected, q.Attempted, threshold) {
		return "but its traffic phase missed the SLOs"
	}
	return "below the " + Pct(threshold) + " threshold"
}

// failure is the first failure's parenthesis: its connect rate, and the
// SLOs when they, not the rate, failed it.
func (q pooled) failure(threshold float64) string {
	if !q.fromStep && q.SLOFailed && Passes(q.Connected, q.Attempted, threshold) {
		return Pct(q.rate()) + " connected; its traffic phase missed the SLOs"
	}
	return Pct(q.rate())
}

// describe is "100% (95% CI 99.2–100%)", with the trial count when pooled.
func (q pooled) describe() string {
	if q.fromStep {
		return Pct(q.stepRate)
	}
	tr := ""
	if q.Trials > 1 {
		tr = fmt.Sprintf(", %d trials", q.Trials)
	}
	return fmt.Sprintf("%s (95%% CI %s–%s%%%s)", Pct(q.rate()), pctNum(q.CILow, down), pctNum(q.CIHigh, up), tr)
}

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
