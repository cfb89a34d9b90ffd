package analysis

import (
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// capped is a point of n clients on a device that holds held of them,
// the rest refused as rxe refuses a full QP pool.
func capped(n, held int) result.Point {
	p := pt(n, held)
	for i := range n {
		r := result.ClientRecord{ID: i, Outcome: result.OutcomeOK}
		if i >= held {
			r.Outcome, r.Errno = result.OutcomeQPCreate, "EINVAL"
		}
		p.Records = append(p.Records, r)
	}
	return p
}

// No recommendation reaches the smallest count a hard limit refused a
// client at, unless it passed: 201 reached ≥95% but a 200-QP device
// refused a client there (issue 49, case 2).
func TestPracticalStopsAtTheWall(t *testing.T) {
	run := &result.Run{Config: result.Config{Threshold: 1},
		Points: []result.Point{capped(50, 50), capped(300, 200), capped(200, 200), capped(201, 200)}}
	f := Analyse(run)
	if f.Wall != 201 || f.Practical != 200 || f.Highest95 != 201 {
		t.Errorf("wall %d, practical %d, highest ≥95%% %d; want 201, 200, 201", f.Wall, f.Practical, f.Highest95)
	}
	for _, r := range f.Recommendations {
		if strings.Contains(r, "201 (") || strings.Contains(r, "= 201") {
			t.Errorf("recommends 201: %q", r)
		}
	}
	// At a 99% threshold 201 passed: the wall's own count may be advised.
	run.Config.Threshold = 0.99
	if f := Analyse(run); f.Practical != 201 {
		t.Errorf("at 99%%, 201 passed yet practical is %d", f.Practical)
	}
	// A timeout is no wall: the ≥95% prefix goes on.
	slow := pt(201, 200)
	slow.Records = []result.ClientRecord{{Outcome: result.OutcomeTimeout}}
	run = &result.Run{Config: result.Config{Threshold: 1}, Points: []result.Point{capped(200, 200), slow}}
	if f := Analyse(run); f.Wall != 0 || f.Practical != 201 {
		t.Errorf("timeouts: wall %d, practical %d; want none, 201", f.Wall, f.Practical)
	}
}
