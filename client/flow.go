package client

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/hist"
	"github.com/rdmaprobe/rdmaprobe/payload"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// One client's side of the traffic phase (traffic.go): its slots of
// outstanding messages, what it posts when, and what each completion
// means for it.

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

// slot is one outstanding-message position of a client.
type slot struct {
	busy   bool
	seq    uint64
	order  uint64    // posts of the flow up to and with this one (ud: which went first)
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
	posts     uint64 // messages posted (slot.order)
	count     int64  // messages completed in the window
	settled   bool   // measured, or failed: no longer holds the window open
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
	f.posts++
	*s = slot{busy: true, seq: seq, order: f.posts, due: due, posted: now}
	var err error
	switch {
	case c.sq != nil:
		// A logical client: its messages go out in order (never written
		// ahead, takeLogical), as its server counts them.
		s.seq, err = f.postLogical(j, seq)
	case e.cfg.Op == result.OpSend:
		if !written {
			payload.Fill(c.sendBuf(j), seq, e.size)
		}
		err = c.postSend(wrid(kindSend, j), j, e.size)
	case e.cfg.Op == result.OpWrite:
		payload.Fill(c.sendBuf(j), seq, e.size)
		err = c.qp.PostWrite(wrid(kindWrite, j), c.buf.mr, c.buf.sendOff(j), e.size,
			c.remote.Addr+uint64(j*e.size), c.remote.RKey)
	case e.cfg.Op == result.OpRead:
		clear(c.recvBuf(j)[:payload.HeaderLen])
		err = c.qp.PostRead(wrid(kindRead, j), c.buf.mr, c.buf.recvOff(j), e.size,
			c.remote.Addr+uint64(j*e.size), c.remote.RKey)
	}
	if err != nil {
		s.busy = false
		class := result.TrafficPost
		if fe, ok := err.(*fateError); ok {
			class = fateClass(fe) // its shared QP failed
		}
		f.failLocked(class, err)
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
	n, err := f.c.received(wc)
	if err != nil {
		return result.TrafficVerify, err
	}
	if n != size {
		return result.TrafficVerify, fmt.Errorf("echo of %d bytes, sent %d", n, size)
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
	if f.c.ah != nil {
		// Datagrams of one client are echoed in order: a message posted
		// before this one and still unanswered was lost.
		for k := range f.slots {
			if o := &f.slots[k]; o.busy && !o.echoed && o.sent && o.order < f.slots[j].order {
				return result.TrafficLost, fmt.Errorf("message %d unanswered when the echo of message %d came: a datagram was lost", o.seq, seq)
			}
		}
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
	if err := f.c.postRecv(wrid(kindRecv, r), r, size); err != nil {
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
	if !ok || f.finished || c.ah != nil {
		return // the provider's loop sends over a connection, not datagrams
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
			if f.c.ah != nil && s.sent {
				// Sent, and nothing retransmits a datagram.
				f.failLocked(result.TrafficLost, fmt.Errorf("no echo of message %d within %v: the datagram or its echo was lost", s.seq, limit))
				return
			}
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
	if f.e.active.Add(-1) == 0 && f.e.idle != nil {
		close(f.e.idle)
	}
}
