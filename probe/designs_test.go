package probe

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// walls measures each design against its own capacity and logs the
// order of the measurements as "design n".
type walls struct {
	cap   map[string]int
	order []string
	fail  string // a design whose measurements return an error
}

func (w *walls) measure(ctx context.Context, design string, n, trial int) (result.Point, error) {
	w.order = append(w.order, fmt.Sprintf("%s %d", design, n))
	if design == w.fail {
		return result.Point{}, errors.New("generator lost")
	}
	return result.Point{Attempted: n, Connected: min(n, w.cap[design])}, nil
}

// A ramp over two designs measures both at each count before the next
// count, and keeps one verdict per design.
func TestRampDesignsTakeTurnsAtEachCount(t *testing.T) {
	w := &walls{cap: map[string]int{"per-client": 10, "srq": 100}}
	var decisions []string
	searches, points, err := RampDesigns(context.Background(), []string{"per-client", "srq"}, []int{10, 20}, Config{Threshold: 1, Retests: -1},
		w.measure, func(ev Event) {
			if ev.Kind == EventDecision {
				decisions = append(decisions, fmt.Sprintf("%s %d", ev.Design, ev.Step.Clients))
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"per-client 10", "srq 10", "per-client 20", "srq 20"}
	if !reflect.DeepEqual(w.order, want) || !reflect.DeepEqual(decisions, want) {
		t.Errorf("measured %v, decisions %v; want %v", w.order, decisions, want)
	}
	var got []string
	for _, p := range points {
		got = append(got, fmt.Sprintf("%s %d", p.Design, p.Clients))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("points %v, want %v", got, want)
	}
	if len(searches) != 2 || searches[0].Capacity != 10 || searches[0].FirstFail != 20 || searches[1].Capacity != 20 || !searches[1].AboveHi {
		t.Errorf("searches %+v", searches)
	}
}

// Two designs with different walls: each search finds its own, the
// searches take turns while both go on, and the one that goes on longer
// finishes alone.
func TestSearchDesignsFindEachWallInTurns(t *testing.T) {
	w := &walls{cap: map[string]int{"per-client": 15, "srq": 40}}
	searches, points, err := SearchDesigns(context.Background(), []string{"per-client", "srq"}, Config{Lo: 10, Hi: 64, Threshold: 1}, w.measure, nil)
	if err != nil {
		t.Fatal(err)
	}
	if searches[0].Capacity != 15 || searches[0].FirstFail != 16 || searches[1].Capacity != 40 || searches[1].FirstFail != 41 {
		t.Fatalf("per-client %d/%d, srq %d/%d; want 15/16 and 40/41", searches[0].Capacity, searches[0].FirstFail, searches[1].Capacity, searches[1].FirstFail)
	}
	if want := []string{"per-client 10", "srq 10", "per-client 64", "srq 64"}; !reflect.DeepEqual(w.order[:4], want) {
		t.Errorf("first measurements %v, want %v", w.order[:4], want)
	}
	// While both search, no design measures twice in a row.
	last := map[string]int{}
	for i, p := range points {
		last[p.Design] = i
	}
	end := min(last["per-client"], last["srq"])
	for i := 1; i <= end; i++ {
		if points[i].Design == points[i-1].Design {
			t.Errorf("points %d and %d are both %s while both designs searched: %v", i-1, i, points[i].Design, w.order)
		}
	}
	if len(points) != len(w.order) {
		t.Errorf("%d points for %d measurements", len(points), len(w.order))
	}
}

// A design whose measurement fails stops every search, and the error
// returned is that failure, not the others being stopped for it.
func TestSearchDesignsStopOnTheFirstError(t *testing.T) {
	w := &walls{cap: map[string]int{"per-client": 15}, fail: "srq"}
	_, _, err := SearchDesigns(context.Background(), []string{"per-client", "srq"}, Config{Lo: 10, Hi: 64, Threshold: 1}, w.measure, nil)
	if err == nil || err.Error() != "measure 10 clients (trial 1): generator lost" {
		t.Fatalf("error %v", err)
	}
	if want := []string{"per-client 10", "srq 10"}; !reflect.DeepEqual(w.order, want) {
		t.Errorf("measured %v, want %v", w.order, want)
	}
}
