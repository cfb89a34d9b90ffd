package client

import (
	"context"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/fabric/sim"
)

// Clients share registrations 64 pairs at a time, never share a buffer,
// reuse given-back pairs, deregister a region whose pairs are all back,
// and close deregisters every region.
func TestBufsShareRegistrations(t *testing.T) {
	p := sim.New(sim.Options{})
	dev, err := p.Open(context.Background(), fabric.DeviceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	const msg = 4096
	const depth = 3 // send buffers per client; receive buffers are twice that
	b := newBufs(pd, msg, depth, 0)
	type span struct {
		mr  fabric.MR
		off int
	}
	seen := map[span]bool{}
	var pairs []bufPair
	for i := 0; i < SlabClients+1; i++ {
		q, err := b.get()
		if err != nil {
			t.Fatal(err)
		}
		var offs []int
		for j := 0; j < depth; j++ {
			offs = append(offs, q.sendOff(j))
		}
		for j := 0; j < 2*depth; j++ {
			offs = append(offs, q.recvOff(j))
		}
		for _, off := range offs {
			if off < 0 || off+msg > len(q.mr.Buf()) {
				t.Fatalf("pair %d: buffer at %d of %d-byte region", i, off, len(q.mr.Buf()))
			}
			if seen[span{q.mr, off}] {
				t.Fatalf("pair %d: buffer at %d handed out twice", i, off)
			}
			seen[span{q.mr, off}] = true
		}
		pairs = append(pairs, q)
	}
	if got := p.InUse()["mr"]; got != 2 {
		t.Errorf("%d MRs for %d clients, want 2", got, SlabClients+1)
	}
	b.put(pairs[3])
	if q, err := b.get(); err != nil || q != pairs[3] {
		t.Errorf("after giving pair 3 back got %+v, %v; want it again", q, err)
	}
	if got := p.InUse()["mr"]; got != 2 {
		t.Errorf("%d MRs after reuse, want still 2", got)
	}
	// The second region holds one pair: giving it back deregisters it.
	b.put(pairs[SlabClients])
	if got := p.InUse()["mr"]; got != 1 {
		t.Errorf("%d MRs after the last pair of a region came back, want 1", got)
	}
	if err := b.close(); err != nil {
		t.Fatal(err)
	}
	if got := p.InUse()["mr"]; got != 0 {
		t.Errorf("%d MRs after close, want 0", got)
	}
}
