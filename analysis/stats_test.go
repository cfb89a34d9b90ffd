package analysis

import (
	"math"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

func TestWilson(t *testing.T) {
	// 81/263, 15/148, 0/20 and 1/29 are Newcombe (1998), Stat Med 17:857,
	// table I, method 3, to four places; the rest were computed
	// independently from the closed form (Python, five places).
	tests := []struct {
		k, n   int
		lo, hi float64
	}{
		{0, 10, 0, 0.27753},
		{10, 10, 0.72247, 1},
		{5, 10, 0.23659, 0.76341},
		{1, 1, 0.20655, 1},
		{368, 400, 0.88925, 0.94276},
		{450, 450, 0.99154, 1},
		{0, 0, 0, 1},
		{81, 263, 0.2553, 0.3662},
		{15, 148, 0.0624, 0.1605},
		{0, 20, 0, 0.1611},
		{1, 29, 0.0061, 0.1718},
	}
	for _, tt := range tests {
		lo, hi := Wilson(tt.k, tt.n, Z95)
		if math.Abs(lo-tt.lo) > 6e-5 || math.Abs(hi-tt.hi) > 6e-5 {
			t.Errorf("Wilson(%d, %d) = [%.5f, %.5f], want [%.5f, %.5f]", tt.k, tt.n, lo, hi, tt.lo, tt.hi)
		}
	}
}

func TestJudge(t *testing.T) {
	tests := []struct {
		name      string
		p         result.Point
		threshold float64
		rate      float64
		passed    bool
	}{
		{"all connected", result.Point{Attempted: 450, Connected: 450}, 1, 1, true},
		{"one short of 100%", result.Point{Attempted: 451, Connected: 450}, 1, 450.0 / 451, false},
		{"exactly at 95%", result.Point{Attempted: 20, Connected: 19}, 0.95, 0.95, true},
		{"just below 95%", result.Point{Attempted: 400, Connected: 368}, 0.95, 0.92, false},
		{"nothing attempted", result.Point{}, 1, 0, false},
		{"point error fails whatever the counts", result.Point{Attempted: 10, Connected: 10, Error: "server exited"}, 1, 1, false},
	}
	for _, tt := range tests {
		p := tt.p
		Judge(&p, tt.threshold)
		lo, hi := Wilson(p.Connected, p.Attempted, Z95)
		if math.Abs(p.SuccessRate-tt.rate) > 1e-12 || p.Passed != tt.passed || p.CILow != lo || p.CIHigh != hi {
			t.Errorf("%s: got rate %v passed %v CI [%v, %v], want rate %v passed %v CI [%v, %v]",
				tt.name, p.SuccessRate, p.Passed, p.CILow, p.CIHigh, tt.rate, tt.passed, lo, hi)
		}
	}
}

func TestPercentiles(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want result.Percentiles
	}{
		{"empty", nil, result.Percentiles{}},
		{"one", []float64{7}, result.Percentiles{N: 1, Min: 7, Mean: 7, P50: 7, P95: 7, P99: 7, Max: 7}},
		{"1..10 unsorted", []float64{10, 1, 9, 2, 8, 3, 7, 4, 6, 5},
			result.Percentiles{N: 10, Min: 1, Mean: 5.5, P50: 5.5, P95: 9.55, P99: 9.91, Max: 10}},
		{"NaN ignored", []float64{math.NaN(), 2, 4}, result.Percentiles{N: 2, Min: 2, Mean: 3, P50: 3, P95: 3.9, P99: 3.98, Max: 4}},
		{"1..101", seq(1, 101), result.Percentiles{N: 101, Min: 1, Mean: 51, P50: 51, P95: 96, P99: 100, Max: 101}},
	}
	for _, tt := range tests {
		in := append([]float64(nil), tt.in...)
		got := Percentiles(tt.in)
		if !closeP(got, tt.want) {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
		for i := range in {
			if in[i] != tt.in[i] && !math.IsNaN(in[i]) {
				t.Errorf("%s: input was modified", tt.name)
				break
			}
		}
	}
}

func TestPct(t *testing.T) {
	tests := []struct {
		r    float64
		how  rounding
		want string
	}{
		{1, nearest, "100"},
		{0, nearest, "0"},
		{0.92, nearest, "92"},
		{0.873, nearest, "87.3"},
		{0.8511111, nearest, "85.1"},
		{0.99996, nearest, "99.996"},
		{0.0004, nearest, "0.04"},
		{0.92, down, "92"},
		{0.92, up, "92"},
		{0.99154, down, "99.1"},
		{0.94276, up, "94.3"},
		{0.99999, down, "99.9"},
	}
	for _, tt := range tests {
		if got := pctNum(tt.r, tt.how); got != tt.want {
			t.Errorf("pctNum(%v, %v) = %q, want %q", tt.r, tt.how, got, tt.want)
		}
	}
}

func seq(a, b int) []float64 {
	var out []float64
	for i := a; i <= b; i++ {
		out = append(out, float64(i))
	}
	return out
}

func closeP(a, b result.Percentiles) bool {
	c := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return a.N == b.N && c(a.Min, b.Min) && c(a.Mean, b.Mean) && c(a.P50, b.P50) && c(a.P95, b.P95) && c(a.P99, b.P99) && c(a.Max, b.Max)
}

func TestFailAllowance(t *testing.T) {
	for _, c := range []struct {
		n         int
		threshold float64
		want      int
	}{{1000, 1, 0}, {1000, 0.95, 50}, {999, 0.95, 49}, {10, 0, 10}, {3, 0.9, 0}} {
		got := FailAllowance(c.n, c.threshold)
		if got != c.want {
			t.Errorf("FailAllowance(%d, %g) = %d, want %d", c.n, c.threshold, got, c.want)
		}
		if got < c.n && (!Passes(c.n-got, c.n, c.threshold) || Passes(c.n-got-1, c.n, c.threshold)) {
			t.Errorf("FailAllowance(%d, %g) = %d disagrees with Passes", c.n, c.threshold, got)
		}
	}
}
