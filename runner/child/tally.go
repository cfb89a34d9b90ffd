package child

import (
	"maps"
	"sync"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// tally counts a generator's failed clients by outcome class as they
// end, for its "progress" events; safe for concurrent use, and a nil
// *tally counts nothing.
type tally struct {
	mu     sync.Mutex
	failed map[string]int
}

func (t *tally) add(rec *result.ClientRecord) {
	if rec.Outcome == result.OutcomeOK {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failed == nil {
		t.failed = map[string]int{}
	}
	t.failed[rec.Outcome]++
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
