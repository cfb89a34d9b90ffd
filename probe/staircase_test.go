package probe

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// fakeStair holds up to wall clients per design: a step past it
// connects only that many, as a fresh point does. It logs every call.
type fakeStair struct {
	wall  int
	held  map[string]int
	calls []string
	// cut, if set, cancels the run when a climb reaches it.
	cut    int
	cancel context.CancelFunc
}

func (f *fakeStair) stair() Stair {
	return Stair{
		Climb: func(ctx context.Context, d string, n, top int) (result.Point, error) {
			f.calls = append(f.calls, fmt.Sprintf("%s climb %d/%d", d, n, top))
			if n == f.cut {
				f.cancel()
				return result.Point{Clients: n, Interrupted: true}, ctx.Err()
			}
			f.held[d] = min(n, f.wall)
			return result.Point{Clients: n, Attempted: n, Connected: f.held[d], Cumulative: true}, nil
		},
		Descend: func(d string) error {
			f.calls = append(f.calls, d+" descend")
			f.held[d] = 0
			return nil
		},
	}
}

func (f *fakeStair) measure(_ context.Context, d string, n, trial int) (result.Point, error) {
	f.calls = append(f.calls, fmt.Sprintf("%s fresh %d", d, n))
	return result.Point{Clients: n, Attempted: n, Connected: min(n, f.wall)}, nil
}

func TestStaircase(t *testing.T) {
	for _, tc := range []struct {
		name    string
		designs []string
		wall    int
		calls   []string
		points  []string
		cap     int
		first   int
	}{
		{name: "a wall between steps", designs: []string{"srq"}, wall: 25,
			calls:  []string{"srq climb 10/40", "srq climb 20/40", "srq climb 30/40", "srq descend", "srq fresh 25"},
			points: []string{"10 step pass", "20 step pass", "30 step fail", "25 fresh pass"}, cap: 25, first: 30},
		{name: "a wall at a step's count", designs: []string{"srq"}, wall: 20,
			calls:  []string{"srq climb 10/40", "srq climb 20/40", "srq climb 30/40", "srq descend", "srq fresh 20"},
			points: []string{"10 step pass", "20 step pass", "30 step fail", "20 fresh pass"}, cap: 20, first: 30},
		{name: "no wall: the top confirmed", designs: []string{"srq"}, wall: 100,
			calls:  []string{"srq climb 10/40", "srq climb 20/40", "srq climb 30/40", "srq climb 40/40", "srq descend", "srq fresh 40"},
			points: []string{"10 step pass", "20 step pass", "30 step pass", "40 step pass", "40 fresh pass"}, cap: 40},
		{name: "designs in turn", designs: []string{"srq", "ud"}, wall: 15,
			calls: []string{"srq climb 10/40", "srq climb 20/40", "srq descend", "srq fresh 15",
				"ud climb 10/40", "ud climb 20/40", "ud descend", "ud fresh 15"},
			points: []string{"10 step pass", "20 step fail", "15 fresh pass", "10 step pass", "20 step fail", "15 fresh pass"}, cap: 15, first: 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeStair{wall: tc.wall, held: map[string]int{}}
			srch, points, err := Staircase(context.Background(), tc.designs, []int{10, 20, 30, 40}, Config{Threshold: 1}, f.stair(), f.measure, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.calls, tc.calls) {
				t.Errorf("calls\n got %v\nwant %v", f.calls, tc.calls)
			}
			var ps []string
			for _, p := range points {
				kind, pass := "fresh", "fail"
				if p.Cumulative {
					kind = "step"
				}
				if p.Passed {
					pass = "pass"
				}
				ps = append(ps, fmt.Sprintf("%d %s %s", p.Clients, kind, pass))
			}
			if !reflect.DeepEqual(ps, tc.points) {
				t.Errorf("points\n got %v\nwant %v", ps, tc.points)
			}
			for _, s := range srch {
				if s.Capacity != tc.cap || s.FirstFail != tc.first {
					t.Errorf("capacity %d, first failure %d: want %d, %d", s.Capacity, s.FirstFail, tc.cap, tc.first)
				}
				if last := s.Steps[len(s.Steps)-1]; last.Note != NoteConfirm {
					t.Errorf("last step %+v: want the confirmation", last)
				}
			}
		})
	}
}

// Cut short mid-climb: the climb is released and the run stops, with
// no confirming point.
func TestStaircaseInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fakeStair{wall: 100, held: map[string]int{}, cut: 30, cancel: cancel}
	_, points, err := Staircase(ctx, []string{"srq"}, []int{10, 20, 30, 40}, Config{Threshold: 1}, f.stair(), f.measure, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want the cancellation", err)
	}
	if want := []string{"srq climb 10/40", "srq climb 20/40", "srq climb 30/40", "srq descend"}; !reflect.DeepEqual(f.calls, want) {
		t.Errorf("calls %v, want %v", f.calls, want)
	}
	if len(points) != 2 {
		t.Errorf("%d points kept, want the 2 steps before the cut", len(points))
	}
}

func TestStaircaseRefuses(t *testing.T) {
	f := &fakeStair{wall: 100, held: map[string]int{}}
	for _, tc := range []struct {
		steps  []int
		trials int
		want   string
	}{
		{[]int{10, 20}, 3, "one pass"},
		{[]int{10, 10}, 1, "must increase: 10 after 10"},
		{[]int{0, 10}, 1, "at least 1"},
		{nil, 1, "no steps"},
	} {
		_, _, err := Staircase(context.Background(), []string{"srq"}, tc.steps, Config{Trials: tc.trials}, f.stair(), f.measure, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("steps %v, trials %d: %v, want %q", tc.steps, tc.trials, err, tc.want)
		}
	}
	if len(f.calls) != 0 {
		t.Errorf("calls %v: want nothing run", f.calls)
	}
}
