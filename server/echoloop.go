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
		return fabric.Await(ctx, cq)
	}
	select {
	case wc := <-ch:
		return wc, nil
	case <-ctx.Done():
		return fabric.WC{}, ctx.Err()
	}
}

// echo returns each verified payload to the client until ctx ends.
func (c *conn) echo(ctx context.Context) error {
	var sendCh, recvCh chan fabric.WC
	if c.sub != nil {
		sendCh, recvCh = c.sub.send, c.sub.recv
	}
	size := c.s.cfg.MsgSize
	for {
		wc, err := c.await(ctx, c.recvCQ, recvCh)
		if err != nil {
			return err
		}
		in := c.inbound(wc)
		if err := c.handle(wc, in); err != nil {
			return err
		}
		if err := c.qp.PostRecv(0, c.recvMR, c.recvOff, size); err != nil {
			return err
		}
		if err := c.qp.PostSend(1, c.sendMR, c.sendOff, len(in)); err != nil {
			return err
		}
		wc, err = c.await(ctx, c.sendCQ, sendCh)
		if err != nil {
			return err
		}
		if wc.Status != fabric.WCSuccess {
			return &fabric.WCError{Op: "send", Status: wc.Status}
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

// inbound is the message a receive completion of c left in its receive
// buffer.
func (c *conn) inbound(wc fabric.WC) []byte {
	return c.recvMR.Buf()[c.recvOff : c.recvOff+min(max(wc.ByteLen, 0), c.s.cfg.MsgSize)]
}

// handle checks a received payload and copies it to the send buffer.
func (c *conn) handle(wc fabric.WC, in []byte) error {
	if wc.Status != fabric.WCSuccess {
		return &fabric.WCError{Op: "recv", Status: wc.Status}
	}
	if err := checkMessage(in); err != nil {
		return err
	}
	copy(c.sendMR.Buf()[c.sendOff:c.sendOff+len(in)], in)
	return nil
}
