package sim

import (
	"fmt"
	"sync"
	"syscall"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// maxSRQSGE is rxe's max_srq_sge (RXE_MAX_SRQ_SGE); ibv_query_device
// reports it, but the fabric's Caps do not carry it.
const maxSRQSGE = 27

// srq is a shared receive queue. Lock order: qp.mu → srq.mu (a QP that
// receives takes a buffer under its own lock); srq.mu is never held while
// taking a QP's lock, and Provider.mu → srq.mu only in Destroy.
type srq struct {
	pd   *pd
	size int // capacity after rxe's rounding

	mu   sync.Mutex
	q    ring[recvWR]
	dead bool
	// waiters are the QPs holding a SEND for want of a receive, oldest
	// first; PostRecv wakes them. qp.srqWait marks membership.
	waiters ring[*qp]

	refs int // QPs attached; guarded by Provider.mu
}

var _ fabric.SRQ = (*srq)(nil)

// CreateSRQ creates a shared receive queue. rxe_srq_chk_init refuses
// max_wr of 0 or above max_srq_wr and max_sge above RXE_MAX_SRQ_SGE with
// -EINVAL, and a full SRQ pool is -EINVAL from rxe_add_to_pool (6.1), as
// for QPs, CQs and PDs.
func (x *pd) CreateSRQ(maxWR, maxSGE int) (fabric.SRQ, error) {
	const verb = "ibv_create_srq"
	d := x.dev
	if d.isClosed() {
		return nil, verr(verb, syscall.ENODEV, "device closed")
	}
	p := d.prov
	if maxWR <= 0 || maxWR > p.caps.MaxSRQWR {
		return nil, verr(verb, syscall.EINVAL, fmt.Sprintf("max_wr %d outside 1..max_srq_wr %d", maxWR, p.caps.MaxSRQWR))
	}
	if maxSGE < 0 || maxSGE > maxSRQSGE {
		return nil, verr(verb, syscall.EINVAL, fmt.Sprintf("max_sge %d outside 0..max_srq_sge %d", maxSGE, maxSRQSGE))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if x.dead {
		return nil, verr(verb, syscall.EINVAL, "PD deallocated")
	}
	if p.nSRQ >= p.caps.MaxSRQ {
		return nil, verr(verb, syscall.EINVAL, fmt.Sprintf("max_srq %d reached", p.caps.MaxSRQ))
	}
	p.nSRQ++
	s := &srq{pd: x, size: roundQueue(maxWR)}
	x.srqs[s] = struct{}{}
	return s, nil
}

// PostRecv adds a receive, then lets the QPs that hold a SEND for want of
// one take it (ibv_post_srq_recv). As with the QP's own receive queue, a
// buffer outside its MR is refused at post time with EINVAL, and a full
// queue is ENOMEM.
func (s *srq) PostRecv(wrID uint64, m fabric.MR, off, length int) error {
	const verb = "ibv_post_srq_recv"
	buf, err := sgeOf(verb, s.pd, m, off, length)
	if err != nil {
		return err
	}
	s.mu.Lock()
	switch {
	case s.dead:
		s.mu.Unlock()
		return verr(verb, syscall.EINVAL, "SRQ destroyed")
	case s.q.n >= s.size:
		n := s.q.n
		s.mu.Unlock()
		return verr(verb, syscall.ENOMEM, fmt.Sprintf("SRQ full (%d posted)", n))
	}
	s.q.push(recvWR{wrID: wrID, buf: buf})
	var wake []*qp
	for s.waiters.n > 0 {
		q := s.waiters.pop()
		q.srqWait = false
		wake = append(wake, q)
	}
	s.mu.Unlock()
	for _, q := range wake {
		q.drainHeld()
	}
	return nil
}

// take hands q the oldest receive; with none posted it records q as a
// waiter, so the next PostRecv delivers what q holds.
func (s *srq) take(q *qp) (recvWR, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.q.n > 0 && !s.dead {
		return s.q.pop(), true
	}
	if !q.srqWait && !s.dead {
		q.srqWait = true
		s.waiters.push(q)
	}
	return recvWR{}, false
}

// Destroy releases the SRQ. The verbs core refuses while a QP is attached
// (EBUSY); receives still posted vanish without completions.
func (s *srq) Destroy() error {
	const verb = "ibv_destroy_srq"
	p := s.pd.dev.prov
	p.mu.Lock()
	defer p.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return verr(verb, syscall.EINVAL, "already destroyed")
	}
	if s.refs > 0 {
		return verr(verb, syscall.EBUSY, fmt.Sprintf("%d QPs still use it", s.refs))
	}
	s.dead = true
	s.q.reset()
	s.waiters.reset()
	p.nSRQ--
	delete(s.pd.srqs, s)
	return nil
}

// posted is how many receives the SRQ holds (tests).
func (s *srq) posted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q.n
}
