package client

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/hist"
	"github.com/rdmaprobe/rdmaprobe/payload"
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

// wrID kinds: a work request's ID is kind<<32 | slot (or receive buffer).
const (
	kindSend = iota + 1
	kindRecv
	kindWrite
	kindRead
	kindVerify
)

func wrid(kind, j int) uint64        { return uint64(kind)<<32 | uint64(uint32(j)) }
func unwrid(id uint64) (kind, j int) { return int(id >> 32), int(uint32(id)) }

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
	flows    []*flow
	// ping: the one flow's traffic runs in the provider (flow.ping).
	ping bool
}

// slot is one outstanding-message position of a client.
type slot struct {
	busy   bool
	seq    uint64
	due    time.Time // latency runs from here
	posted time.Time
	sent   bool // send: the send completed
	// next is the message already written into the slot's send buffer
	// for its next post (0: none): a send's buffer is free once the send
	// completed, which is before its echo comes back, so the next message
	// is filled while the server works on the echo instead of between the
	// echo and the next post (in the TCG guest a 4 KiB fill is 3-5 µs of
	// every round trip at one client).
	next     uint64
	echoed   bool // send: its echo arrived
	verified bool // write: read back after the phase
}

// flow is one client's traffic. mu serialises the router, the ticker and
// the end of the phase.
type flow struct {
	e   *engine
	c   *Conn
	lat *hist.Hist // the client's group's: only its router records

	mu        sync.Mutex
	slots     []slot
	busy      int
	seq       uint64
	count     int64 // messages completed in the window
	settled   bool  // measured, or failed: no longer holds the window open
	finished  bool
	failClass string
	failText  string
	lost      int64
	// open loop
	nextDue       time.Time
	late, blocked int64
	dueInWindow   int64
	lastSeq       []uint64 // write: the last message of each slot
	verifyStarted bool
	verifyPending int
	// pl is the flow's traffic as the provider runs it (fabric.Pinger,
	// engine.ping), answered the messages it sent.
	pl       *fabric.PingLoop
	pinger   fabric.Pinger
	answered int64
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
	e := &engine{cfg: cfg, size: d.cfg.MsgSize}
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
		f := &flow{e: e, c: c, lat: h, slots: make([]slot, cfg.Depth)}
		if cfg.Op == result.OpWrite {
			f.lastSeq = make([]uint64, cfg.Depth)
		}
		e.flows = append(e.flows, f)
	}
	// One client, one message at a time, closed loop, busy-polled: its
	// router owns the process's polling, and a provider that can runs
	// the client's loop itself (flow.ping).
	e.ping = len(e.flows) == 1 && cfg.Op == result.OpSend && cfg.Depth == 1 && cfg.Rate == 0 && d.cfg.BusyPoll > 0
	cpu0, spun0 := cpuTime(), spun(lats)
	e.active.Store(int64(len(e.flows)))
	e.pending.Store(int64(len(e.flows)))
	// Receives for the echoes, twice Depth (see echoLocked): the connect
	// left one posted, in buffer 0.
	if cfg.Op == result.OpSend {
		for _, f := range e.flows {
			for j := 1; j < 2*cfg.Depth; j++ {
				if err := f.c.qp.PostRecv(wrid(kindRecv, j), f.c.buf.mr, f.c.buf.recvOff(j), e.size); err != nil {
					f.failLocked(result.TrafficPost, fmt.Errorf("post receive %d: %w", j, err))
				}
			}
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
	e.tick(ctx)
	elapsed := time.Since(e.start)
	for _, f := range e.flows {
		f.c.flow.Store(nil)
	}
	cpu := cpuTime() - cpu0

	end := e.windowEnd()
	window := min(elapsed, end.Sub(e.start))
	rep.DurationSec = window.Seconds()
	rep.GeneratorCPU = cpu.Seconds() / elapsed.Seconds()
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

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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

// settleLocked stops the client holding the window open: it is
// measured, or it failed.
func (f *flow) settleLocked() {
	if f.settled {
		return
	}
	f.settled = true
	if f.e.pending.Add(-1) == 0 {
		f.e.allMeasured()
	}
}

// countLocked counts a message completed at now if that is inside the
// window.
func (f *flow) countLocked(now time.Time) {
	if now.Before(f.e.windowEnd()) {
		f.count++
		if f.count >= MinMessages {
			f.settleLocked()
		}
	}
}

// fillLocked posts messages into every free slot (closed loop), or ends
// the client's phase once the window is over and nothing is outstanding.
func (f *flow) fillLocked(now time.Time) {
	if f.finished {
		return
	}
	if f.e.done(now) {
		f.drainedLocked()
		return
	}
	for f.busy < len(f.slots) && f.failClass == "" {
		f.postLocked(now, now)
	}
}

// paceLocked posts the open loop's messages due by now while slots are
// free; from the ticker, those an interval late are the generator's.
func (f *flow) paceLocked(now time.Time) {
	f.postDueLocked(now, true)
}

// postDueLocked posts due messages into free slots. byPacer tells who
// found them: the ticker (lateness is the generator's) or a completion
// that freed a slot (the message waited for it).
func (f *flow) postDueLocked(now time.Time, byPacer bool) {
	e := f.e
	for f.failClass == "" && f.busy < len(f.slots) && !f.nextDue.After(now) && !e.done(now) {
		due := f.nextDue
		f.nextDue = due.Add(e.interval)
		f.dueInWindow++
		if now.Sub(due) >= e.interval {
			if byPacer {
				f.late++
			} else {
				f.blocked++
			}
		}
		f.postLocked(due, now)
	}
	if e.done(now) || !f.nextDue.Before(e.windowEnd()) {
		f.drainedLocked()
	}
}

// postLocked posts one message into a free slot.
func (f *flow) postLocked(due, now time.Time) {
	j := 0
	for f.slots[j].busy {
		j++
	}
	for k := j; k < len(f.slots); k++ {
		if !f.slots[k].busy && f.slots[k].next != 0 {
			j = k // a slot whose message is written already
			break
		}
	}
	c, e := f.c, f.e
	s := &f.slots[j]
	seq, written := s.next, s.next != 0
	if !written {
		f.seq++
		seq = f.seq
	}
	*s = slot{busy: true, seq: seq, due: due, posted: now}
	var err error
	switch e.cfg.Op {
	case result.OpSend:
		if !written {
			payload.Fill(c.sendBuf(j), seq, e.size)
		}
		err = c.qp.PostSend(wrid(kindSend, j), c.buf.mr, c.buf.sendOff(j), e.size)
	case result.OpWrite:
		payload.Fill(c.sendBuf(j), seq, e.size)
		err = c.qp.PostWrite(wrid(kindWrite, j), c.buf.mr, c.buf.sendOff(j), e.size,
			c.remote.Addr+uint64(j*e.size), c.remote.RKey)
	case result.OpRead:
		clear(c.recvBuf(j)[:payload.HeaderLen])
		err = c.qp.PostRead(wrid(kindRead, j), c.buf.mr, c.buf.recvOff(j), e.size,
			c.remote.Addr+uint64(j*e.size), c.remote.RKey)
	}
	if err != nil {
		s.busy = false
		f.failLocked(result.TrafficPost, err)
		return
	}
	f.busy++
}

// take is a completion of this client, from its group's router.
func (f *flow) take(wc fabric.WC) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.finished {
		if wc.Status != fabric.WCSuccess && f.failClass == fabric.WCWRFlushErr.Name() && wc.Status != fabric.WCWRFlushErr {
			// A flushed receive came first; this is what failed.
			f.failClass, f.failText = wc.Status.Name(), (&fabric.WCError{Op: wc.Opcode.String(), Status: wc.Status}).Error()
		}
		return
	}
	if wc.Status != fabric.WCSuccess {
		f.failLocked(wc.Status.Name(), &fabric.WCError{Op: wc.Opcode.String(), Status: wc.Status})
		return
	}
	kind, j := unwrid(wc.WRID)
	if kind == 0 && j == 0 && wc.Opcode == fabric.WCRecv {
		kind = kindRecv // the receive the connect left posted in buffer 0
	}
	if n := len(f.slots); j < 0 || j >= n && (kind != kindRecv || j >= 2*n) {
		return // receive buffers are twice the slots
	}
	e, c := f.e, f.c
	switch kind {
	case kindSend:
		if s := &f.slots[j]; s.busy && !s.sent {
			s.sent = true
			if !s.echoed && !e.done(now) {
				f.seq++
				s.next = f.seq
				payload.Fill(c.sendBuf(j), s.next, e.size)
			}
			f.echoDoneLocked(j, now)
		}
	case kindRecv:
		if class, err := f.echoLocked(wc, j, now); err != nil {
			f.failLocked(class, err)
			return
		}
	case kindWrite:
		s := &f.slots[j]
		if !s.busy {
			return
		}
		f.lastSeq[j] = s.seq
		f.doneLocked(j, now)
	case kindRead:
		s := &f.slots[j]
		if !s.busy {
			return
		}
		want := payload.RegionSeq(c.serverQPN, j)
		// Not wc.ByteLen: verbs leaves it undefined for a READ.
		if err := checkRegion(c.recvBuf(j), e.size, want); err != nil {
			// The server fills slot j at j × its --msg-size: a server
			// started by hand with another size fails here.
			f.failLocked(result.TrafficVerify, fmt.Errorf("read of slot %d: %w (the server's --msg-size must be the clients')", j, err))
			return
		}
		f.doneLocked(j, now)
	case kindVerify:
		f.verifyPending--
		if err := checkRegion(c.recvBuf(j), e.size, f.lastSeq[j]); err != nil {
			f.failLocked(result.TrafficVerify, fmt.Errorf("slot %d read back after the phase: %w", j, err))
			return
		}
		if !bytes.Equal(c.recvBuf(j), c.sendBuf(j)) {
			f.failLocked(result.TrafficVerify, fmt.Errorf("slot %d read back after the phase differs from the message written", j))
			return
		}
		f.slots[j].verified = true
		f.drainedLocked()
	}
}

// checkRegion verifies a message read from the server's buffer.
func checkRegion(b []byte, size int, want uint64) error {
	if len(b) != size {
		return fmt.Errorf("%d bytes, want %d", len(b), size)
	}
	seq, err := payload.Check(b)
	if err != nil {
		return err
	}
	if seq != want {
		return fmt.Errorf("holds message %#x, want %#x", seq, want)
	}
	return nil
}

// echoLocked takes the echo that arrived in receive buffer r: it
// completes its message's slot, verifies it and posts the buffer again.
// While the window is open the slot's next message (already written:
// slot.next) goes out first, the check and the repost after it: they
// overlap the next round trip instead of lengthening this one (in the TCG
// guest the check of 4 KiB is 3 µs and the repost a cgo call, of a ~60
// µs round trip). The client keeps twice Depth receives posted (bufs),
// so the next echo finds one while this buffer waits to be checked. A
// failed check still fails the client; the message posted before it is
// then counted lost with the rest of its outstanding ones.
func (f *flow) echoLocked(wc fabric.WC, r int, now time.Time) (class string, err error) {
	size := f.e.size
	if wc.ByteLen != size {
		return result.TrafficVerify, fmt.Errorf("echo of %d bytes, sent %d", wc.ByteLen, size)
	}
	echo := f.c.recvBuf(r)
	seq, j := payload.Seq(echo), -1
	for k := range f.slots {
		if s := &f.slots[k]; s.busy && !s.echoed && s.seq == seq {
			j = k
			break
		}
	}
	if j < 0 {
		if _, err := payload.Check(echo); err != nil {
			return result.TrafficVerify, fmt.Errorf("echo: %w", err)
		}
		return result.TrafficVerify, fmt.Errorf("echo of message %d, which is not outstanding", seq)
	}
	s := &f.slots[j]
	s.echoed = true
	due, sent := s.due, s.sent
	early := sent && !f.e.done(now)
	if early {
		f.releaseLocked(j, now)
	}
	// Every message sent is payload.Fill(its seq, size), so an echo of
	// that length that checks as message seq is the message byte for
	// byte. The check regenerates it, which in the TCG guest costs less
	// than comparing with the send buffer (bytes.Equal, SSE2 emulated).
	if _, err := payload.Check(echo); err != nil {
		return result.TrafficVerify, fmt.Errorf("echo: %w", err)
	}
	f.lat.RecordDuration(now.Sub(due))
	f.countLocked(now)
	if err := f.c.qp.PostRecv(wrid(kindRecv, r), f.c.buf.mr, f.c.buf.recvOff(r), size); err != nil {
		return result.TrafficPost, fmt.Errorf("repost receive: %w", err)
	}
	if sent && !early {
		f.releaseLocked(j, now)
	}
	return "", nil
}

// startPingLocked hands the flow's traffic to its provider (e.ping),
// if that can run it (fabric.Pinger): from its first message on, the
// router runs the loop (ping) instead of polling the CQ itself.
func (f *flow) startPingLocked() {
	c := f.c
	p, ok := c.qp.(fabric.Pinger)
	if !ok || f.finished {
		return
	}
	f.pinger = p
	f.pl = &fabric.PingLoop{QP: c.qp, CQ: c.group.cq, MR: c.buf.mr, SendOff: c.buf.sendOff(0),
		RecvOff: [2]int{c.buf.recvOff(0), c.buf.recvOff(1)}, Size: f.e.size,
		SendWRID: wrid(kindSend, 0), RecvWRID: [2]uint64{wrid(kindRecv, 0), wrid(kindRecv, 1)}, End: f.e.windowEnd()}
	c.group.pinging.Store(f)
}

// pingSlice bounds one call of the provider's loop: the latencies it
// took are recorded, and the ticker's checks see the slot, at least this
// often. Well under the 10 ms after which Go's sysmon takes the
// processor of a goroutine in a cgo call even while others are idle.
const pingSlice = 2 * time.Millisecond

// ping runs the flow's traffic in its provider (fabric.Pinger) for up to
// a slice, for the router, from and back into the flow's slot; it is
// the flow's own loop (take, echoLocked) in the provider's code. It
// returns 1 and the completion in wc[0] when the loop left one to route
// (the flow takes it as any), idle when nothing came for busy (the
// router then waits for the CQ's event), or an error when the CQ can no
// longer be polled.
func (f *flow) ping(ctx context.Context, wc []fabric.WC, busy time.Duration) (n int, idle bool, err error) {
	f.mu.Lock()
	if f.finished || ctx.Err() != nil {
		f.mu.Unlock()
		f.c.group.pinging.CompareAndSwap(f, nil)
		return 0, ctx.Err() != nil, nil
	}
	l, s := f.pl, &f.slots[0]
	l.End = f.e.windowEnd() // shortened once the client is measured
	l.Seq, l.Posted, l.Sent, l.Echoed, l.Next, l.Last = 0, s.posted, s.sent, s.echoed, s.next, f.seq
	if s.busy {
		l.Seq = s.seq
	}
	f.mu.Unlock()
	stop, err := f.pinger.PingSpin(l, busy, pingSlice)
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if stop == fabric.PingWC {
		wc[0], n = l.WC, 1
	}
	if f.finished {
		return n, false, nil // the ticker ended the phase meanwhile: nothing more counts
	}
	for _, d := range l.Lat {
		f.lat.RecordDuration(d)
	}
	f.count += l.Counted
	if f.count >= MinMessages {
		f.settleLocked()
	}
	f.answered += l.Posts
	*s = slot{busy: l.Seq != 0, seq: l.Seq, due: l.Posted, posted: l.Posted, sent: l.Sent, echoed: l.Echoed, next: l.Next}
	f.busy, f.seq = 0, l.Last
	if s.busy {
		f.busy = 1
	}
	switch stop {
	case fabric.PingPost:
		f.failLocked(result.TrafficPost, err)
		return 0, false, nil
	case fabric.PingBadEcho:
		_, cerr := payload.Check(f.c.recvBuf(l.Bad))
		if cerr == nil {
			cerr = fmt.Errorf("message %d failed the provider's check", payload.Seq(f.c.recvBuf(l.Bad)))
		}
		f.failLocked(result.TrafficVerify, fmt.Errorf("echo: %w", cerr))
	case fabric.PingDone:
		f.fillLocked(now)
	}
	return n, stop == fabric.PingIdle, err
}

// echoDoneLocked frees a send slot once both its send and its echo are
// in (in either order); the echo counted the message.
func (f *flow) echoDoneLocked(j int, now time.Time) {
	if s := &f.slots[j]; s.sent && s.echoed {
		f.releaseLocked(j, now)
	}
}

// doneLocked completes a WRITE or READ slot.
func (f *flow) doneLocked(j int, now time.Time) {
	f.lat.RecordDuration(now.Sub(f.slots[j].due))
	f.completeLocked(j, now)
}

// completeLocked counts slot j's message if it completed in the window
// and frees the slot.
func (f *flow) completeLocked(j int, now time.Time) {
	f.countLocked(now)
	f.releaseLocked(j, now)
}

// releaseLocked frees slot j and sends what is next.
func (f *flow) releaseLocked(j int, now time.Time) {
	f.slots[j].busy = false
	f.busy--
	if f.e.interval > 0 {
		f.postDueLocked(now, false)
	} else {
		f.fillLocked(now)
	}
}

// drainedLocked ends the client's phase once the window is over and
// nothing is outstanding; a writer first reads its slots back.
func (f *flow) drainedLocked() {
	if f.finished || f.busy > 0 || f.failClass != "" {
		return
	}
	if f.e.interval > 0 && f.nextDue.Before(f.e.windowEnd()) && !f.e.done(time.Now()) {
		return // more messages are due in the window
	}
	if f.e.cfg.Op == result.OpWrite && !f.e.stopped.Load() {
		if !f.verifyStarted {
			f.verifyStarted = true
			f.verifyLocked()
			if f.failClass != "" {
				return
			}
		}
		if f.verifyPending > 0 {
			return
		}
	}
	f.finishLocked()
}

// verifyLocked reads back every slot the client wrote.
func (f *flow) verifyLocked() {
	c, size := f.c, f.e.size
	now := time.Now()
	for j, seq := range f.lastSeq {
		if seq == 0 {
			continue
		}
		clear(c.recvBuf(j)[:payload.HeaderLen])
		err := c.qp.PostRead(wrid(kindVerify, j), c.buf.mr, c.buf.recvOff(j), size,
			c.remote.Addr+uint64(j*size), c.remote.RKey)
		if err != nil {
			f.failLocked(result.TrafficPost, fmt.Errorf("read back slot %d: %w", j, err))
			return
		}
		f.slots[j].posted = now
		f.verifyPending++
	}
}

// checkLocked fails the client if a message (or a read-back) has been
// outstanding longer than the timeout.
func (f *flow) checkLocked(now time.Time) {
	limit := f.e.cfg.Timeout
	for j := range f.slots {
		s := &f.slots[j]
		if (s.busy || (f.verifyPending > 0 && f.lastSeq[j] != 0 && !s.verified)) && now.Sub(s.posted) > limit {
			f.failLocked(result.TrafficTimeout, fmt.Errorf("no completion for message %d within %v", s.seq, limit))
			return
		}
	}
	if f.e.interval == 0 && f.e.done(now) {
		f.drainedLocked()
	}
}

// failLocked ends the client's phase at its first failure: the messages
// it has outstanding are lost to class.
func (f *flow) failLocked(class string, err error) {
	if f.failClass != "" {
		return
	}
	f.failClass, f.failText = class, err.Error()
	f.lost = max(int64(f.busy), int64(f.verifyPending), 1)
	f.settleLocked() // a failed client cannot be measured: it holds no window open
	f.finishLocked()
}

// cqBroken fails the client when its group's CQ can no longer be read.
func (f *flow) cqBroken(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.finished {
		f.failLocked("cq-error", err)
	}
}

// finishLocked marks the client done with the phase.
func (f *flow) finishLocked() {
	if f.finished {
		return
	}
	f.finished = true
	if f.pl != nil {
		f.c.group.pinging.CompareAndSwap(f, nil)
	}
	f.e.active.Add(-1)
}
