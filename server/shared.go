package server

import (
	"context"
	"fmt"
	"sync"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// sharedCQs hands out CQ pairs shared by up to perGroup clients each and
// routes their completions to the owning client by QPN. With an SRQ
// (srq mode) each group also has one shared receive queue whose buffers
// are the group's share of the memory pool's receive slots.
type sharedCQs struct {
	dev      fabric.Device
	pd       fabric.PD
	pool     *memPool // srq mode: where the SRQ buffers live; else nil
	perGroup int
	max      int // the server's capacity

	mu     sync.Mutex
	groups []*cqGroup
	err    error

	wg     sync.WaitGroup
	cancel context.CancelFunc
	ctx    context.Context
}

type cqGroup struct {
	send, recv fabric.CQ
	users      int

	// srq mode: the group's SRQ holds receive buffers [bufLo, bufHi) of
	// the pool, each posted with its index as wrID.
	srq          fabric.SRQ
	bufLo, bufHi int

	mu   sync.Mutex
	subs map[uint32]*subscription
}

type subscription struct {
	owner      *sharedCQs
	group      *cqGroup
	qpn        uint32
	send, recv chan fabric.WC
}

// newSharedCQs sizes groups so a group's receive CQ holds every receive
// its clients can have outstanding. With srqPool set, groups also get an
// SRQ of one buffer per client of the group, which max_srq_wr bounds too.
func newSharedCQs(dev fabric.Device, pd fabric.PD, maxClients int, srqPool *memPool) *sharedCQs {
	per := dev.Caps().MaxCQE / QPMaxRecvWR
	if per <= 0 || per > maxClients {
		per = maxClients
	}
	if srqPool != nil {
		if w := dev.Caps().MaxSRQWR; w > 0 && per > w {
			per = w
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &sharedCQs{dev: dev, pd: pd, pool: srqPool, perGroup: per, max: maxClients, ctx: ctx, cancel: cancel}
}

// subscribe returns a slot in a group with room, creating one if needed.
func (s *sharedCQs) subscribe() (*subscription, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var g *cqGroup
	for _, cand := range s.groups {
		if cand.users < s.perGroup {
			g = cand
			break
		}
	}
	if g == nil {
		var err error
		if g, err = s.newGroup(len(s.groups)); err != nil {
			return nil, err
		}
		s.groups = append(s.groups, g)
		s.wg.Add(2)
		go s.route(g, g.send, true)
		go s.route(g, g.recv, false)
	}
	g.users++
	return &subscription{owner: s, group: g,
		send: make(chan fabric.WC, QPMaxSendWR), recv: make(chan fabric.WC, QPMaxRecvWR)}, nil
}

// newGroup creates group number idx: its CQs and, in srq mode, its SRQ
// stocked with the group's receive buffers. A new group is created only
// when every earlier one is full, so group idx never holds more than the
// clients beyond idx × perGroup, and its buffers cover them.
func (s *sharedCQs) newGroup(idx int) (*cqGroup, error) {
	send, err := s.dev.CreateCQ(s.perGroup * QPMaxSendWR)
	if err != nil {
		return nil, fmt.Errorf("shared send CQ: %w", err)
	}
	recv, err := s.dev.CreateCQ(s.perGroup * QPMaxRecvWR)
	if err != nil {
		send.Destroy()
		return nil, fmt.Errorf("shared recv CQ: %w", err)
	}
	g := &cqGroup{send: send, recv: recv, subs: map[uint32]*subscription{}}
	if s.pool != nil {
		g.bufLo = idx * s.perGroup
		g.bufHi = min(g.bufLo+s.perGroup, s.max)
		if g.bufHi <= g.bufLo {
			recv.Destroy()
			send.Destroy()
			return nil, fmt.Errorf("shared receive queue: group %d starts beyond the pool's %d buffers", idx, s.max)
		}
		if g.srq, err = s.pd.CreateSRQ(g.bufHi-g.bufLo, 1); err != nil {
			recv.Destroy()
			send.Destroy()
			return nil, fmt.Errorf("shared receive queue: %w", err)
		}
		for k := g.bufLo; k < g.bufHi; k++ {
			if err = s.repost(g, k); err != nil {
				g.srq.Destroy()
				recv.Destroy()
				send.Destroy()
				return nil, fmt.Errorf("stock shared receive queue: %w", err)
			}
		}
	}
	return g, nil
}

// repost gives SRQ buffer k back to group g's SRQ.
func (s *sharedCQs) repost(g *cqGroup, k int) error {
	return g.srq.PostRecv(uint64(k), s.pool.mr, s.pool.recvOff(k), s.pool.msg)
}

// owns reports whether wrID names one of g's SRQ buffers.
func (g *cqGroup) owns(wrID uint64) bool {
	return wrID >= uint64(g.bufLo) && wrID < uint64(g.bufHi)
}

func (sub *subscription) bind(qpn uint32) {
	sub.qpn = qpn
	sub.group.mu.Lock()
	sub.group.subs[qpn] = sub
	sub.group.mu.Unlock()
}

// unsubscribe removes the client from its group. Call it after the QP is
// destroyed: in srq mode the SRQ buffers of receives routed to the client
// but never handled go back to the SRQ here.
func (sub *subscription) unsubscribe() {
	g := sub.group
	g.mu.Lock()
	if sub.qpn != 0 {
		delete(g.subs, sub.qpn)
	}
	g.mu.Unlock()
	if g.srq != nil {
		// The router delivers only under g.mu to subscribed QPs, so
		// nothing more arrives here.
		for drained := false; !drained; {
			select {
			case wc := <-sub.recv:
				sub.owner.release(g, wc)
			default:
				drained = true
			}
		}
	}
	sub.owner.mu.Lock()
	g.users--
	sub.owner.mu.Unlock()
}

// release reposts the SRQ buffer of a receive completion nobody handles.
func (s *sharedCQs) release(g *cqGroup, wc fabric.WC) {
	if g.owns(wc.WRID) {
		s.repost(g, int(wc.WRID))
	}
}

// route drains one shared CQ in batches and hands each completion to its
// QP's subscriber. Completions of QPs already gone are dropped; in srq
// mode their receive buffers go back to the SRQ, as do those of a client
// that sent more than it may have outstanding (its message is dropped).
func (s *sharedCQs) route(g *cqGroup, cq fabric.CQ, send bool) {
	defer s.wg.Done()
	wcs := make([]fabric.WC, 64)
	var orphans []fabric.WC
	for {
		n, err := cq.Poll(wcs)
		if err != nil {
			return
		}
		if n == 0 {
			if cq.Arm() != nil {
				return
			}
			if n, err = cq.Poll(wcs); err != nil {
				return
			}
			if n == 0 {
				if cq.Wait(s.ctx) != nil {
					return
				}
				continue
			}
		}
		orphans = orphans[:0]
		g.mu.Lock()
		for _, wc := range wcs[:n] {
			sub := g.subs[wc.QPN]
			if sub == nil {
				if !send {
					orphans = append(orphans, wc)
				}
				continue
			}
			ch := sub.recv
			if send {
				ch = sub.send
			}
			select {
			case ch <- wc:
			default:
				// Own RQ: cannot happen, at most QPMax*WR outstanding per
				// QP. SRQ: a client that did not wait for its echo.
				if !send {
					orphans = append(orphans, wc)
				}
			}
		}
		g.mu.Unlock()
		if g.srq != nil {
			for _, wc := range orphans {
				s.release(g, wc)
			}
		}
	}
}

// close stops the routers and destroys the groups' SRQs and CQs; every
// QP must be gone.
func (s *sharedCQs) close() {
	s.cancel()
	s.wg.Wait()
	for _, g := range s.groups {
		if g.srq != nil {
			g.srq.Destroy()
		}
		g.send.Destroy()
		g.recv.Destroy()
	}
}
