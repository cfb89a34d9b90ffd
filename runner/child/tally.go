package child

import (
	"maps"
	"slices"
	"sync"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// tally counts a generator's failed clients by outcome class as they
// end, for its "progress" events; safe for concurrent use, and a nil
// *tally counts nothing.
type tally struct {
	mu     sync.Mutex
	failed map[string]int
	phases map[string][]int // per phase, clients by result.PhaseBucket
}

func (t *tally) add(rec *result.ClientRecord) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for ph, us := range rec.PhasesUS {
		if t.phases == nil {
			t.phases = map[string][]int{}
		}
		if t.phases[ph] == nil {
			t.phases[ph] = make([]int, len(result.PhaseBounds)+1)
		}
		t.phases[ph][result.PhaseBucket(us)]++
	}
	if rec.Outcome == result.OutcomeOK {
		return
	}
	if t.failed == nil {
		t.failed = map[string]int{}
	}
	t.failed[rec.Outcome]++
}

// phaseCounts is a copy of the phases' bucket counts so far.
func (t *tally) phaseCounts() map[string][]int {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var out map[string][]int
	for ph, c := range t.phases {
		if out == nil {
			out = make(map[string][]int, len(t.phases))
		}
		out[ph] = slices.Clone(c)
	}
	return out
}

// counts is a copy of the counts so far (nil when none failed).
func (t *tally) counts() map[string]int {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.failed)
}
