package server

import (
	"fmt"
	"sync"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// memPool is the one registered memory region of the pool and srq modes,
// registered once, at start, so registrations do not grow with the number
// of clients. It is carved into buffers of MsgSize bytes:
//
//	pool: [send 0][send 1]...[send N·D-1][recv 0][recv 1]...[recv N·D-1]
//	srq:  [buf 0][buf 1]...[buf B-1]
//
// In pool mode client slot i owns sends and receives i·D to i·D+D-1 (N =
// --max-clients, D = Config.Depth, the messages a client may have
// outstanding).
// In srq mode there are no client slots: the B buffers are the SRQs'
// receive buffers (each group's SRQ owns a range of them), and an echo is
// sent from the buffer it arrived in, so B is sized to what can be in
// flight, not to N (see the package documentation).
type memPool struct {
	mr    fabric.MR
	msg   int
	slots int // pool mode: client slots; srq mode: 0
	depth int // pool mode: buffers of each kind per client slot

	mu   sync.Mutex
	free []int // client slots not in use, as a stack
}

// newMemPool registers slots client slots of depth send and depth
// receive buffers each (pool mode).
func newMemPool(pd fabric.PD, caps fabric.Caps, slots, depth, msg int) (*memPool, error) {
	p, err := registerPool(pd, caps, 2*slots*depth, msg, fmt.Sprintf("for %d clients", slots))
	if err != nil {
		return nil, err
	}
	p.slots, p.depth = slots, depth
	p.free = make([]int, slots)
	for i := range p.free {
		p.free[i] = slots - 1 - i // slot 0 is handed out first
	}
	return p, nil
}

// newBufPool registers bufs receive buffers for the SRQs (srq mode).
func newBufPool(pd fabric.PD, caps fabric.Caps, bufs, msg int) (*memPool, error) {
	return registerPool(pd, caps, bufs, msg, fmt.Sprintf("for %d SRQ buffers", bufs))
}

func registerPool(pd fabric.PD, caps fabric.Caps, bufs, msg int, what string) (*memPool, error) {
	size := uint64(bufs) * uint64(msg)
	if bufs <= 0 || msg <= 0 || size/uint64(msg) != uint64(bufs) || size > uint64(int(^uint(0)>>1)) {
		return nil, fmt.Errorf("memory pool of %d × %d bytes does not fit", bufs, msg)
	}
	if caps.MaxMRSize > 0 && size > caps.MaxMRSize {
		return nil, fmt.Errorf("memory pool of %d bytes (%s) exceeds the device's max_mr_size %d: lower --max-clients or --msg-size", size, what, caps.MaxMRSize)
	}
	mr, err := pd.RegMR(int(size), fabric.AccessLocalWrite)
	if err != nil {
		return nil, fmt.Errorf("memory pool (%d bytes %s): %w", size, what, err)
	}
	return &memPool{mr: mr, msg: msg}, nil
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

// sendOff and recvOff are the offsets of client slot i's first buffers
// in the region (pool mode); its others follow.
func (p *memPool) sendOff(i int) int { return i * p.depth * p.msg }
func (p *memPool) recvOff(i int) int { return (p.slots + i) * p.depth * p.msg }

// bufOff is the offset of buffer k (srq mode).
func (p *memPool) bufOff(k int) int { return k * p.msg }

// buf is buffer k's first n bytes (srq mode).
func (p *memPool) buf(k, n int) []byte {
	off := p.bufOff(k)
	return p.mr.Buf()[off : off+n]
}

func (p *memPool) close() {
	p.mr.Dereg()
}

// region is the buffer of Config.Remote: one registration at start with
// remote write and read, a slice of per bytes for each client slot.
type region struct {
	mr   fabric.MR
	per  int
	mu   sync.Mutex
	free []int // slots not in use, as a stack
}

func newRegion(pd fabric.PD, caps fabric.Caps, slots, per int) (*region, error) {
	size := uint64(slots) * uint64(per)
	if slots <= 0 || per <= 0 || size/uint64(per) != uint64(slots) || size > uint64(int(^uint(0)>>1)) {
		return nil, fmt.Errorf("remote buffer of %d × %d bytes does not fit", slots, per)
	}
	if caps.MaxMRSize > 0 && size > caps.MaxMRSize {
		return nil, fmt.Errorf("remote buffer of %d bytes exceeds the device's max_mr_size %d: lower --max-clients, --depth or --msg-size", size, caps.MaxMRSize)
	}
	mr, err := pd.RegMR(int(size), fabric.AccessLocalWrite|fabric.AccessRemoteWrite|fabric.AccessRemoteRead)
	if err != nil {
		return nil, fmt.Errorf("remote buffer (%d bytes for %d clients): %w", size, slots, err)
	}
	r := &region{mr: mr, per: per, free: make([]int, slots)}
	for i := range r.free {
		r.free[i] = slots - 1 - i
	}
	return r, nil
}

// get reserves a client's slice; admission bounds the clients by the
// slots, so it fails only on a bug.
func (r *region) get() (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.free) == 0 {
		return -1, fmt.Errorf("remote buffer: every client slot in use")
	}
	i := r.free[len(r.free)-1]
	r.free = r.free[:len(r.free)-1]
	return i, nil
}

func (r *region) put(i int) {
	r.mu.Lock()
	r.free = append(r.free, i)
	r.mu.Unlock()
}

// slice is client slot i's part of the buffer.
func (r *region) slice(i int) []byte { return r.mr.Buf()[i*r.per : (i+1)*r.per] }

func (r *region) close() { r.mr.Dereg() }
