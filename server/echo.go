package server

import (
	"errors"
	"fmt"
	"net"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/server/hangup"
)

// The event-driven echo of the pool and srq modes. A connected client has
// no goroutine: its group's receive router calls received (srq: verify the
// message in its SRQ buffer, send the echo from that buffer) or
// receivedOwn (pool: verify it in the client's receive slot, copy it to
// the send slot, repost the receive, send), the send router calls sent or
// sentOwn when an echo has gone, and the departure watcher calls release
// when the client leaves. c.mu serialises them for one client.

// maxPending bounds the verified messages of one client that wait for a
// free send slot (its QP has max(QPMaxSendWR, Config.Depth)), unless
// Config.Depth is larger. A client waits for each echo before sending
// again, but the send completion of echo i may be routed after the
// receive completion of message i+1 (they are on different CQs); a client
// with more outstanding than its send slots + cap(pending) breaks the
// protocol and is dropped.
const maxPending = 2

type pendingEcho struct{ buf, n int }

// received handles the receive completion of SRQ buffer k, which the
// caller claimed for c.
func (c *conn) received(wc fabric.WC, k int) {
	sh, g := c.s.shared, c.sub.group
	var err error
	c.mu.Lock()
	if !c.released {
		var n int
		n, err = c.verify(wc, k)
		// A ud client's goodbye is echoed too: nothing else tells it
		// that the datagram arrived.
		if err == nil || (c.ah != nil && errors.Is(err, errBye)) {
			if len(c.pending) == cap(c.pending) {
				err = fmt.Errorf("message with %d echoes outstanding: the client does not wait for its echoes", len(c.inflight)+cap(c.pending))
			} else {
				c.pending = append(c.pending, pendingEcho{k, n})
				k = -1 // the pending list holds it
				if eerr := c.echoLocked(); eerr != nil {
					err = eerr
				}
			}
		}
		c.s.ended(err)
	}
	c.mu.Unlock()
	if k >= 0 {
		sh.post(g, k)
	}
	if err != nil {
		c.release()
	}
}

// sent handles the send completion of the echo from buffer k, which the
// caller claimed for c.
func (c *conn) sent(wc fabric.WC, k int) {
	sh, g := c.s.shared, c.sub.group
	var err error
	c.mu.Lock()
	if !c.released {
		found := false
		for i, id := range c.inflight {
			if id == wc.WRID {
				c.inflight[i], found = 0, true
				break
			}
		}
		if found {
			err = c.afterSendLocked(wc, c.echoLocked)
		}
	}
	c.mu.Unlock()
	sh.post(g, k)
	if err != nil {
		c.release()
	}
}

// verify checks a received payload where it landed, in SRQ buffer k, and
// returns its length.
func (c *conn) verify(wc fabric.WC, k int) (int, error) {
	if wc.Status != fabric.WCSuccess {
		return 0, &fabric.WCError{Op: "recv", Status: wc.Status}
	}
	if c.ah != nil {
		// A datagram lands behind its GRH.
		n := min(max(wc.ByteLen-fabric.GRHLen, 0), c.s.cfg.MsgSize)
		return n, checkMessage(c.s.pool.buf(k, fabric.GRHLen+n)[fabric.GRHLen:])
	}
	n := min(max(wc.ByteLen, 0), c.s.cfg.MsgSize)
	return n, checkMessage(c.s.pool.buf(k, n))
}

// echoLocked sends the pending messages back, oldest first, while the QP
// has a free send slot. The echo goes out of the buffer the message
// arrived in; the buffer returns to the SRQ when the send completes.
func (c *conn) echoLocked() error {
	g, pool := c.sub.group, c.s.pool
	for len(c.pending) > 0 {
		slot := -1
		for i, id := range c.inflight {
			if id == 0 {
				slot = i
				break
			}
		}
		if slot < 0 {
			return nil
		}
		p := c.pending[0]
		var err error
		var id uint64
		if c.ah != nil {
			// ud: from the group's QP, through the client's address handle.
			id = g.sendingFor(p.buf, c)
			err = g.udqp.PostSendUD(id, pool.mr, pool.bufOff(p.buf)+fabric.GRHLen, p.n, c.ah, c.sub.peer.qpn, c.peerQKey)
		} else {
			id = g.sending(p.buf)
			err = c.qp.PostSend(id, pool.mr, pool.bufOff(p.buf), p.n)
		}
		if err != nil {
			return err // the buffer stays pending; release returns it
		}
		c.inflight[slot] = id
		c.pending = append(c.pending[:0], c.pending[1:]...)
	}
	return nil
}

// receivedOwn handles a receive completion of a pool-mode client: the
// message is in the receive slot its wrID names, where the QP's own
// receive queue put it.
func (c *conn) receivedOwn(wc fabric.WC) {
	var err error
	c.mu.Lock()
	if !c.released {
		size, r := c.s.cfg.MsgSize, int(min(wc.WRID, uint64(c.s.cfg.Depth-1)))
		if wc.Status != fabric.WCSuccess {
			err = &fabric.WCError{Op: "recv", Status: wc.Status}
		} else {
			n := min(max(wc.ByteLen, 0), size)
			off := c.recvOff + r*size
			if err = checkMessage(c.recvMR.Buf()[off : off+n]); err == nil {
				// Held in its receive slot until a send slot is free; the
				// client's further messages wait (RNR) while every
				// receive slot is held.
				if len(c.pending) == cap(c.pending) {
					err = fmt.Errorf("message with %d held: the client does not wait for its echoes", len(c.pending))
				} else {
					c.pending = append(c.pending, pendingEcho{buf: r, n: n})
					err = c.echoOwnLocked()
				}
			}
		}
		c.s.ended(err)
	}
	c.mu.Unlock()
	if err != nil {
		c.release()
	}
}

// afterSendLocked follows a completed echo send of c: on success the next
// echo (next), otherwise the completion's error, counted as a message
// failure. c.mu is held.
func (c *conn) afterSendLocked(wc fabric.WC, next func() error) error {
	var err error
	if wc.Status != fabric.WCSuccess {
		err = &fabric.WCError{Op: "send", Status: wc.Status}
	} else {
		err = next()
	}
	if err != nil {
		c.s.fail(result.OutcomeMessage, err)
	}
	return err
}

// sentOwn handles a send completion of a pool-mode client.
func (c *conn) sentOwn(wc fabric.WC) {
	var err error
	c.mu.Lock()
	if !c.released && wc.WRID != 0 {
		for j, id := range c.inflight {
			if id == wc.WRID {
				c.inflight[j] = 0
				err = c.afterSendLocked(wc, c.echoOwnLocked)
				break
			}
		}
	}
	c.mu.Unlock()
	if err != nil {
		c.release()
	}
}

// echoOwnLocked echoes the messages held in receive slots, oldest first,
// while send slots are free: copy, repost the receive, send. Send slot j
// is c's send buffer j (pool mode has Config.Depth of each).
func (c *conn) echoOwnLocked() error {
	size, depth := c.s.cfg.MsgSize, c.s.cfg.Depth
	for len(c.pending) > 0 {
		j := -1
		for k, id := range c.inflight[:depth] {
			if id == 0 {
				j = k
				break
			}
		}
		if j < 0 {
			return nil
		}
		p := c.pending[0]
		c.pending = append(c.pending[:0], c.pending[1:]...)
		roff, soff := c.recvOff+p.buf*size, c.sendOff+j*size
		copy(c.sendMR.Buf()[soff:soff+p.n], c.recvMR.Buf()[roff:roff+p.n])
		if err := c.qp.PostRecv(uint64(p.buf), c.recvMR, roff, size); err != nil {
			return err
		}
		c.sends++
		if err := c.qp.PostSend(c.sends, c.sendMR, soff, p.n); err != nil {
			return err
		}
		c.inflight[j] = c.sends
	}
	return nil
}

// adopt hands a connected pool- or srq-mode client over to the routers and the
// departure watcher, after which raw belongs to c. False if c was
// released already (its first message failed): the caller closes raw.
func (s *Server) adopt(c *conn, raw net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return false
	}
	c.raw = raw
	if raw == nil {
		return true // detached: the client's goodbye releases it
	}
	// The watcher may call release at once, from its goroutine: it waits
	// for c.mu until unwatch is set.
	if hc, ok := raw.(hangup.Conn); ok {
		if stop, err := s.hangups.Watch(hc, c.release); err == nil {
			c.unwatch = stop
			return true
		}
	}
	// Not a socket (or the watcher refused it): a goroutine reads instead.
	s.readers.Add(1)
	go func() {
		defer s.readers.Done()
		var b [1]byte
		raw.Read(b[:])
		c.release()
	}()
	return true
}

// release frees everything the client holds: its QP and group slot, its
// buffers (pool slot; SRQ buffers of echoes in flight or pending go back
// to the SRQ), its admission, and in pool and srq modes its socket. It runs once, whoever
// calls it first: the handler (failed setup, or the echo goroutine of the
// other modes ended), a router (a message failed), the watcher (the client
// left) or Serve's shutdown.
func (c *conn) release() {
	c.mu.Lock()
	if c.released {
		c.mu.Unlock()
		return
	}
	c.released = true
	inflight, pending := c.inflight, c.pending
	c.pending = nil
	unwatch, raw := c.unwatch, c.raw
	c.mu.Unlock()

	// A client the map guard refused has nothing mapped, and must not
	// make the guard count again.
	mapped := c.qp != nil || c.sendCQ != nil || c.recvCQ != nil
	released := c.destroy() // the QP first: nothing reads or writes the buffers after
	if mapped {
		c.s.maps.freed() // its rings are unmapped: the map guard counts again
	}
	if sh := c.s.shared; sh != nil && sh.pool != nil && c.sub != nil {
		g := c.sub.group
		for _, id := range inflight {
			if id == 0 {
				continue
			}
			// Unless the send router took it first (and returns it).
			if k, ok := g.claim(id, bufSending); ok {
				sh.post(g, k)
			}
		}
		for _, p := range pending {
			sh.post(g, p.buf)
		}
	}
	if unwatch != nil {
		unwatch()
	}
	if raw != nil {
		raw.Close()
	}
	if c.hasPSN {
		c.s.psns.drop(c.psn)
	}
	if c.mux != nil {
		return // a shared QP: its logical clients hold the admissions
	}
	c.s.releaseHello(c.hello)
	c.s.active.Add(-1)
	if released {
		// Counted last, so a client seen released has its slot free.
		c.s.mu.Lock()
		c.s.stats.Released++
		c.s.mu.Unlock()
	}
}
