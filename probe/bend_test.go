package probe

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// bendMeasure connects every client; its traffic phase, judged, misses
// the SLOs where missed says.
func bendMeasure(calls *[]string, missed func(n, trial int) bool) Measure {
	return func(_ context.Context, n, trial int) (result.Point, error) {
		*calls = append(*calls, strconv.Itoa(n))
		return result.Point{Attempted: n, Connected: n, Traffic: &result.Traffic{Judged: true, SLOPassed: !missed(n, trial)}}, nil
	}
}

// A first failure the traffic phase alone decided is re-tested with the
// count below it, and its median trial decides: one noisy trial invents
// no bend, and a real one stays.
func TestRampConfirmsBend(t *testing.T) {
	for _, tc := range []struct {
		name     string
		missed   func(n, trial int) bool
		capacity int
		first    int
	}{
		{"noise", func(n, trial int) bool { return n == 30 && trial == 1 }, 40, 0},
		{"bend", func(n, _ int) bool { return n >= 30 }, 20, 30},
	} {
		var calls []string
		s, _, err := Ramp(context.Background(), []int{10, 20, 30, 40}, Config{}, bendMeasure(&calls, tc.missed), nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.Capacity != tc.capacity || s.FirstFail != tc.first {
			t.Errorf("%s: capacity %d, first failure %d; want %d, %d (calls %v)", tc.name, s.Capacity, s.FirstFail, tc.capacity, tc.first, calls)
		}
		var bend []int
		for _, st := range s.Steps {
			if st.Note == NoteBend {
				bend = append(bend, st.Clients)
			}
		}
		if tc.name == "bend" && !slices.Equal(bend, []int{20, 20, 30, 30}) {
			t.Errorf("%s: re-tested %v, want 20 and 30 twice each", tc.name, bend)
		}
	}
}

// A failure by connect rate is not a bend: no re-test.
func TestRampNoBendRetestOnConnectFailure(t *testing.T) {
	m := func(_ context.Context, n, _ int) (result.Point, error) {
		c := n
		if n > 20 {
			c = 20
		}
		return result.Point{Attempted: n, Connected: c, Traffic: &result.Traffic{Judged: true, SLOPassed: true}}, nil
	}
	s, _, err := Ramp(context.Background(), []int{10, 20, 30}, Config{}, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range s.Steps {
		if st.Note == NoteBend {
			t.Errorf("re-tested %d after a connect failure", st.Clients)
		}
	}
}

// rateMeasure connects every client; its traffic phase, not judged,
// runs at rate(n, trial).
func rateMeasure(rate func(n, trial int) float64) Measure {
	return func(_ context.Context, n, trial int) (result.Point, error) {
		return result.Point{Attempted: n, Connected: n, Traffic: &result.Traffic{MsgRate: rate(n, trial)}}, nil
	}
}

// With an ε, a bend in the message rate is re-tested either side until
// three trials' medians decide it: a trial that fell to a third of the
// peak by noise leaves no bend, and a real fall stays.
func TestRampConfirmsRateBend(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate func(n, trial int) float64
		want []int // counts re-tested
		bend int
	}{
		{"noise", func(n, trial int) float64 {
			if n == 30 && trial == 1 {
				return 300
			}
			return 1000
		}, []int{20, 20, 30, 30}, 0},
		{"bend", func(n, _ int) float64 {
			if n >= 30 {
				return 100
			}
			return 1000
		}, []int{20, 20, 30, 30}, 30},
		{"none", func(n, _ int) float64 { return float64(n) }, nil, 0},
	} {
		s, pts, err := Ramp(context.Background(), []int{10, 20, 30, 40}, Config{Epsilon: 0.25}, rateMeasure(tc.rate), nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, st := range s.Steps {
			if st.Note == NoteBend {
				got = append(got, st.Clients)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: re-tested %v, want %v", tc.name, got, tc.want)
		}
		if b, _ := analysis.Bend(pts, 0.25); b.BendAt != tc.bend {
			t.Errorf("%s: bend at %d, want %d", tc.name, b.BendAt, tc.bend)
		}
	}
}
