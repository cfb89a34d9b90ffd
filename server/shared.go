package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// sharedCQs hands out CQ pairs shared by up to perGroup clients each and
// routes their completions by QPN. In shared-cq mode a router hands each
// completion to its client's echo goroutine; in pool and srq modes
// (events) the routers run the echo themselves (see echo.go). In srq mode
// each group also has one shared receive queue stocked with depth buffers
// of the memory pool.
type sharedCQs struct {
	cqs      *spinTally
	pd       fabric.PD
	events   bool     // pool and srq modes: the routers echo
	pool     *memPool // srq mode: where the SRQ buffers live; else nil
	perGroup int
	wr       int           // each QP's send and receive queue depth
	depth    int           // srq mode: buffers per group's SRQ
	max      int           // the server's capacity
	busy     time.Duration // Config.BusyPoll
	// ud, in ud mode, makes each group's receive side a UD QP of its own
	// instead of an SRQ (ud.go).
	ud *udConf

	mu     sync.Mutex
	groups []*cqGroup

	wg     sync.WaitGroup
	cancel context.CancelFunc
	ctx    context.Context
	// stopped is closed once the routers have handled (or handed over)
	// every completion that was in the CQs when stop was called.
	stopped  chan struct{}
	stopOnce sync.Once
}

type cqGroup struct {
	send, recv fabric.CQ
	users      int

	// srq mode: the group's SRQ owns buffers [bufLo, bufHi) of the pool;
	// ud mode: its UD QP does, and peers finds each client by the
	// sender of a datagram, owners the client whose echo a buffer sends.
	srq          fabric.SRQ
	udqp         fabric.QP
	peers        map[udPeer]*subscription
	owners       []*conn
	bufLo, bufHi int
	// bufs[k-bufLo] is buffer k's state and generation. A buffer's work
	// request carries both (wrID), so a completion is honoured only for
	// the posting it names: one that surfaces after its buffer was taken
	// back (its client left first) is recognised as stale.
	bufMu sync.Mutex
	bufs  []srqBuf

	mu   sync.Mutex
	subs map[uint32]*subscription
}

// srqBuf is the state of one SRQ buffer.
type srqBuf struct {
	gen   uint32
	state uint8
}

const (
	bufPosted  = iota // in the SRQ, awaiting a message
	bufHeld           // a router or a client's pending echo holds it
	bufSending        // an echo is being sent from it
)

// wrID names buffer k's posting number gen in a work request.
func wrID(k int, gen uint32) uint64 { return uint64(gen)<<32 | uint64(uint32(k)) }

type subscription struct {
	owner *sharedCQs
	group *cqGroup
	qpn   uint32
	// shared-cq mode: the client's echo goroutine reads its completions
	// here.
	send, recv chan fabric.WC
	// pool and srq modes: the client whose messages the routers echo.
	c *conn
	// ud mode: the client's UD QP and GID, which its datagrams carry.
	peer udPeer
}

// groupSize is how many clients share a CQ pair: a group's receive CQ
// holds every receive its clients can have outstanding (in srq mode fewer
// can be: at most the SRQ's buffers). The clients are spread evenly over
// the fewest groups that fit, since each group's routers serve its
// clients in turn: filling groups up left the last one a remainder
// (ud at 10,000 on rxe0: 8,191 and 1,809 clients), whose clients were
// served several times as often as the full group's.
func groupSize(caps fabric.Caps, maxClients, wr int) int {
	per := caps.MaxCQE / wr
	if per <= 0 || per > maxClients {
		return maxClients
	}
	groups := (maxClients + per - 1) / per
	return (maxClients + groups - 1) / groups
}

// srqDepth is the number of receive buffers of each group's SRQ: want (or
// DefaultSRQDepth; SRQDepthAll: no bound of its own), at most two per
// message the group's clients can have outstanding (perGroup counts
// them) but never fewer than MinSRQDepth, and at most max_srq_wr. A buffer goes back to the SRQ only once the
// echo sent from it has completed, which the send router learns on its
// own wake-up: by then its client may have had the echo and sent the
// next message, and a message that finds the SRQ empty waits out an RNR
// timer (at least a jiffy, 4 ms, in rxe). At 1 client on rxe0, one
// buffer per message gave 320 msg/s and p99 10.7 ms, two 740 and 8.5 ms,
// 64 1,324 and 2.6 ms, as per-client mode (1,330 and 2.5 ms).
func srqDepth(caps fabric.Caps, perGroup, want int) int {
	d := max(2*perGroup, MinSRQDepth)
	switch {
	case want == SRQDepthAll:
	case want <= 0:
		d = min(d, DefaultSRQDepth)
	default:
		d = min(d, want)
	}
	if caps.MaxSRQWR > 0 {
		d = min(d, caps.MaxSRQWR)
	}
	return d
}

// newSharedCQs prepares groups of perGroup clients. With events the
// routers echo (pool and srq modes); with srqPool set (srq mode) each
// group also gets an SRQ of depth buffers of the pool.
func newSharedCQs(cqs *spinTally, pd fabric.PD, maxClients, perGroup, wr int, events bool, srqPool *memPool, depth int) *sharedCQs {
	ctx, cancel := context.WithCancel(context.Background())
	return &sharedCQs{cqs: cqs, pd: pd, events: events, pool: srqPool, perGroup: perGroup, wr: wr, depth: depth,
		max: maxClients, ctx: ctx, cancel: cancel, stopped: make(chan struct{})}
}

// errStopping refuses a client a new group once the routers stop.
var errStopping = errors.New("the server is stopping")

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
		if s.ctx.Err() != nil {
			return nil, errStopping // no router would serve the group
		}
		var err error
		if g, err = s.newGroup(len(s.groups)); err != nil {
			return nil, err
		}
		s.groups = append(s.groups, g)
		s.wg.Add(2)
		go s.route(g, g.send, true, s.perGroup*s.wr)
		go s.route(g, g.recv, false, s.perGroup*s.wr)
	}
	g.users++
	sub := &subscription{owner: s, group: g}
	if !s.events {
		sub.send, sub.recv = make(chan fabric.WC, s.wr), make(chan fabric.WC, s.wr)
	}
	return sub, nil
}

// newGroup creates group number idx: its CQs and, in srq mode, its SRQ
// stocked with the group's buffers. A new group is created only when
// every earlier one is full, so there are at most ⌈max/perGroup⌉ groups,
// and the pool holds depth buffers for each.
func (s *sharedCQs) newGroup(idx int) (*cqGroup, error) {
	cqe := s.perGroup * s.wr
	if s.ud != nil {
		cqe = s.depth // every buffer's receive, or its echo's send
	}
	send, err := s.cqs.create(cqe)
	if err != nil {
		return nil, fmt.Errorf("shared send CQ: %w", err)
	}
	recv, err := s.cqs.create(cqe)
	if err != nil {
		s.cqs.destroy(send)
		return nil, fmt.Errorf("shared recv CQ: %w", err)
	}
	g := &cqGroup{send: send, recv: recv, subs: map[uint32]*subscription{}}
	if s.pool != nil {
		g.bufLo = idx * s.depth
		g.bufHi = g.bufLo + s.depth
		if total := len(s.pool.mr.Buf()) / s.pool.msg; g.bufHi > total {
			s.cqs.destroy(recv)
			s.cqs.destroy(send)
			return nil, fmt.Errorf("shared receive queue: group %d starts beyond the pool's %d buffers", idx, total)
		}
		if s.ud != nil {
			err = s.newUDQP(g)
		} else if g.srq, err = s.pd.CreateSRQ(s.depth, 1); err != nil {
			err = fmt.Errorf("shared receive queue: %w", err)
		}
		if err != nil {
			s.cqs.destroy(recv)
			s.cqs.destroy(send)
			return nil, err
		}
		g.bufs = make([]srqBuf, s.depth)
		for k := g.bufLo; k < g.bufHi; k++ {
			if err = s.post(g, k); err != nil {
				g.destroyRecvSide()
				s.cqs.destroy(recv)
				s.cqs.destroy(send)
				return nil, fmt.Errorf("stock shared receive queue: %w", err)
			}
		}
	}
	return g, nil
}

// post gives buffer k, which the caller holds, back to group g's SRQ.
func (s *sharedCQs) post(g *cqGroup, k int) error {
	g.bufMu.Lock()
	b := &g.bufs[k-g.bufLo]
	b.gen++
	b.state = bufPosted
	id := wrID(k, b.gen)
	g.bufMu.Unlock()
	if g.udqp != nil {
		return g.udqp.PostRecv(id, s.pool.mr, s.pool.bufOff(k), s.pool.msg)
	}
	return g.srq.PostRecv(id, s.pool.mr, s.pool.bufOff(k), s.pool.msg)
}

// claim takes the buffer that work request id names from state want to
// held; false if id is not that buffer's current posting in that state.
func (g *cqGroup) claim(id uint64, want uint8) (int, bool) {
	k, gen := int(uint32(id)), uint32(id>>32)
	if k < g.bufLo || k >= g.bufHi {
		return 0, false
	}
	g.bufMu.Lock()
	defer g.bufMu.Unlock()
	b := &g.bufs[k-g.bufLo]
	if b.state != want || b.gen != gen {
		return 0, false
	}
	b.state = bufHeld
	return k, true
}

// sending marks held buffer k as the source of an echo and returns the
// send's wrID (never 0).
func (g *cqGroup) sending(k int) uint64 {
	g.bufMu.Lock()
	defer g.bufMu.Unlock()
	b := &g.bufs[k-g.bufLo]
	b.gen++
	b.state = bufSending
	return wrID(k, b.gen)
}

// bind routes the completions of QP qpn to the subscription (and, in
// pool and srq modes, to client c).
func (sub *subscription) bind(qpn uint32, c *conn) {
	sub.qpn = qpn
	sub.group.mu.Lock()
	if sub.owner.events {
		sub.c = c
	}
	sub.group.subs[qpn] = sub
	sub.group.mu.Unlock()
}

// bindPeer routes the datagrams of the client at p to the subscription
// and client c (ud mode).
func (sub *subscription) bindPeer(p udPeer, c *conn) {
	sub.peer = p
	sub.group.mu.Lock()
	sub.c = c
	sub.group.peers[p] = sub
	sub.group.mu.Unlock()
}

// unsubscribe removes the client from its group. Call it after the QP is
// destroyed.
func (sub *subscription) unsubscribe() {
	g := sub.group
	g.mu.Lock()
	if sub.qpn != 0 {
		delete(g.subs, sub.qpn)
	}
	if sub.peer != (udPeer{}) && g.peers[sub.peer] == sub {
		delete(g.peers, sub.peer)
	}
	g.mu.Unlock()
	sub.owner.mu.Lock()
	g.users--
	sub.owner.mu.Unlock()
}

// lookup is the subscription of QP qpn in g, or nil.
func (g *cqGroup) lookup(qpn uint32) *subscription {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.subs[qpn]
}

// clients lists the pool- and srq-mode clients subscribed in any group.
func (s *sharedCQs) clients() []*conn {
	s.mu.Lock()
	groups := slices.Clone(s.groups)
	s.mu.Unlock()
	var cs []*conn
	for _, g := range groups {
		g.mu.Lock()
		for _, sub := range g.subs {
			if sub.c != nil {
				cs = append(cs, sub.c)
			}
		}
		for _, sub := range g.peers {
			cs = append(cs, sub.c)
		}
		g.mu.Unlock()
	}
	return cs
}

// route drains one shared CQ in batches. In pool and srq modes it runs
// the echo of each completion; in shared-cq mode it hands each
// completion to its QP's subscriber. Completions of QPs already gone are
// dropped; in srq mode their buffers go back to the SRQ. Once stopping
// it handles at most one CQ's worth (depth) more: what was queued when
// the stop came, not the traffic of clients that keep sending.
func (s *sharedCQs) route(g *cqGroup, cq fabric.CQ, send bool, depth int) {
	defer s.wg.Done()
	wcs := make([]fabric.WC, 64)
	for {
		if s.ctx.Err() != nil {
			if depth <= 0 {
				return
			}
			depth -= len(wcs)
		}
		n, err := cq.Poll(wcs)
		if err != nil {
			return
		}
		if n == 0 && s.busy > 0 {
			if n, err = fabric.Spin(s.ctx, cq, wcs, s.busy); err != nil {
				return
			}
		}
		if n == 0 {
			if s.ctx.Err() != nil {
				return // stopping, and nothing is left
			}
			if cq.Arm() != nil {
				return
			}
			if n, err = cq.Poll(wcs); err != nil {
				return
			}
			if n == 0 {
				// A stop that ends the wait is not the end: completions
				// may have come with it (clients' goodbyes, acknowledged
				// to them already), and the loop drains them before it
				// returns. Only a failed wait ends the router at once.
				if cq.Wait(s.ctx) != nil && s.ctx.Err() == nil {
					return
				}
				continue
			}
		}
		switch {
		case g.srq != nil || g.udqp != nil:
			for _, wc := range wcs[:n] {
				if send {
					s.sent(g, wc)
				} else {
					s.received(g, wc)
				}
			}
			continue
		case s.events:
			for _, wc := range wcs[:n] {
				sub := g.lookup(wc.QPN)
				if sub == nil || sub.c == nil {
					continue // the QP is gone
				}
				if send {
					sub.c.sentOwn(wc)
				} else {
					sub.c.receivedOwn(wc)
				}
			}
			continue
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
			default:
				// Cannot happen: at most QPMax*WR outstanding per QP.
			}
		}
		g.mu.Unlock()
	}
}

// received is a receive completion in srq mode: the message is in the SRQ
// buffer its wrID names, and the client is the one its QPN names.
func (s *sharedCQs) received(g *cqGroup, wc fabric.WC) {
	k, ok := g.claim(wc.WRID, bufPosted)
	if !ok {
		return // not a posting of this group's SRQ
	}
	if g.udqp != nil {
		s.receivedUD(g, wc, k)
		return
	}
	if sub := g.lookup(wc.QPN); sub != nil && sub.c != nil {
		sub.c.received(wc, k)
		return
	}
	s.post(g, k) // the QP is gone: only the buffer is left to return
}

// sent is a send completion in srq mode: the echo's buffer goes back to
// the SRQ, unless the client's departure took it back already.
func (s *sharedCQs) sent(g *cqGroup, wc fabric.WC) {
	k, ok := g.claim(wc.WRID, bufSending)
	if !ok {
		return // stale: the buffer was reclaimed when its client left
	}
	if g.udqp != nil {
		// The group's QP sent it: the buffer names the client.
		if c := g.owner(k); c != nil {
			c.sent(wc, k)
			return
		}
		s.post(g, k)
		return
	}
	if sub := g.lookup(wc.QPN); sub != nil && sub.c != nil {
		sub.c.sent(wc, k)
		return
	}
	s.post(g, k)
}

// stop ends the routers once they have drained their CQs: what was
// already there, a goodbye above all, is handled (pool and srq modes) or
// handed to its client's channel (shared-cq) before the server releases
// anyone. A router exits once a poll finds its CQ empty, or once it has
// handled a CQ's depth more (see route).
func (s *sharedCQs) stop() {
	s.mu.Lock() // no group, and so no router, is added after this
	s.cancel()
	s.mu.Unlock()
	s.wg.Wait()
	s.stopOnce.Do(func() { close(s.stopped) })
}

// close stops the routers and destroys the groups' SRQs and CQs; every
// QP must be gone.
func (s *sharedCQs) close() {
	s.stop()
	for _, g := range s.groups {
		g.destroyRecvSide()
		s.cqs.destroy(g.send)
		s.cqs.destroy(g.recv)
	}
}
