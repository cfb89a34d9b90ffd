package client

import (
	"fmt"
	"sync"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// SlabClients is how many clients' buffer pairs one registration holds;
// a region is deregistered when none of its pairs is in use.
//
// A load generator is many clients in one process, as a multi-client
// application would be, so its clients share registered memory: one
// ibv_reg_mr per 64 clients instead of two per client. In the Soft-RoCE
// guest (3,000 clients, srq) the generator spent 1.22 s of 23 s of CPU in
// ibv_reg_mr and more in ibv_dereg_mr, CPU the server under test shares
// on this machine. The server sees no difference: its peer's buffers are
// never named on the wire (SEND/RECV only). 64 clients of 3 × 4 KiB is
// one 768 KiB region; at most 63 unused clients' buffers stay registered.
const SlabClients = 64

// bufs hands out each client's send and receive buffers, all in one
// registered region: depth send buffers at off, then 2·depth receive
// buffers (depth = the messages a client may have outstanding in the
// traffic phase, 1 by default). Twice as many receives as messages let a
// client post its next message before it has checked an echo and given
// its buffer back (flow.echoLocked).
type bufs struct {
	pd    fabric.PD
	msg   int
	depth int
	head  int // room before each receive (fabric.GRHLen for UD QPs)

	mu   sync.Mutex
	free []bufPair
	used map[fabric.MR]int // pairs in use per region
}

// bufPair is one client's buffers.
type bufPair struct {
	mr               fabric.MR
	off              int
	msg, depth, head int
}

// sendOff and recvOff are where send buffer j < depth and the message in
// receive buffer j < 2·depth start; a receive is posted head bytes
// before its message (postOff), for the GRH of a datagram.
func (p bufPair) sendOff(j int) int { return p.off + j*p.msg }
func (p bufPair) recvOff(j int) int { return p.postOff(j) + p.head }
func (p bufPair) postOff(j int) int { return p.off + p.depth*p.msg + j*(p.head+p.msg) }

func newBufs(pd fabric.PD, msg, depth, head int) *bufs {
	return &bufs{pd: pd, msg: msg, depth: max(depth, 1), head: head, used: map[fabric.MR]int{}}
}

// stride is one client's share of a region.
func (b *bufs) stride() int { return b.depth*b.msg + 2*b.depth*(b.head+b.msg) }

// get returns a free pair, registering a new region when none is left.
func (b *bufs) get() (bufPair, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.free) == 0 {
		// Registering under the lock keeps concurrent clients from each
		// registering a region when one would do.
		mr, err := b.pd.RegMR(SlabClients*b.stride(), fabric.AccessLocalWrite)
		if err != nil {
			return bufPair{}, fmt.Errorf("register buffers for %d clients (%d bytes): %w", SlabClients, SlabClients*b.stride(), err)
		}
		b.used[mr] = 0
		for i := SlabClients - 1; i >= 0; i-- {
			b.free = append(b.free, bufPair{mr: mr, off: i * b.stride(), msg: b.msg, depth: b.depth, head: b.head})
		}
	}
	p := b.free[len(b.free)-1]
	b.free = b.free[:len(b.free)-1]
	b.used[p.mr]++
	return p, nil
}

// put returns a pair whose QP is destroyed (nothing can write it any
// more); the last pair back deregisters its region.
func (b *bufs) put(p bufPair) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used[p.mr]--
	if b.used[p.mr] > 0 {
		b.free = append(b.free, p)
		return
	}
	delete(b.used, p.mr)
	kept := b.free[:0]
	for _, q := range b.free {
		if q.mr != p.mr {
			kept = append(kept, q)
		}
	}
	b.free = kept
	p.mr.Dereg()
}

// close deregisters every region; every pair must have been put back.
func (b *bufs) close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var first error
	for mr := range b.used {
		if err := mr.Dereg(); err != nil && first == nil {
			first = err
		}
	}
	b.used, b.free = map[fabric.MR]int{}, nil
	return first
}
