package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// The steps of one attempt, in order.
const (
	stepAddr = iota
	stepRoute
	stepQP // lockstep: route resolved, waiting for the batch's QPs
	stepEstablish
	stepHeld
	stepEnded
)

// conn is one attempt, and the connection it made.
type conn struct {
	id          fabric.CMID
	c           *client.Conn // the engine's client, once its QP exists
	step        int
	start, last time.Time
	deadline    time.Time
	// ready: under Config.Lockstep, this attempt has finished its step
	// and waits for the rest of its batch.
	ready bool
}

// pollSlice bounds one wait for an event, so that a cancelled ctx is
// seen soon.
const pollSlice = 100 * time.Millisecond

// gen is one Run: the attempts and what they share.
type gen struct {
	cfg                Config
	h                  *Conns
	recs               []result.ClientRecord
	addr               netip.AddrPort
	cmTO               time.Duration // the CM's own address and route timeouts
	pending, ended, ok int
}

// Run makes cfg.N connections to cfg.Addr through cm, at most
// cfg.InFlight in progress, and returns a record per attempt and the
// connections made, held until the caller closes them (before cm). An
// error is the generator's own (a bad address, the channel failing):
// then the attempts made are released.
func Run(ctx context.Context, cm fabric.CM, cfg Config) ([]result.ClientRecord, *Conns, error) {
	if err := cfg.Check(); err != nil {
		return nil, nil, err
	}
	addr, err := netip.ParseAddrPort(cfg.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("server address %q: rdma_cm clients need an IP address and port: %w", cfg.Addr, err)
	}
	g := &gen{cfg: cfg, addr: addr, recs: make([]result.ClientRecord, cfg.N),
		h: &Conns{cm: cm, conns: make([]conn, cfg.N), idBase: cfg.IDBase, proc: cfg.Proc}}
	for i := range g.recs {
		g.recs[i] = result.ClientRecord{ID: cfg.IDBase + i, Proc: cfg.Proc}
	}
	g.cmTO = min(cfg.Timeout, 2*time.Second)
	if g.cmTO <= 0 {
		g.cmTO = 2 * time.Second
	}
	if err := g.run(ctx); err != nil {
		g.h.Close()
		return nil, nil, err
	}
	return g.recs, g.h, nil
}

func (g *gen) run(ctx context.Context) error {
	cfg, h := g.cfg, g.h
	window := cfg.InFlight
	if window <= 0 {
		window = cfg.N
	}
	var next int
	// started is every attempt in start order, so deadlines (start +
	// Timeout) come due from its front.
	started := make([]int, 0, cfg.N)
	// batch is the attempts of the current lockstep batch.
	var batch []int
	begin := time.Now()
	for g.ended < cfg.N {
		now := time.Now()
		if ctx.Err() != nil {
			for i := range h.conns[:next] {
				if s := h.conns[i].step; s != stepHeld && s != stepEnded {
					g.end(i, result.OutcomeTimeout, "interrupted", nil)
				}
			}
			for i := next; i < cfg.N; i++ {
				g.recs[i].Outcome, g.recs[i].Error = result.OutcomeTimeout, "interrupted: not started"
			}
			return nil
		}
		if cfg.Lockstep && g.pending == 0 {
			batch = batch[:0]
		}
		for next < cfg.N && g.pending < window && (cfg.Rate <= 0 || !now.Before(startAt(begin, next, cfg.Rate))) &&
			(!cfg.Lockstep || len(batch) < window) {
			i := next
			next++
			g.pending++
			c := &h.conns[i]
			c.start, c.last, c.deadline = now, now, now.Add(cfg.Timeout)
			started = append(started, i)
			if cfg.Lockstep {
				batch = append(batch, i)
			}
			id, err := h.cm.Start(g.addr, g.cmTO, uint64(i))
			if err != nil {
				g.end(i, result.OutcomeAddrError, "rdma_resolve_addr", err)
				continue
			}
			c.id = id
		}
		for len(started) > 0 {
			i := started[0]
			if s := h.conns[i].step; s == stepHeld || s == stepEnded {
				started = started[1:]
				continue
			}
			if cfg.Timeout > 0 && !now.Before(h.conns[i].deadline) {
				started = started[1:]
				g.end(i, result.OutcomeTimeout, "no CM event ended the attempt within --timeout: "+stepName(h.conns[i].step), nil)
				continue
			}
			break
		}
		if cfg.Lockstep {
			g.advance(batch)
		}
		if g.ended == cfg.N {
			break
		}
		wait := pollSlice
		if len(started) > 0 && cfg.Timeout > 0 {
			wait = min(wait, time.Until(h.conns[started[0]].deadline))
		}
		if next < cfg.N && g.pending < window && cfg.Rate > 0 {
			wait = min(wait, time.Until(startAt(begin, next, cfg.Rate)))
		}
		// The channel drains in one go: one wait per burst of events.
		for {
			ev, got, err := h.cm.Next(wait)
			if err != nil {
				return err
			}
			if !got {
				break
			}
			g.handle(ev)
			wait = 0
		}
	}
	return nil
}

// end records attempt i's outcome and, unless it connected, releases
// what it holds.
func (g *gen) end(i int, outcome, why string, err error) {
	c := &g.h.conns[i]
	r := &g.recs[i]
	r.Outcome, r.Error = outcome, why
	if err != nil {
		r.Error = why + ": " + err.Error()
		var e syscall.Errno
		if fabric.Errno(err) != 0 {
			r.Error = err.Error() // it names its call
		}
		if errors.As(err, &e) {
			r.Errno = fabric.ErrnoName(e)
		}
	}
	if outcome == result.OutcomeOK {
		c.step = stepHeld
		r.ConnectUS = time.Since(c.start).Microseconds()
		g.ok++
	} else {
		c.release(false)
		c.step = stepEnded
	}
	g.pending--
	g.ended++
	if g.cfg.Ended != nil {
		g.cfg.Ended(r)
	}
	if g.cfg.Progress != nil {
		g.cfg.Progress(g.ended, g.ok)
	}
}

// endStatus ends attempt i on an error event: its status is a negative
// errno.
func (g *gen) endStatus(i int, outcome string, status int) {
	g.end(i, outcome, fmt.Sprintf("status %d", status), nil)
	if status < 0 {
		g.recs[i].Errno = fabric.ErrnoName(syscall.Errno(-status))
	}
}

// phase closes the step that just ended.
func (g *gen) phase(i int, name string) {
	c := &g.h.conns[i]
	now := time.Now()
	if g.recs[i].PhasesUS == nil {
		g.recs[i].PhasesUS = make(map[string]int64, 4)
	}
	g.recs[i].PhasesUS[name] = now.Sub(c.last).Microseconds()
	c.last = now
}

// advance moves a lockstep batch on once every attempt of it still in
// progress has finished its step: all routes are resolved, then all QPs
// created, then all connects issued, as cmtime steps its connections.
// Each step is timed from its own issue, as cmtime times it.
func (g *gen) advance(batch []int) {
	h := g.h
	live := 0
	for _, i := range batch {
		c := &h.conns[i]
		if c.step == stepHeld || c.step == stepEnded {
			continue
		}
		if !c.ready {
			return
		}
		live++
	}
	if live == 0 {
		return
	}
	for _, i := range batch {
		if c := &h.conns[i]; c.step == stepRoute && c.ready {
			c.ready, c.last = false, time.Now()
			g.route(i)
		}
	}
	for _, i := range batch {
		if c := &h.conns[i]; c.step == stepQP && c.ready {
			c.last = time.Now()
			g.createQP(i)
		}
	}
	for _, i := range batch {
		if c := &h.conns[i]; c.step == stepQP && c.ready {
			c.ready, c.last = false, time.Now()
			g.connect(i)
		}
	}
}

func (g *gen) route(i int) {
	if err := g.h.conns[i].id.ResolveRoute(g.cmTO); err != nil {
		g.end(i, result.OutcomeRouteError, "rdma_resolve_route", err)
	}
}

// createQP makes attempt i a client of the engine, on a QP the CM
// creates on the device the address resolved to, and reports whether it
// did.
func (g *gen) createQP(i int) bool {
	c := &g.h.conns[i]
	d, err := g.h.dialer(c.id, g.cfg.Engine)
	if err != nil {
		g.end(i, result.OutcomeQPCreate, "rdma_create_qp", err)
		return false
	}
	c.c, err = d.Adopt(g.cfg.IDBase+i, c.id.CreateQP)
	if err != nil {
		g.end(i, result.OutcomeQPCreate, "rdma_create_qp", err)
		return false
	}
	g.recs[i].LocalQPN = c.c.QPN()
	g.phase(i, result.PhaseQPCreate)
	return true
}

func (g *gen) connect(i int) {
	c := &g.h.conns[i]
	c.step = stepEstablish
	if err := c.id.Connect(g.cfg.PrivateData); err != nil {
		g.end(i, result.OutcomeConnectError, "rdma_connect", err)
	}
}

// handle moves the attempt ev belongs to on by one step; under lockstep
// a resolved address or route waits for advance.
func (g *gen) handle(ev fabric.CMEvent) {
	h := g.h
	i := int(ev.Ctx)
	if i < 0 || i >= len(h.conns) || h.conns[i].id != ev.ID {
		return // an attempt already ended
	}
	c := &h.conns[i]
	if c.step == stepEnded {
		return
	}
	lockstep := g.cfg.Lockstep
	switch ev.Type {
	case fabric.CMAddrResolved:
		g.phase(i, result.PhaseResolveAddr)
		c.step = stepRoute
		if lockstep {
			c.ready = true
			return
		}
		g.route(i)
	case fabric.CMRouteResolved:
		g.phase(i, result.PhaseResolveRoute)
		if lockstep {
			c.step, c.ready = stepQP, true
			return
		}
		if g.createQP(i) {
			g.connect(i)
		}
	case fabric.CMEstablished:
		g.phase(i, result.PhaseEstablish)
		g.recs[i].RemoteQPN = ev.RemoteQPN
		g.end(i, result.OutcomeOK, "", nil)
	case fabric.CMRejected:
		why := fmt.Sprintf("reason %d", ev.Status)
		if name := rejectReasons[ev.Status]; name != "" {
			why += " (" + name + ")"
		}
		g.end(i, result.OutcomeRejected, fmt.Sprintf("%s, private data %d bytes", why, ev.PrivateDataLen), nil)
	case fabric.CMUnreachable:
		g.endStatus(i, result.OutcomeUnreachable, ev.Status)
	case fabric.CMConnectError:
		g.endStatus(i, result.OutcomeConnectError, ev.Status)
	case fabric.CMAddrError:
		g.endStatus(i, result.OutcomeAddrError, ev.Status)
	case fabric.CMRouteError:
		g.endStatus(i, result.OutcomeRouteError, ev.Status)
	case fabric.CMDisconnected, fabric.CMDeviceRemoval, fabric.CMAddrChange:
		if c.step == stepHeld {
			// Made, then closed by the other side before the last
			// attempt of this generator ended.
			g.recs[i].Outcome, g.recs[i].Error = result.OutcomeDisconnected, ev.Type.String()
			c.release(false)
			c.step = stepEnded
		} else {
			g.end(i, result.OutcomeDisconnected, ev.Type.String(), nil)
		}
	}
}

// rejectReasons names the IB CM's reject reasons (IBTA 12.6.7.2) that
// an rdma_cm client meets: what a RoCE or InfiniBand REJECTED carries.
var rejectReasons = map[int]string{
	1: "no QP", 3: "no resources", 4: "timeout", 5: "unsupported", 6: "invalid comm ID",
	8: "invalid service ID: no listener", 10: "stale connection", 26: "invalid MTU",
	27: "insufficient responder resources", 28: "consumer defined", 29: "invalid RNR retry",
	31: "invalid class version",
}

// startAt is when attempt i starts at rate per second.
func startAt(begin time.Time, i int, rate float64) time.Time {
	return begin.Add(time.Duration(float64(i) / rate * float64(time.Second)))
}

func stepName(step int) string {
	switch step {
	case stepAddr:
		return "resolving the address"
	case stepRoute:
		return "resolving the route"
	case stepQP:
		return "waiting for the rest of its lockstep batch to resolve its routes"
	default:
		return "connecting"
	}
}
