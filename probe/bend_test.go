package probe

import (
	"context"
	"slices"
	"strconv"
	"testing"

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
