package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/payload"
)

// The goroutine echo of the per-client and shared-cq modes: a goroutine
// per connected client awaits a receive, posts a free buffer as a
// receive in its place, echoes it from the buffer it landed in and
// verifies it while it goes, until the client leaves (echo.go is the
// event-driven echo of the pool and srq modes).

// errBye ends a client that said goodbye over its QP (payload.Bye): a
// departure, not a failure.
var errBye = errors.New("the client said goodbye")

// checkMessage verifies a received payload: nil for a message to echo,
// errBye for a goodbye.
func checkMessage(b []byte) error {
	seq, err := payload.Check(b)
	if err == nil && seq == payload.Bye {
		err = errBye
	}
	return err
}

func (c *conn) await(ctx context.Context, cq fabric.CQ, ch chan fabric.WC) (fabric.WC, error) {
	if ch == nil {
		return fabric.AwaitBusy(ctx, cq, c.s.cfg.BusyPoll)
	}
	select {
	case wc := <-ch:
		return wc, nil
	case <-ctx.Done():
		return fabric.WC{}, ctx.Err()
	}
}

// echo returns each verified payload to the client until ctx ends. The
// echo goes out of the buffer the message landed in, and the message is
// verified while it goes: the check is off the round trip (in the TCG
// guest it and the copy to a send buffer it replaces were 4.5 µs of a 60
// µs one). A message that fails its check has then been echoed as it
// came, so the client's own check fails it too; the server reports it and
// ends the client, as before. A goodbye (its header says so) and a
// failed receive are handled before anything is posted.
//
// The client's 2·Config.Depth buffers rotate (fabric.EchoLoop): Depth
// posted as receives, up to Depth being sent, the rest free. A message
// takes a free buffer's place as a receive before its echo is sent, so
// the client finds a receive for every message it may send; with all
// Depth in flight (with the default depth of 1: the echo before), the
// loop first awaits a send, as a ping-pong server does.
//
// Busy-polled on a provider that can run this loop itself
// (fabric.Echoer: verbs, in C), the server's only such loop lets it: the
// loop here takes over only the completions that provider hands back (a
// failure, a goodbye, a message that failed its check) and the waits on
// the completion channel once it has been idle for Config.BusyPoll. The
// echo is the same; a round trip crosses from Go to C once per stretch
// of messages instead of four times per message.
func (c *conn) echo(ctx context.Context) error {
	var sendCh, recvCh chan fabric.WC
	if c.sub != nil {
		sendCh, recvCh = c.sub.send, c.sub.recv
	}
	depth := c.depth()
	fast, _ := c.qp.(fabric.Echoer)
	// A shared QP's messages are each counted for their logical client,
	// in Go: the provider's loop would echo them unseen.
	if c.sub != nil || c.s.cfg.BusyPoll <= 0 || c.mux != nil {
		fast = nil
	}
	if fast != nil {
		c.s.fastLoops.Add(1)
		defer c.s.fastLoops.Add(-1)
	}
	loop := c.loop()
	for {
		var wc fabric.WC
		got := false
		// Alone, the loop spins in the provider: in C, a thread Go's
		// scheduler cannot share. With other clients' loops it polls from
		// Go, yielding between polls (fabric.Spin), so that N loops share
		// the machine's CPUs: 10 loops spinning in C on the guest's 2 CPUs
		// cut the message rate to a quarter, and taking each poll through
		// the provider's loop instead cost a quarter.
		inC := fast != nil && c.s.fastLoops.Load() <= 1
		if inC {
			var err error
			wc, got, err = fast.EchoSpin(loop, c.s.cfg.BusyPoll, echoSlice)
			if err != nil {
				return err
			}
			if !got && ctx.Err() != nil {
				return ctx.Err()
			}
			if !got && !loop.Idle {
				// The slice ended with messages still coming: back into
				// the provider's loop, without arming the CQ, whose event
				// would wake this loop's thread for a message it then
				// polls anyway (one round trip per slice paid a sleep).
				continue
			}
			if !got {
				c.s.idles.Add(1)
			}
		}
		if !got {
			var err error
			if wc, err = c.awaitFast(ctx, c.recvCQ, recvCh, inC); err != nil {
				return err
			}
		}
		b := loop.Index(wc.WRID)
		in := c.inbound(wc)
		if loop.Bufs[b] == fabric.BufSending || wc.Status != fabric.WCSuccess || payload.Seq(in) == payload.Bye {
			// Echoed by the provider and failing its check, a failure or a
			// goodbye: handle says which.
			if err := c.handle(wc, in); err != nil {
				return err
			}
			if loop.Bufs[b] == fabric.BufSending {
				return fmt.Errorf("message in buffer %d handed back as failing its check, which it passes", b)
			}
		}
		for loop.Inflight == depth {
			wc, err := c.awaitFast(ctx, c.sendCQ, sendCh, inC)
			if err != nil {
				return err
			}
			if wc.Status != fabric.WCSuccess {
				return &fabric.WCError{Op: "send", Status: wc.Status}
			}
			loop.Sent(wc.WRID)
		}
		f := loop.Free()
		if f < 0 {
			return fmt.Errorf("echo loop: no free buffer with %d of %d echoes in flight (buffers %v)", loop.Inflight, depth, loop.Bufs)
		}
		mr, off := loop.Buf(f)
		if err := c.qp.PostRecv(uint64(f), mr, off, loop.Size); err != nil {
			return err
		}
		loop.Bufs[f] = fabric.BufPosted
		mr, off = loop.Buf(b)
		if err := c.qp.PostSend(uint64(b)+1, mr, off, len(in)); err != nil {
			return err
		}
		loop.Bufs[b] = fabric.BufSending
		loop.Inflight++
		if err := checkMessage(in); err != nil {
			if c.mux != nil {
				c.mux.blame(in)
			}
			return err
		}
		if c.mux != nil {
			if err := c.mux.echoed(payload.Seq(in)); err != nil {
				return err
			}
		}
	}
}

// loop is c's echo loop before its first message: receives posted in
// its first Config.Depth buffers (setup).
func (c *conn) loop() *fabric.EchoLoop {
	return fabric.NewEchoLoop(c.recvCQ, c.sendCQ, c.recvMR, c.recvOff, c.sendMR, c.sendOff,
		c.s.cfg.MsgSize, c.depth())
}

// echoSlice bounds one fabric.Echoer call, so that the loop sees its
// context end (the client left, the server stops) within it.
const echoSlice = 20 * time.Millisecond

// awaitFast is await for a loop whose provider spun already (fast): it
// then goes straight to the completion channel.
func (c *conn) awaitFast(ctx context.Context, cq fabric.CQ, ch chan fabric.WC, fast bool) (fabric.WC, error) {
	if fast {
		return fabric.Await(ctx, cq)
	}
	return c.await(ctx, cq, ch)
}

// saidGoodbye reports whether a goodbye already waits for c when the
// server stops: its device acknowledged it, so the client has left on it
// and must be counted so (a run stops the server as soon as its load
// generators exit). In shared-cq mode the routers hand over what their
// CQs held first (Serve stops them before waiting for the handlers).
func (c *conn) saidGoodbye() bool {
	var wc fabric.WC
	if c.sub != nil {
		<-c.sub.owner.stopped
		select {
		case wc = <-c.sub.recv:
		default:
			return false
		}
	} else {
		var wcs [1]fabric.WC
		if n, err := c.recvCQ.Poll(wcs[:]); err != nil || n == 0 {
			return false
		}
		wc = wcs[0]
	}
	return errors.Is(c.handle(wc, c.inbound(wc)), errBye)
}

// inbound is the message a receive completion of c left in the buffer its
// wrID names (fabric.EchoLoop).
func (c *conn) inbound(wc fabric.WC) []byte {
	l := fabric.EchoLoop{RecvMR: c.recvMR, SendMR: c.sendMR, RecvOff: c.recvOff, SendOff: c.sendOff,
		Size: c.s.cfg.MsgSize, Depth: c.depth()}
	mr, off := l.Buf(l.Index(wc.WRID))
	return mr.Buf()[off : off+min(max(wc.ByteLen, 0), l.Size)]
}

// handle checks a received payload.
func (c *conn) handle(wc fabric.WC, in []byte) error {
	if wc.Status != fabric.WCSuccess {
		return &fabric.WCError{Op: "recv", Status: wc.Status}
	}
	return checkMessage(in)
}
