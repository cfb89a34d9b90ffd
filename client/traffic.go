package client

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmaprobe/rdmaprobe/collectors"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/hist"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// The traffic phase: once every client of a point is connected, each
// exchanges verified messages with the server for a window of at least
// Duration, extended (up to MaxDuration) until every client completed
// MinMessages inside it: a client that completed fewer is unmeasured,
// and a window's rates would otherwise describe only the clients the
// server got round to.
//
// Closed loop (Rate 0): each client keeps Depth messages outstanding and
// posts the next as soon as one completes. Open loop (Rate > 0): each
// client is due a message every 1/Rate seconds, the clients' schedules
// staggered evenly over one interval; a message's latency runs from the
// time it was due, not from when it went out, so a server (or a
// generator) that falls behind shows as latency rather than vanishing
// from it (no coordinated omission). A due message waits while Depth are
// outstanding ("blocked", the server's doing); one sent an interval or
// more after it was due although a slot was free is "late", the
// generator's doing (k6's dropped iterations): more than 1% of them make
// the phase the harness's limit (result.Traffic.Summarize).
//
// Operations:
//   - send: a self-checking payload (payload.Fill) that the server echoes;
//     the message counts when its echo arrived byte for byte.
//   - write: an RDMA WRITE of a self-checking payload into the client's
//     slot of the server's buffer; it counts when its completion says the
//     server's device placed it. After the phase each client reads each
//     slot back and checks it holds the last message written there.
//   - read: an RDMA READ of the client's slot, which the server filled
//     with payload.RegionSeq(its QPN, slot); it counts when the bytes
//     arrived and verify (the header is cleared before each read, so a
//     read that placed nothing cannot pass).
//
// No goroutine per client: the group routers (group.go) run each
// client's completions through its flow, one ticker goroutine paces the
// open loop, notices messages outstanding past Timeout and ends the
// phase. A client stops at its first failure; the messages it had
// outstanding are counted under what ended it (a completion status
// name, timeout, verify, post), and nothing it completes later counts.

// TrafficConfig is one traffic phase.
type TrafficConfig struct {
	Op       string        `json:"op,omitempty"` // result.OpSend (default), OpWrite, OpRead
	Duration time.Duration `json:"duration"`     // the window's minimum; 0 = no phase
	// MaxDuration caps the window: past Duration it stays open until
	// every client that has not failed completed MinMessages in it, up to
	// MaxDuration (Duration or less: a fixed window). Every client keeps
	// its load for the whole window, so the rates keep their meaning.
	MaxDuration time.Duration `json:"max_duration,omitempty"`
	Depth       int           `json:"depth,omitempty"` // messages outstanding per client (≤ Config.Depth)
	Rate        float64       `json:"rate,omitempty"`  // messages/s per client; 0 = closed loop
	// Timeout is how long a message may stay outstanding before its
	// client is failed as "timeout" (the peer stopped answering).
	Timeout time.Duration `json:"timeout,omitempty"`
	// BusyPoll is Config.BusyPoll for the server and the generators of a
	// run with a traffic phase (--busy-poll).
	BusyPoll time.Duration `json:"busy_poll,omitempty"`
	// Shared, when set, ends the window together with other generators'
	// (the runner's): the window ends when every generator's clients are
	// measured, not only these.
	Shared *SharedWindow `json:"-"`
	// Progress, if set, is told once a second while the window is open
	// how many messages its clients have completed in it so far (live
	// metrics); reading the count takes each client's lock once.
	Progress func(messages int64) `json:"-"`
}

// MaxDepth bounds Depth (--depth): every client's queues and buffers
// grow with it, on both sides.
const MaxDepth = 1024

// Check refuses a phase no client could run, in the words of the flags
// that set it. It holds every rule of the traffic options, whichever
// command takes them (runner.Spec.Check for search and ramp, clients by
// hand). The depth and busy-polling rules hold with no phase too: they
// size and pace the connect's round trips.
func (t TrafficConfig) Check() error {
	if err := CheckBusyPoll(t.BusyPoll); err != nil {
		return err
	}
	switch {
	case t.Duration < 0:
		return fmt.Errorf("--traffic %v: want 0 (no traffic phase) or more", t.Duration)
	case t.MaxDuration < 0:
		return fmt.Errorf("--traffic-max %v: want 0 (a fixed window) or more", t.MaxDuration)
	}
	if t.Duration == 0 && t.Depth == 0 {
		return nil // no phase, and no depth for the round trips
	}
	if err := CheckDepth(t.Depth); err != nil || t.Duration == 0 {
		return err
	}
	switch {
	case t.Op != "" && !slices.Contains(result.Ops, t.Op):
		return fmt.Errorf("--op %q: want one of %s", t.Op, strings.Join(result.Ops, ", "))
	case !(t.Rate >= 0 && !math.IsInf(t.Rate, 1)): // NaN too
		return fmt.Errorf("--msg-rate %g: want 0 (closed loop) or more messages/s per client", t.Rate)
	case t.Timeout < 0:
		return fmt.Errorf("--msg-timeout %v: want more than 0", t.Timeout)
	}
	return nil
}

// CheckBusyPoll refuses a --busy-poll out of 0..1s.
func CheckBusyPoll(d time.Duration) error {
	if d < 0 || d > time.Second {
		return fmt.Errorf("--busy-poll %v: want 0 (off) to 1s", d)
	}
	return nil
}

// CheckDepth refuses a --depth out of 1..MaxDepth.
func CheckDepth(d int) error {
	if d < 1 || d > MaxDepth {
		return fmt.Errorf("--depth %d: want 1 to %d messages outstanding per client", d, MaxDepth)
	}
	return nil
}

// SharedWindow is a window that ends across generators at once.
type SharedWindow struct {
	// Measured is called once (on its own goroutine) when every client of
	// this generator that has not failed completed MinMessages in the
	// window.
	Measured func()
	// End is closed when every generator's clients are measured: the
	// window ends then, or at Duration if that is later.
	End <-chan struct{}
}

// MinMessages is how many messages a client must complete inside the
// window to be measured. One: a client with one round trip in the window
// has a rate the window describes, and needing more would stretch the
// window of a loaded server by as many of its slowest round trips.
const MinMessages = 1

// DefaultMaxDuration is TrafficConfig.MaxDuration unless set: the
// default message timeout, since by then every client's first message
// has completed or failed it as timeout (closed loop), so a longer
// window would measure no more clients.
const DefaultMaxDuration = DefaultMsgTimeout

// DefaultMsgTimeout is TrafficConfig.Timeout when unset: long enough
// that a server slow under thousands of clients (seconds per round trip
// in the TCG guest) shows as latency, which SLOs judge, and a peer that
// is gone still ends its clients' phase within it.
const DefaultMsgTimeout = 30 * time.Second

// engine is one generator's phase.
type engine struct {
	cfg   TrafficConfig
	size  int
	start time.Time
	// endOff is when the window ends, from start: tentatively MaxDuration
	// until every client is measured (settle), which only shortens it.
	endOff   atomic.Int64
	minEnd   time.Time // start + Duration
	interval time.Duration
	// pending counts the clients not measured yet that have not failed;
	// measured is called once when it reaches 0 after the start.
	pending  atomic.Int64
	started  atomic.Bool
	measured sync.Once
	stopped  atomic.Bool // interrupted: post nothing more
	active   atomic.Int64
	// idle is closed when active reaches 0, so that tick returns then,
	// not at its next period (up to 50 ms later, every phase).
	idle  chan struct{}
	flows []*flow
	// ping: the one flow's traffic runs in the provider (flow.ping).
	ping bool
}

// Traffic runs the traffic phase of conns (connected by d) and reports
// it. ctx ending stops it at once: outstanding messages are counted as
// interrupted and the report's Error says so.
func (d *Dialer) Traffic(ctx context.Context, conns []*Conn, cfg TrafficConfig) result.Traffic {
	if cfg.Op == "" {
		cfg.Op = result.OpSend
	}
	if cfg.Depth < 1 {
		cfg.Depth = 1
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultMsgTimeout
	}
	cfg.MaxDuration = max(cfg.MaxDuration, cfg.Duration)
	rep := result.Traffic{Op: cfg.Op, MsgBytes: d.cfg.MsgSize, Depth: cfg.Depth, RatePerClient: cfg.Rate,
		Clients: len(conns), LatencyHist: hist.Latency(), ClientHist: hist.Counts(),
		GeneratorCores: runtime.GOMAXPROCS(0), MinDurationSec: cfg.Duration.Seconds()}
	if err := d.checkTraffic(conns, cfg); err != nil {
		rep.Error = err.Error()
		return rep
	}
	if len(conns) == 0 || cfg.Duration <= 0 {
		return rep
	}
	e := &engine{cfg: cfg, size: d.cfg.MsgSize, idle: make(chan struct{})}
	if cfg.Rate > 0 {
		e.interval = time.Duration(float64(time.Second) / cfg.Rate)
		rep.Schedule = &result.Schedule{}
	}
	lats := map[*cqGroup]*hist.Hist{}
	for _, c := range conns {
		h := lats[c.group]
		if h == nil {
			h = hist.Latency()
			lats[c.group] = h
		}
		// A logical client's messages go on from its round trips so far.
		f := &flow{e: e, c: c, lat: h, slots: make([]slot, cfg.Depth), seq: c.sent}
		if cfg.Op == result.OpWrite {
			f.lastSeq = make([]uint64, cfg.Depth)
		}
		e.flows = append(e.flows, f)
	}
	// One client, one message at a time, closed loop, busy-polled: its
	// router owns the process's polling, and a provider that can runs
	// the client's loop itself (flow.ping).
	e.ping = len(e.flows) == 1 && conns[0].sq == nil && cfg.Op == result.OpSend && cfg.Depth == 1 && cfg.Rate == 0 && d.cfg.BusyPoll > 0
	cpu0, sys0 := collectors.SelfCPU()
	spun0 := spun(lats)
	e.active.Store(int64(len(e.flows)))
	e.pending.Store(int64(len(e.flows)))
	// Receives for the echoes, twice Depth (see echoLocked): the connect
	// left one posted, in buffer 0. A shared QP has its logical clients'
	// posted already (openShared).
	if cfg.Op == result.OpSend {
		for _, f := range e.flows {
			if f.c.sq != nil {
				continue
			}
			j := max(1, f.c.recvs)
			for ; j < 2*cfg.Depth; j++ {
				if err := f.c.postRecv(wrid(kindRecv, j), j, e.size); err != nil {
					f.failLocked(result.TrafficPost, fmt.Errorf("post receive %d: %w", j, err))
					break
				}
			}
			f.c.recvs = max(f.c.recvs, j)
		}
	}
	e.start = time.Now()
	e.minEnd = e.start.Add(cfg.Duration)
	e.endOff.Store(int64(cfg.MaxDuration))
	e.started.Store(true)
	if e.pending.Load() == 0 {
		e.allMeasured() // every client failed before the start
	}
	for i, f := range e.flows {
		f.c.flow.Store(f)
		f.mu.Lock()
		if f.finished {
			// Failed before it started.
		} else if e.interval > 0 {
			// Staggered over one interval, so the clients' messages do not
			// all fall due at once.
			f.nextDue = e.start.Add(e.interval * time.Duration(i) / time.Duration(len(e.flows)))
			f.paceLocked(e.start)
		} else {
			f.fillLocked(e.start)
			if e.ping {
				f.startPingLocked()
			}
		}
		f.mu.Unlock()
	}
	stopProgress := e.reportProgress()
	e.tick(ctx)
	stopProgress()
	elapsed := time.Since(e.start)
	for _, f := range e.flows {
		f.c.flow.Store(nil)
		if f.c.sq != nil {
			f.mu.Lock()
			f.c.sent = f.seq
			f.mu.Unlock()
		}
	}
	cpu, sys := collectors.SelfCPU()
	cpu, sys = cpu-cpu0, sys-sys0

	end := e.windowEnd()
	window := min(elapsed, end.Sub(e.start))
	rep.DurationSec = window.Seconds()
	rep.GeneratorCPU = cpu.Seconds() / elapsed.Seconds()
	rep.GeneratorSys = sys.Seconds() / elapsed.Seconds()
	if spun0 >= 0 {
		rep.GeneratorSpin = (spun(lats) - spun0).Seconds() / elapsed.Seconds()
	}
	if e.stopped.Load() {
		rep.Error = fmt.Sprintf("interrupted after %.1fs of the %v phase", elapsed.Seconds(), cfg.Duration)
	}
	for _, h := range lats {
		rep.LatencyHist.Merge(h)
	}
	for _, f := range e.flows {
		f.mu.Lock()
		rep.ClientHist.Record(f.count)
		rep.Messages += f.count
		if f.count < MinMessages {
			rep.AddUnmeasured(f.c.id)
		}
		rep.Answered += f.answered
		if f.failClass != "" {
			if rep.Errors == nil {
				rep.Errors, rep.ErrorText = map[string]int64{}, map[string]string{}
			}
			rep.Errors[f.failClass] += max(f.lost, 1)
			if _, ok := rep.ErrorText[f.failClass]; !ok {
				rep.ErrorText[f.failClass] = f.failText
			}
			if f.failClass != result.TrafficInterrupted {
				rep.ClientsFailed++
			}
		}
		if s := rep.Schedule; s != nil {
			unsent := int64(0)
			if f.failClass == "" && f.nextDue.Before(end) {
				unsent = int64((end.Sub(f.nextDue) + e.interval - 1) / e.interval)
			}
			s.Due += f.dueInWindow + unsent
			s.Late += f.late
			s.Blocked += f.blocked
			s.Unsent += unsent
		}
		f.mu.Unlock()
	}
	rep.Bytes = rep.Messages * int64(e.size)
	rep.Summarize()
	return rep
}

// checkTraffic refuses a phase the clients cannot run.
func (d *Dialer) checkTraffic(conns []*Conn, cfg TrafficConfig) error {
	switch cfg.Op {
	case result.OpSend, result.OpWrite, result.OpRead:
	default:
		return fmt.Errorf("unknown traffic operation %q (want send, write or read)", cfg.Op)
	}
	if cfg.Depth > d.cfg.Depth {
		return fmt.Errorf("depth %d is more than the %d the clients were connected for", cfg.Depth, d.cfg.Depth)
	}
	if cfg.Op == result.OpSend {
		return nil
	}
	if d.cfg.Mux > 0 {
		return fmt.Errorf("RDMA %s: logical clients sharing a QP exchange messages only (send); the server lends them no buffer", cfg.Op)
	}
	need := uint64(cfg.Depth) * uint64(d.cfg.MsgSize)
	for _, c := range conns {
		if c.remote.Len == 0 {
			return fmt.Errorf("RDMA %s needs a server buffer, and the server offered none (serve --remote)", cfg.Op)
		}
		if uint64(c.remote.Len) < need {
			return fmt.Errorf("RDMA %s of depth %d × %d bytes needs %d bytes of the server's buffer per client; it offered %d",
				cfg.Op, cfg.Depth, d.cfg.MsgSize, need, c.remote.Len)
		}
	}
	return nil
}

// spun is the time the routers of the phase's groups (the keys of lats)
// have spent busy-polling empty CQs so far (fabric.SpinCounter), or -1
// if a group's CQ does not count it.
func spun(lats map[*cqGroup]*hist.Hist) time.Duration {
	var d time.Duration
	for g := range lats {
		sc, ok := g.cq.(fabric.SpinCounter)
		if !ok {
			return -1
		}
		d += sc.Spun()
	}
	return d
}

// tick runs until every flow finished: it paces the open loop, fails
// clients whose messages are outstanding past the timeout, ends the
// window, and stops everything when ctx ends.
func (e *engine) tick(ctx context.Context) {
	period := min(e.cfg.Timeout/4, 50*time.Millisecond)
	if e.interval > 0 {
		period = min(period, max(e.interval/4, 200*time.Microsecond))
	}
	t := time.NewTimer(0)
	defer t.Stop()
	var end <-chan struct{}
	if e.cfg.Shared != nil {
		end = e.cfg.Shared.End
	}
	for e.active.Load() > 0 {
		select {
		case <-end:
			end = nil
			e.settle(time.Now())
			continue
		case <-e.idle:
			return
		case <-ctx.Done():
			e.stopped.Store(true)
			for _, f := range e.flows {
				f.mu.Lock()
				if !f.finished {
					f.lost = int64(f.busy)
					f.failClass, f.failText = result.TrafficInterrupted, "the phase was interrupted with the message outstanding"
					f.finishLocked()
				}
				f.mu.Unlock()
			}
			return
		case <-t.C:
		}
		now := time.Now()
		for _, f := range e.flows {
			f.mu.Lock()
			if !f.finished {
				if e.interval > 0 {
					f.paceLocked(now)
				}
				f.checkLocked(now)
			}
			f.mu.Unlock()
		}
		t.Reset(period)
	}
}

// done reports whether the window is over (or the phase interrupted).
func (e *engine) done(now time.Time) bool { return e.stopped.Load() || !now.Before(e.windowEnd()) }

// windowEnd is when the window ends, as far as is known now.
func (e *engine) windowEnd() time.Time { return e.start.Add(time.Duration(e.endOff.Load())) }

// settle ends the window at now, or at its minimum if that is later;
// a window only ever shortens.
func (e *engine) settle(now time.Time) {
	if now.Before(e.minEnd) {
		now = e.minEnd
	}
	off := int64(now.Sub(e.start))
	for {
		cur := e.endOff.Load()
		if off >= cur || e.endOff.CompareAndSwap(cur, off) {
			return
		}
	}
}

// allMeasured is called when no client holds the window open any
// more: the window ends at its minimum or now, or, shared, when the
// other generators' clients are measured too.
func (e *engine) allMeasured() {
	if !e.started.Load() {
		return // Traffic checks again at the start
	}
	if s := e.cfg.Shared; s != nil {
		e.measured.Do(func() { go s.Measured() })
		return
	}
	e.settle(time.Now())
}

// reportProgress tells cfg.Progress the messages counted so far once a
// second until the returned stop is called.
func (e *engine) reportProgress() (stop func()) {
	if e.cfg.Progress == nil {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				n := int64(0)
				for _, f := range e.flows {
					f.mu.Lock()
					n += f.count
					f.mu.Unlock()
				}
				e.cfg.Progress(n)
			}
		}
	}()
	return func() { close(quit); <-done }
}
