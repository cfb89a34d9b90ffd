package protocol

import "testing"

// --cm-steps auto steps in lockstep only where every connection of a
// generator starts at once; lockstep and interleaved are what they say.
func TestCMClientLockstep(t *testing.T) {
	for _, c := range []struct {
		steps    string
		n, in    int
		rate     float64
		lockstep bool
	}{
		{"", 1000, 1000, 0, true},
		{"", 1000, 0, 0, true},
		{"", 200, 256, 0, true},
		{"", 1000, 500, 0, false},
		{"", 1000, 1000, 50, false},
		{CMStepsLockstep, 1000, 10, 0, true},
		{CMStepsInterleaved, 1000, 1000, 0, false},
	} {
		cm := &CMClient{Steps: c.steps}
		if got := cm.Lockstep(c.n, c.in, c.rate); got != c.lockstep {
			t.Errorf("steps %q, %d clients, window %d, rate %g: lockstep %v, want %v", c.steps, c.n, c.in, c.rate, got, c.lockstep)
		}
	}
}
