package server

import (
	"testing"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// Clients spread evenly over the fewest groups whose CQs hold them.
func TestGroupSize(t *testing.T) {
	rxe := fabric.Caps{MaxCQE: 32767}
	for _, c := range []struct {
		caps           fabric.Caps
		max, wr, wantN int
	}{
		{rxe, 10000, UDBuffers, 5000}, // 2 groups, not 8,191 + 1,809
		{rxe, 8191, UDBuffers, 8191},  // fits one group
		{rxe, 8192, UDBuffers, 4096},
		{rxe, 70000, 2, 14000}, // 5 groups of at most 16,383
		{rxe, 300, 2, 300},
		{fabric.Caps{}, 300, 2, 300}, // max_cqe unknown: one group
		{fabric.Caps{MaxCQE: 1}, 300, 2, 300},
	} {
		got := groupSize(c.caps, c.max, c.wr)
		if got != c.wantN {
			t.Errorf("groupSize(max_cqe %d, %d clients, %d WRs) = %d, want %d", c.caps.MaxCQE, c.max, c.wr, got, c.wantN)
		}
		if c.caps.MaxCQE/c.wr > 0 && got*c.wr > c.caps.MaxCQE {
			t.Errorf("groups of %d overflow max_cqe %d at %d WRs each", got, c.caps.MaxCQE, c.wr)
		}
	}
}
