package server

import (
	"context"
	"errors"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/payload"
)

// The goroutine echo of the per-client and shared-cq modes: a goroutine
// per connected client awaits a receive, verifies it, copies it to the
// send buffer, reposts and sends, until the client leaves (echo.go is the
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

// echo returns each verified payload to the client until ctx ends. At
// most Config.Depth echoes are in flight, each from a send buffer of its
// own; once they all are, the loop awaits one's send before taking the
// next message (with the default depth of 1: each echo's send, as the
// predecessor's server did).
//
// Busy-polled on a provider that can run this loop itself
// (fabric.Echoer: verbs, in C), the server's only such loop lets it: the
// loop here takes over only the completions that provider hands back (a
// failure, a goodbye) and the waits on the completion channel once it
// has been idle for Config.BusyPoll. The echo is the same; a round trip
// crosses from Go to C once per stretch of messages instead of four
// times per message.
func (c *conn) echo(ctx context.Context) error {
	var sendCh, recvCh chan fabric.WC
	if c.sub != nil {
		sendCh, recvCh = c.sub.send, c.sub.recv
	}
	size, depth := c.s.cfg.MsgSize, c.s.cfg.Depth
	busy := make([]bool, depth) // send buffers with an echo in flight
	inflight := 0
	fast, _ := c.qp.(fabric.Echoer)
	if c.sub != nil || c.s.cfg.BusyPoll <= 0 {
		fast = nil
	}
	if fast != nil {
		c.s.fastLoops.Add(1)
		defer c.s.fastLoops.Add(-1)
	}
	loop := &fabric.EchoLoop{RecvCQ: c.recvCQ, SendCQ: c.sendCQ, RecvMR: c.recvMR, SendMR: c.sendMR,
		RecvOff: c.recvOff, SendOff: c.sendOff, Size: size, Depth: depth, Busy: busy}
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
			loop.Inflight = inflight
			wc, got, err = fast.EchoSpin(loop, c.s.cfg.BusyPoll, echoSlice)
			inflight = loop.Inflight
			if err != nil {
				return err
			}
			if !got && ctx.Err() != nil {
				return ctx.Err()
			}
		}
		for !got && inflight == depth {
			wc, err := c.awaitFast(ctx, c.sendCQ, sendCh, inC)
			if err != nil {
				return err
			}
			if wc.Status != fabric.WCSuccess {
				return &fabric.WCError{Op: "send", Status: wc.Status}
			}
			if k := int(wc.WRID) - 1; k >= 0 && k < depth && busy[k] {
				busy[k] = false
				inflight--
			}
		}
		if !got {
			var err error
			if wc, err = c.awaitFast(ctx, c.recvCQ, recvCh, inC); err != nil {
				return err
			}
		}
		in := c.inbound(wc)
		if err := c.handle(wc, in); err != nil {
			return err
		}
		r := min(wc.WRID, uint64(depth-1)) // the receive buffer it came in
		j := 0
		for busy[j] {
			j++
		}
		copy(c.sendMR.Buf()[c.sendOff+j*size:], in)
		if err := c.qp.PostRecv(r, c.recvMR, c.recvOff+int(r)*size, size); err != nil {
			return err
		}
		// A send's wrID is its buffer's index + 1.
		if err := c.qp.PostSend(uint64(j)+1, c.sendMR, c.sendOff+j*size, len(in)); err != nil {
			return err
		}
		busy[j] = true
		inflight++
	}
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

// inbound is the message a receive completion of c left in the receive
// buffer its wrID names.
func (c *conn) inbound(wc fabric.WC) []byte {
	size := c.s.cfg.MsgSize
	off := c.recvOff + int(min(wc.WRID, uint64(c.s.cfg.Depth-1)))*size
	return c.recvMR.Buf()[off : off+min(max(wc.ByteLen, 0), size)]
}

// handle checks a received payload.
func (c *conn) handle(wc fabric.WC, in []byte) error {
	if wc.Status != fabric.WCSuccess {
		return &fabric.WCError{Op: "recv", Status: wc.Status}
	}
	return checkMessage(in)
}
