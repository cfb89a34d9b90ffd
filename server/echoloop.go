package server

import (
	"context"
	"errors"

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
func (c *conn) echo(ctx context.Context) error {
	var sendCh, recvCh chan fabric.WC
	if c.sub != nil {
		sendCh, recvCh = c.sub.send, c.sub.recv
	}
	size, depth := c.s.cfg.MsgSize, c.s.cfg.Depth
	busy := make([]bool, depth) // send buffers with an echo in flight
	inflight := 0
	for {
		wc, err := c.await(ctx, c.recvCQ, recvCh)
		if err != nil {
			return err
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
		for inflight == depth {
			wc, err = c.await(ctx, c.sendCQ, sendCh)
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
	}
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
