package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// The clients of a load generator share completion queues, as a
// multi-client application (and perftest with many QPs) does: a group
// of clients has one CQ for their sends and receives, and one router
// goroutine drains it. While a client connects (and when it says
// goodbye) the router hands its completions to the client's goroutine
// over a channel; during the traffic phase it runs the client's traffic
// itself (traffic.go), so 10,000 clients need no goroutine each.
//
// A group holds ⌊max_cqe / (2·wr)⌋ clients (GroupSize), wr being a
// client's send (and receive) queue depth: every completion its clients
// can have outstanding fits in the CQ. A group is created when a client
// finds every other group full, and its CQ destroyed when its last
// client leaves.

// GroupSize is how many clients of a dialer share one CQ on a device
// with caps, when each may have depth messages outstanding.
func GroupSize(caps fabric.Caps, depth int) int {
	return max(caps.MaxCQE/(2*max(QPDepth, depth)), 1)
}

// cqGroup is one shared CQ and the clients on it.
type cqGroup struct {
	cq    fabric.CQ
	users int // guarded by groups.mu
	// dead is closed, with err set, when the CQ can no longer be read.
	dead chan struct{}
	err  error
	// stop ends the router once the group is empty; done is closed when
	// it has.
	stop context.CancelFunc
	done chan struct{}

	mu    sync.RWMutex
	conns map[uint32]*Conn // by local QPN
	// shared holds the QPs of logical clients (mux.go), by local QPN.
	shared map[uint32]*sharedQP

	// pinging is the flow whose traffic the router runs in the provider
	// (flow.ping); nil: none.
	pinging atomic.Pointer[flow]
}

// groups hands out group slots and owns the routers.
type groups struct {
	dev      fabric.Device
	perGroup int
	cqe      int
	busy     time.Duration // Config.BusyPoll

	mu   sync.Mutex
	all  []*cqGroup
	wg   sync.WaitGroup
	ctx  context.Context
	stop context.CancelFunc
}

func newGroups(dev fabric.Device, wr int, busy time.Duration) *groups {
	per := GroupSize(dev.Caps(), wr)
	ctx, stop := context.WithCancel(context.Background())
	return &groups{dev: dev, perGroup: per, cqe: per * 2 * wr, busy: busy, ctx: ctx, stop: stop}
}

// join returns a group with room for one more client, creating it (and
// its router) if every group is full.
func (g *groups) join() (*cqGroup, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, cg := range g.all {
		if cg.users < g.perGroup {
			cg.users++
			return cg, nil
		}
	}
	if g.ctx.Err() != nil {
		return nil, fmt.Errorf("shared CQ: the dialer is closing")
	}
	cq, err := g.dev.CreateCQ(g.cqe)
	if err != nil {
		return nil, fmt.Errorf("shared CQ of %d entries: %w", g.cqe, err)
	}
	ctx, stop := context.WithCancel(g.ctx)
	cg := &cqGroup{cq: cq, users: 1, conns: map[uint32]*Conn{}, dead: make(chan struct{}), stop: stop, done: make(chan struct{})}
	g.all = append(g.all, cg)
	g.wg.Add(1)
	go g.route(ctx, cg)
	return cg, nil
}

// leave gives back a client's slot; its QP must be destroyed (or never
// created).
func (g *groups) leave(cg *cqGroup, qpn uint32) {
	if qpn != 0 {
		cg.mu.Lock()
		delete(cg.conns, qpn)
		cg.mu.Unlock()
	}
	g.mu.Lock()
	cg.users--
	empty := cg.users == 0
	if empty {
		for i, x := range g.all {
			if x == cg {
				g.all = append(g.all[:i], g.all[i+1:]...)
				break
			}
		}
	}
	g.mu.Unlock()
	if empty {
		cg.stop()
		<-cg.done
		cg.cq.Destroy()
	}
}

// bind routes the completions of QP qpn to c.
func (cg *cqGroup) bind(qpn uint32, c *Conn) {
	cg.mu.Lock()
	cg.conns[qpn] = c
	cg.mu.Unlock()
}

// bindShared routes the completions of QP qpn to sq, whose logical
// clients share it.
func (cg *cqGroup) bindShared(qpn uint32, sq *sharedQP) {
	cg.mu.Lock()
	if cg.shared == nil {
		cg.shared = map[uint32]*sharedQP{}
	}
	cg.shared[qpn] = sq
	cg.mu.Unlock()
}

func (cg *cqGroup) unbindShared(qpn uint32) {
	cg.mu.Lock()
	delete(cg.shared, qpn)
	cg.mu.Unlock()
}

func (cg *cqGroup) lookupShared(qpn uint32) *sharedQP {
	cg.mu.RLock()
	defer cg.mu.RUnlock()
	return cg.shared[qpn]
}

func (cg *cqGroup) lookup(qpn uint32) *Conn {
	cg.mu.RLock()
	defer cg.mu.RUnlock()
	return cg.conns[qpn]
}

// route drains one group's CQ until the dialer closes: completions of
// a client in the traffic phase go to its flow, the others to the
// client's channel. Completions of QPs already destroyed are dropped.
func (g *groups) route(ctx context.Context, cg *cqGroup) {
	defer g.wg.Done()
	defer close(cg.done)
	wcs := make([]fabric.WC, 64)
	for {
		var (
			n    int
			err  error
			idle = true
		)
		if f := cg.pinging.Load(); f != nil && g.busy > 0 {
			n, idle, err = f.ping(ctx, wcs, g.busy)
		} else if g.busy > 0 {
			n, err = fabric.SpinOne(ctx, cg.cq, wcs, g.busy)
		} else {
			n, err = cg.cq.Poll(wcs)
		}
		if err != nil {
			g.broken(cg, err)
			return
		}
		if n == 0 && !idle {
			continue // the provider's loop ran its slice
		}
		if n == 0 {
			if ctx.Err() != nil {
				return
			}
			if err := cg.cq.Arm(); err != nil {
				g.broken(cg, err)
				return
			}
			if n, err = cg.cq.Poll(wcs); err != nil {
				g.broken(cg, err)
				return
			}
			if n == 0 {
				if err := cg.cq.Wait(ctx); err != nil {
					if ctx.Err() == nil {
						g.broken(cg, err)
					}
					return
				}
				continue
			}
		}
		for _, wc := range wcs[:n] {
			c := cg.lookup(wc.QPN)
			if c == nil {
				if sq := cg.lookupShared(wc.QPN); sq != nil {
					sq.take(wc)
				}
				continue
			}
			if f := c.flow.Load(); f != nil {
				f.take(wc)
				continue
			}
			select {
			case c.wcs <- wc:
			default:
				// Cannot happen: the channel holds every completion the
				// client's queues can have outstanding.
			}
		}
	}
}

// broken fails every client of a group whose CQ can no longer be read.
func (g *groups) broken(cg *cqGroup, err error) {
	cg.err = err
	close(cg.dead)
	cg.mu.RLock()
	defer cg.mu.RUnlock()
	for _, c := range cg.conns {
		if f := c.flow.Load(); f != nil {
			f.cqBroken(err)
		}
	}
	for _, sq := range cg.shared {
		sq.fail(0, "cq-error", err)
	}
}

// close stops the routers and destroys the CQs left (every client must
// have left, which destroyed its group's CQ already).
func (g *groups) close() error {
	g.mu.Lock()
	g.stop()
	g.mu.Unlock()
	g.wg.Wait()
	var first error
	for _, cg := range g.all {
		if err := cg.cq.Destroy(); err != nil && first == nil {
			first = err
		}
	}
	g.all = nil
	return first
}

// await returns the client's next completion while it is not in the
// traffic phase.
func (c *Conn) await(ctx context.Context) (fabric.WC, error) {
	select {
	case wc := <-c.wcs:
		return wc, nil
	case <-c.sqDead:
		return fabric.WC{}, c.sq.fate(c.logical)
	case <-c.group.dead:
		return fabric.WC{}, fmt.Errorf("shared CQ: %w", c.group.err)
	case <-ctx.Done():
		return fabric.WC{}, ctx.Err()
	}
}
