package server

import (
	"fmt"
	"sync"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// memPool is the one registered memory region of the pool and srq modes,
// carved into MaxClients send slots followed by MaxClients receive slots
// of MsgSize bytes each:
//
//	[send 0][send 1]...[send N-1][recv 0][recv 1]...[recv N-1]
//
// In pool mode client slot i owns send i and recv i. In srq mode the
// receive slots are the SRQs' buffers (buffer k, posted with wrID k, is
// recv k), and client slot i owns only send i. Registrations therefore do
// not grow with the number of clients: the region is registered once, at
// start, for the server's capacity.
type memPool struct {
	mr    fabric.MR
	msg   int
	slots int

	mu   sync.Mutex
	free []int // client slots not in use, as a stack
}

func newMemPool(pd fabric.PD, caps fabric.Caps, slots, msg int) (*memPool, error) {
	size := uint64(slots) * 2 * uint64(msg)
	if slots <= 0 || msg <= 0 || size/2/uint64(msg) != uint64(slots) || size > uint64(int(^uint(0)>>1)) {
		return nil, fmt.Errorf("memory pool of %d × 2 × %d bytes does not fit", slots, msg)
	}
	if caps.MaxMRSize > 0 && size > caps.MaxMRSize {
		return nil, fmt.Errorf("memory pool of %d bytes exceeds the device's max_mr_size %d: lower --max-clients or --msg-size", size, caps.MaxMRSize)
	}
	mr, err := pd.RegMR(int(size), fabric.AccessLocalWrite)
	if err != nil {
		return nil, fmt.Errorf("memory pool (%d bytes for %d clients): %w", size, slots, err)
	}
	p := &memPool{mr: mr, msg: msg, slots: slots, free: make([]int, slots)}
	for i := range p.free {
		p.free[i] = slots - 1 - i // slot 0 is handed out first
	}
	return p, nil
}

// get reserves a client slot. Admission bounds the clients by the slot
// count, so it fails only on a bug.
func (p *memPool) get() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) == 0 {
		return -1, fmt.Errorf("memory pool: all %d client slots in use", p.slots)
	}
	i := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	return i, nil
}

func (p *memPool) put(i int) {
	p.mu.Lock()
	p.free = append(p.free, i)
	p.mu.Unlock()
}

// sendOff and recvOff are the offsets of slot i's buffers in the region.
func (p *memPool) sendOff(i int) int { return i * p.msg }
func (p *memPool) recvOff(i int) int { return (p.slots + i) * p.msg }

func (p *memPool) close() {
	p.mr.Dereg()
}
