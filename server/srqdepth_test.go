package server

import (
	"testing"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// An SRQ holds two buffers per message its group can have outstanding,
// at least MinSRQDepth, bounded by the configured depth (or the default)
// unless SRQDepthAll, and by max_srq_wr.
func TestSRQDepth(t *testing.T) {
	for _, tt := range []struct {
		maxWR, outstanding, want, got int
	}{
		{0, 1, 0, MinSRQDepth},
		{0, 1, SRQDepthAll, MinSRQDepth},
		{0, 1, 1, 1},
		{0, 100, 0, 200},
		{0, 10000, 0, DefaultSRQDepth},
		{0, 10000, SRQDepthAll, 20000},
		{0, 10000, -7, DefaultSRQDepth},
		{16384, 10000, SRQDepthAll, 16384},
		{0, 10000, 3000, 3000},
	} {
		if got := srqDepth(fabric.Caps{MaxSRQWR: tt.maxWR}, tt.outstanding, tt.want); got != tt.got {
			t.Errorf("max_srq_wr %d, %d outstanding, want %d: %d buffers, want %d", tt.maxWR, tt.outstanding, tt.want, got, tt.got)
		}
	}
}
