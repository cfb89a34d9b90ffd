package server

import (
	"context"
	"fmt"
	"sync"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// sharedCQs hands out CQ pairs shared by up to perGroup clients each and
// routes their completions to the owning client by QPN.
type sharedCQs struct {
	dev      fabric.Device
	perGroup int

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

	mu   sync.Mutex
	subs map[uint32]*subscription
}

type subscription struct {
	owner      *sharedCQs
	group      *cqGroup
	qpn        uint32
	send, recv chan fabric.WC
}

func newSharedCQs(dev fabric.Device, maxClients int) *sharedCQs {
	per := dev.Caps().MaxCQE / QPMaxRecvWR
	if per <= 0 || per > maxClients {
		per = maxClients
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &sharedCQs{dev: dev, perGroup: per, ctx: ctx, cancel: cancel}
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
		send, err := s.dev.CreateCQ(s.perGroup * QPMaxSendWR)
		if err != nil {
			return nil, fmt.Errorf("shared send CQ: %w", err)
		}
		recv, err := s.dev.CreateCQ(s.perGroup * QPMaxRecvWR)
		if err != nil {
			send.Destroy()
			return nil, fmt.Errorf("shared recv CQ: %w", err)
		}
		g = &cqGroup{send: send, recv: recv, subs: map[uint32]*subscription{}}
		s.groups = append(s.groups, g)
		s.wg.Add(2)
		go s.route(g, send, true)
		go s.route(g, recv, false)
	}
	g.users++
	return &subscription{owner: s, group: g,
		send: make(chan fabric.WC, QPMaxSendWR), recv: make(chan fabric.WC, QPMaxRecvWR)}, nil
}

func (sub *subscription) bind(qpn uint32) {
	sub.qpn = qpn
	sub.group.mu.Lock()
	sub.group.subs[qpn] = sub
	sub.group.mu.Unlock()
}

func (sub *subscription) unsubscribe() {
	g := sub.group
	g.mu.Lock()
	if sub.qpn != 0 {
		delete(g.subs, sub.qpn)
	}
	g.mu.Unlock()
	sub.owner.mu.Lock()
	g.users--
	sub.owner.mu.Unlock()
}

// route drains one shared CQ in batches and hands each completion to its
// QP's subscriber. Completions of QPs already gone are dropped.
func (s *sharedCQs) route(g *cqGroup, cq fabric.CQ, send bool) {
	defer s.wg.Done()
	wcs := make([]fabric.WC, 64)
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
		g.mu.Lock()
		for _, wc := range wcs[:n] {
			sub := g.subs[wc.QPN]
			if sub == nil {
				continue
			}
			ch := sub.recv
			if send {
				ch = sub.send
			}
			select {
			case ch <- wc:
			default: // cannot happen: at most QPMax*WR outstanding per QP
			}
		}
		g.mu.Unlock()
	}
}

func (s *sharedCQs) close() {
	s.cancel()
	s.wg.Wait()
	for _, g := range s.groups {
		g.send.Destroy()
		g.recv.Destroy()
	}
}
