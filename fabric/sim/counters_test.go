package sim

import "testing"

// The cache keeps the most recently used contexts: a working set within
// it misses once per QP, one past it misses on every use in turn.
func TestQPCacheLRU(t *testing.T) {
	c := newQPCache(3)
	misses := func(qpns ...uint32) int {
		n := 0
		for _, q := range qpns {
			if c.touch(q) {
				n++
			}
		}
		return n
	}
	if n := misses(1, 2, 3, 1, 2, 3, 3); n != 3 {
		t.Errorf("3 QPs in a cache of 3: %d misses, want 3 (cold only)", n)
	}
	if n := misses(4); n != 1 {
		t.Errorf("a fourth QP: %d misses", n)
	}
	// 4 evicted 1 (the least recently used); 3 and 2 stay.
	if n := misses(3, 2); n != 0 {
		t.Errorf("recently used QPs missed %d times", n)
	}
	if n := misses(1, 4, 3, 1, 4, 3); n != 3 {
		t.Errorf("after 1's eviction: %d misses, want 3 (1 evicts 4, 4 evicts 3, 3 evicts 2)", n)
	}
	c = newQPCache(2)
	if n := misses(1, 2, 3, 1, 2, 3); n != 6 {
		t.Errorf("3 QPs in turn through a cache of 2: %d misses, want every use", n)
	}
}
